"""Independent plain-Python discrete-event simulator of the simulated cluster (no jax).

It replays the compute times ``tau`` that the jax code sampled (passed as numpy arrays) with
a ``heapq`` event queue, one completion at a time, and recomputes what
``jaxnigt.cluster.schedules`` computes with array math: counts, collection end ``T``, round end,
busy-until times, wasted time and trajectories, Malenia's overflow flag, and the sequence
of asynchronous arrivals.

Arithmetic follows the same float32 conventions as the jax code so that ties resolve the
same way: completion times are relative to the round start ``t0``, built by sequential
float32 sums ``off_i + (tau_{i,0} + ... + tau_{i,k})``; absolute times are ``t0 + rel``.
Ties pop in (time, worker, k) order: lower worker id first, then lower k.

Rules it encodes (the time model of docs/cluster_model.md): a worker starts at
``max(t0, busy_until_i)``; a gradient is in flight at the collection end ``T`` only if it *began*
before ``T``; the AllReduce runs over all workers (``allreduce="all"``) or over the
contributors, the others receiving the point over their own link; asynchronous exchanges
queue at one server link (``link="shared"``) or overlap (``"independent"``).
"""

from __future__ import annotations

import heapq

import numpy as np

f32 = np.float32
MALENIA_RTOL = 1e-5


def _prefix(tau_row: np.ndarray) -> list[np.float32]:
    out, acc = [], f32(0.0)
    for t in tau_row:
        acc = f32(acc + f32(t))
        out.append(acc)
    return out


def simulate_round(
    rule: str,
    tau: np.ndarray,
    kappa: np.ndarray,
    t0: float,
    busy_until: np.ndarray,
    *,
    M: int = 1,
    capacity: int = 1,
    per_worker: int = 1,
    m: int = 1,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> dict:
    """One round of ``rule`` (rennala | malenia | sync | msync) on compute times ``tau``
    ``[n, K]``; ``msync``: each worker computes one gradient, the first ``m`` count, and a
    worker that delivered waits (only the others have work in flight)."""
    n = tau.shape[0]
    t0 = f32(t0)
    off = [max(f32(f32(b) - t0), f32(0.0)) for b in busy_until]
    cum = [_prefix(tau[i]) for i in range(n)]
    limit = {"rennala": M, "malenia": capacity, "sync": per_worker, "msync": 1}[rule]

    def completion(i, k):
        return f32(off[i] + cum[i][k])

    heap = [(completion(i, 0), i, 0) for i in range(n)]
    heapq.heapify(heap)
    counts = [0] * n
    slots: list[tuple[int, int]] = []
    t_rel = f32(0.0)
    holds = False

    def pop():
        t, i, k = heapq.heappop(heap)
        counts[i] += 1
        slots.append((i, k))
        if k + 1 < limit:
            heapq.heappush(heap, (completion(i, k + 1), i, k + 1))
        return t

    if rule in ("rennala", "msync"):
        for _ in range(M if rule == "rennala" else m):
            t_rel = pop()
    elif rule == "sync":
        while heap:
            t_rel = pop()
    elif rule == "malenia":
        threshold = n * n / M * (1.0 + MALENIA_RTOL)
        while heap:
            t_rel = pop()
            if heap and heap[0][0] == t_rel:
                continue  # b_i counts every completion <= T: finish the tie group first
            if min(counts) >= 1 and sum(1.0 / b for b in counts) <= threshold:
                holds = True
                break
    else:
        raise ValueError(rule)

    overflow = False
    if rule == "malenia":
        overflow = (not holds) or any(completion(i, capacity) <= t_rel for i in range(n))

    t_collect_end = f32(t0 + t_rel)
    if allreduce == "all":
        comm = f32(np.max(kappa))
        ready = [f32(t_collect_end + comm)] * n
    else:
        comm = f32(max([float(kappa[i]) for i in range(n) if counts[i] > 0] or [0.0]))
        ready = [
            f32(t_collect_end + (comm if counts[i] > 0 else max(comm, f32(kappa[i]))))
            for i in range(n)
        ]
    t_end = f32(t_collect_end + comm)
    wasted = traj = 0.0
    busy = []
    used = 0.0
    for i in range(n):
        b = counts[i]
        done = cum[i][b - 1] if b > 0 else f32(0.0)
        used += float(done)
        last = f32(off[i] + done)
        if rule == "sync":
            busy.append(ready[i])  # nothing in flight; idle until the new point arrives
            continue
        # its next gradient began before T (msync: only a worker that has not delivered)
        in_flight = off[i] < t_rel and last < t_rel and (rule != "msync" or b == 0)
        if inflight == "cancel":
            busy.append(ready[i])
            if in_flight:
                w = float(f32(t_rel - last))
                wasted += w
                tb = float(tau[i, b])
                traj += min(max(w / tb, 0.0), 1.0) if tb > 0 else 0.0
        else:
            if in_flight:
                wasted += float(tau[i, b])
                traj += 1.0
                free = f32(t0 + completion(i, b))
            elif off[i] < t_rel:  # completed exactly at T: free at T
                free = f32(t0 + last)
            else:  # still busy with older work through the whole collection
                free = f32(busy_until[i])
            busy.append(max(free, ready[i]))
    return {
        "counts": np.array(counts),
        "slots": slots,
        "t_collect_end": float(t_collect_end),
        "t_end": float(t_end),
        "busy_until": np.array(busy, np.float64),
        "comm_time": float(comm),
        "time_wasted": wasted,
        "traj_wasted": traj,
        "time_used": used,
        "overflow": overflow,
    }


def simulate_rounds(rule: str, taus: list[np.ndarray], kappa: np.ndarray, **kw) -> list[dict]:
    """Consecutive rounds from time 0: round ``r`` uses ``taus[r]``, starts at the last end."""
    t0, busy = 0.0, np.zeros(taus[0].shape[0])
    out = []
    for tau in taus:
        res = simulate_round(rule, tau, kappa, t0, busy, **kw)
        out.append(res)
        t0, busy = res["t_end"], res["busy_until"]
    return out


def simulate_async(
    first_tau: np.ndarray,
    next_tau: np.ndarray,
    h: np.ndarray,
    kappa: np.ndarray,
    t0: float,
    link: str = "shared",
) -> list[dict]:
    """Asynchronous arrivals: every worker dispatched at ``t0``; on each arrival the server
    version increments and the worker is re-dispatched with compute time
    ``h_w * next_tau[j]`` at arrival ``j``.

    ``link="independent"``: a heap of arrival times ``compute_end + kappa_w`` (ties: lower
    worker id).  ``link="shared"``: a heap of compute completions; the link serves the
    earliest one (ties: lower worker id) from ``max(link_free, compute_end)`` for ``kappa_w``.
    """
    n = first_tau.shape[0]
    t0 = f32(t0)
    k32 = [f32(k) for k in kappa]
    end = [f32(t0 + f32(first_tau[i])) for i in range(n)]

    def key(i):  # what the heap orders by
        return f32(end[i] + k32[i]) if link == "independent" else end[i]

    heap = [(key(i), i) for i in range(n)]
    heapq.heapify(heap)
    link_free = t0
    version = 0
    disp_version = [0] * n
    disp_time = [t0] * n
    grads = [0] * n
    tau_now = [f32(t) for t in first_tau]
    arrivals = []
    for j in range(next_tau.shape[0]):
        _, w = heapq.heappop(heap)
        start = end[w] if link == "independent" else max(link_free, end[w])
        t = f32(start + k32[w])
        link_free = t
        arrivals.append(
            {
                "worker": w,
                "time": float(t),
                "dispatch_version": disp_version[w],
                "staleness": version - disp_version[w],
                "compute_time": float(tau_now[w]),
                "grad_index": grads[w],
                "dispatch_time": float(disp_time[w]),
                "compute_end": float(end[w]),
                "link_wait": float(f32(start - end[w])),
            }
        )
        version += 1
        tau = f32(f32(h[w]) * f32(next_tau[j]))
        tau_now[w] = tau
        disp_version[w] = version
        disp_time[w] = t
        grads[w] += 1
        end[w] = f32(t + tau)
        heapq.heappush(heap, (key(w), w))
    return arrivals


def simulate_ringmaster(
    first_tau: np.ndarray,
    next_tau: np.ndarray,
    h: np.ndarray,
    kappa: np.ndarray,
    t0: float,
    *,
    R: int,
    stops: bool,
    link: str = "shared",
) -> list[dict]:
    """Ringmaster's bounded delay over the asynchronous exchanges, one event at a time.

    A worker is computing, waiting for the link, or exchanging; it joins the link at its
    compute end (the link takes the earliest, ties: lower id).  The exchange of a gradient
    of delay ``version - dispatch_version >= R`` is not an update (1 trajectory wasted);
    every exchange re-dispatches its worker at the version after it with compute time
    ``h_w * next_tau[e]`` (``e``: the exchange's index).  With ``stops``, after every update
    each worker whose gradient's delay has reached ``R`` is cut at that moment: it joins the
    link then (if it was still computing), its exchange only fetches the point, and the
    fraction it had computed is wasted.  No heap: every event scans the workers (keys change
    when a worker is cut).
    """
    n = first_tau.shape[0]
    t0 = f32(t0)
    k32 = [f32(k) for k in kappa]
    end = [f32(t0 + f32(first_tau[i])) for i in range(n)]
    tau_now = [f32(t) for t in first_tau]
    disp_time = [t0] * n
    disp_version = [0] * n
    cut = [None] * n  # fraction computed when cancelled
    link_free = t0
    version = 0
    out = []
    for e in range(next_tau.shape[0]):
        if link == "independent":
            w = min(range(n), key=lambda i: (f32(end[i] + k32[i]), i))
            start = end[w]
        else:
            w = min(range(n), key=lambda i: (end[i], i))
            start = max(link_free, end[w])
        t = f32(start + k32[w])
        link_free = t
        delay = version - disp_version[w]
        if cut[w] is not None:
            accepted, wasted = False, float(cut[w])
        else:
            accepted = delay < R
            wasted = 0.0 if accepted else 1.0
        out.append({"worker": w, "time": float(t), "staleness": delay,
                    "accepted": accepted, "wasted": wasted})  # fmt: skip
        version += int(accepted)
        disp_version[w], disp_time[w], cut[w] = version, t, None
        tau_now[w] = f32(f32(h[w]) * f32(next_tau[e]))
        end[w] = f32(t + tau_now[w])
        if stops and accepted:
            for i in range(n):
                if cut[i] is None and version - disp_version[i] >= R:
                    done = f32(f32(t - disp_time[i]) / tau_now[i]) if tau_now[i] > 0 else f32(1)
                    cut[i] = min(max(done, f32(0)), f32(1))
                    end[i] = min(end[i], t)
    return out


def simulate_steps(
    tau: np.ndarray,
    message: np.ndarray,
    inference: float,
    horizon: int,
    batch: int,
    updates: int,
    learner_time: float,
    link: str = "shared",
) -> tuple[list[list[dict]], list[float], dict]:
    """Central inference's per-step clock (SEED RL) with ``updates`` learner batches.

    ``tau[i, k]`` is the compute time of worker ``i``'s trajectory ``k``, spread evenly over
    its ``horizon`` steps.  A heap holds each actor's next step: its request time
    (``shared``: the link serves the earliest request, ties lower worker id, from
    ``max(link_free, request)`` for ``message_i``) or its request plus ``message_i``
    (``independent``).  A step is served with the number of learner updates completed by
    the end of its exchange and ends ``inference`` later; a trajectory completes with its
    last step; every ``batch`` completions the learner updates, from ``max(previous update
    done, last completion)`` for ``learner_time``.

    Returns the batches (each a list of ``{"worker", "traj", "time", "versions"}``), the
    updates' completion times, and totals (``messages``, ``link_busy``, ``time``).
    """
    n = tau.shape[0]
    m32 = [f32(m) for m in message]
    inference, learner_time = f32(inference), f32(learner_time)
    share = [f32(f32(tau[i, 0]) / f32(horizon)) for i in range(n)]
    request = list(share)
    step, traj = [0] * n, [0] * n
    versions = [[0] * horizon for _ in range(n)]

    def key(i):
        return f32(request[i] + m32[i]) if link == "independent" else request[i]

    heap = [(key(i), i) for i in range(n)]
    heapq.heapify(heap)
    link_free = f32(0.0)
    done: list[np.float32] = []
    batches: list[list[dict]] = []
    completed: list[dict] = []
    totals = {"messages": 0, "link_busy": f32(0.0), "time": f32(0.0)}
    while len(batches) < updates:
        _, w = heapq.heappop(heap)
        start = request[w] if link == "independent" else max(link_free, request[w])
        served = f32(start + m32[w])
        link_free = served
        end = f32(served + inference)
        versions[w][step[w]] = sum(d <= served for d in done)
        totals["messages"] += 1
        totals["link_busy"] = f32(totals["link_busy"] + m32[w])
        totals["time"] = end
        if step[w] == horizon - 1:
            completed.append(
                {"worker": w, "traj": traj[w], "time": float(end), "versions": list(versions[w])}
            )
            traj[w] += 1
            step[w] = 0
            share[w] = f32(f32(tau[w, traj[w]]) / f32(horizon))
            if len(completed) == batch:
                previous = done[-1] if done else f32(-np.inf)
                done.append(f32(max(previous, end) + learner_time))
                batches.append(completed)
                completed = []
        else:
            step[w] += 1
        request[w] = f32(end + share[w])
        heapq.heappush(heap, (key(w), w))
    return batches, [float(d) for d in done], totals
