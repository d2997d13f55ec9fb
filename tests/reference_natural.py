"""A second reference for the clock, written in the most natural event-driven form (no jax).

Where ``reference_sim.py`` replays one round at a time with the schedules' own conventions
(relative times, start offsets, in-flight bookkeeping), this module simulates the cluster the
way one would describe it in words, with no notion of a "round" on the workers' side:

* **Discard rounds, kappa = 0** (:func:`discard_rounds`): every worker computes gradients
  back to back.  After each completion it restarts at the *newest* server point.  A
  completion computed at the current point counts towards the server's stopping rule
  (Rennala: ``M`` in total; Malenia: every ``b_i >= 1`` and harmonic mean ``>= M/n``); when
  the rule holds the server moves to a new point at once.  A completion computed at an older
  point is dropped.  This is Tyurin's asynchronous simulator; the clock's ``inflight:
  discard`` mode must give the same round end times.
* **Asynchronous arrivals** (:func:`async_arrivals`): explicit ``computed`` and
  ``exchanged`` events; with a ``shared`` server link, computed gradients wait in a queue
  that the link serves one at a time (earliest request first, ties to the lower worker id).

Times are absolute float64 in the round simulation (it is compared to float tolerance on
tie-free configurations).  The asynchronous simulation mirrors the engine's float32
additions so that arrival *orders* agree exactly even after thousands of events.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

f32 = np.float32


def discard_rounds(
    rule: str,
    n: int,
    rounds: int,
    tau_of: Callable[[int, int, int], float],
    *,
    M: int,
) -> list[dict]:
    """Round ends of the natural asynchronous simulator with kappa = 0.

    Args:
      rule: ``rennala`` or ``malenia``.
      n: number of workers.
      rounds: server points to complete.
      tau_of: ``(version, worker, k) -> compute time`` of the ``k``-th gradient that worker
        begins while the server is at ``version``.
      M: the rule's batch size.

    Returns:
      One dict per round: ``t_end`` (the time the server moved on) and ``counts`` (gradients
      of the finished point per worker).
    """
    version = 0
    begun = [0] * n  # gradients begun at the current version, per worker
    counts = [0] * n
    events: list[tuple[float, int, int]] = []  # (completion time, worker, version computed at)

    def begin(worker: int, now: float) -> None:
        tau = float(tau_of(version, worker, begun[worker]))
        begun[worker] += 1
        heapq.heappush(events, (now + tau, worker, version))

    for w in range(n):
        begin(w, 0.0)
    out: list[dict] = []
    while len(out) < rounds:
        now = events[0][0]
        finished = []
        while events and events[0][0] == now:  # every completion at this instant
            _, w, at = heapq.heappop(events)
            finished.append(w)
            if at == version and not (rule == "rennala" and sum(counts) == M):
                counts[w] += 1
        if _rule_holds(rule, counts, n, M):
            out.append({"t_end": now, "counts": np.array(counts)})
            version += 1
            begun = [0] * n
            counts = [0] * n
        for w in finished:  # each restarts at the newest point
            begin(w, now)
    return out


def _rule_holds(rule: str, counts: list[int], n: int, M: int) -> bool:
    if rule == "rennala":
        return sum(counts) >= M
    if rule == "malenia":
        return min(counts) >= 1 and sum(1.0 / b for b in counts) <= n * n / M * (1 + 1e-5)
    raise ValueError(rule)


def async_arrivals(
    first_tau: np.ndarray,
    xi: np.ndarray,
    h: np.ndarray,
    kappa: np.ndarray,
    t0: float,
    link: str,
) -> list[dict]:
    """Arrivals of the per-arrival engine from explicit compute and exchange events.

    Args:
      first_tau: ``[n]`` compute time of every worker's first gradient (dispatched at t0).
      xi: ``[J]`` noise of the gradient dispatched at arrival j (time ``h_w * xi[j]``).
      h, kappa: ``[n]`` compute scales and exchange times.
      t0: start time.
      link: ``shared`` (one FIFO server link) or ``independent``.

    Returns:
      One dict per arrival: worker, time, staleness, dispatch_version, link_wait.
    """
    n = len(first_tau)
    events: list[tuple[np.float32, int, int]] = []  # (time, 0 = exchanged / 1 = computed, w)
    queue: list[tuple[np.float32, int]] = []  # (request time, worker) waiting for the link
    link_busy = False
    version = 0
    point_of = [0] * n  # server version each worker computes at
    computed_at = [f32(f32(t0) + f32(t)) for t in first_tau]
    exchange_start = [f32(0)] * n
    for w in range(n):
        heapq.heappush(events, (computed_at[w], 1, w))
    arrivals: list[dict] = []

    def exchange(w: int, now: np.float32) -> None:
        exchange_start[w] = now
        heapq.heappush(events, (f32(now + f32(kappa[w])), 0, w))

    while len(arrivals) < len(xi):
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, w = heapq.heappop(events)
            if kind == 1 and link == "independent":
                exchange(w, now)
            elif kind == 1:
                heapq.heappush(queue, (now, w))
            else:  # the server applies the gradient; the worker takes the new point
                arrivals.append(
                    {
                        "worker": w,
                        "time": float(now),
                        "staleness": version - point_of[w],
                        "dispatch_version": point_of[w],
                        "link_wait": float(exchange_start[w] - computed_at[w]),
                    }
                )
                tau = f32(f32(h[w]) * f32(xi[version]))
                version += 1
                point_of[w] = version
                computed_at[w] = f32(now + tau)
                heapq.heappush(events, (computed_at[w], 1, w))
                link_busy = False
        if link == "shared" and queue and not link_busy:
            link_busy = True
            exchange(heapq.heappop(queue)[1], now)
    return arrivals[: len(xi)]
