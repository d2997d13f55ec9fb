"""Round schedules of the AllReduce methods: Rennala, Malenia and synchronous (SPEC §3-4).

A schedule is a pure function of sampled compute times: it decides *which* gradients count
and when the round ends, before any trajectory is rolled out, so only the trajectories that
count need to be simulated.  Aggregator weights live in :mod:`jaxnigt.aggregators`; the
asynchronous per-arrival engine lives in :mod:`jaxnigt.events`.

Conventions shared by every round schedule:

* **Start.** Worker ``i`` starts at ``s_i = max(t0, busy_until_i)``: ``busy_until`` is when
  the worker is free to work at the round's point (it received the point, and in ``discard``
  mode finished its stale gradient).  Its ``k``-th completion is
  ``s_i + tau_{i,0} + ... + tau_{i,k}``.  Completion times are computed relative to ``t0``
  with a *sequential* float32 prefix sum (a ``lax.scan``), so the rounding is reproducible by
  a plain-Python simulator; absolute times are ``t0 + relative``.
* **Ties.** Completions at equal times are ordered by lower worker id, then lower ``k``.
  Rennala takes exactly ``M`` slots in that order; Malenia counts *all* completions
  ``<= T``.
* **End.** Collection ends at ``T``; one AllReduce follows.  ``allreduce="all"``: over all
  workers, costing ``kappa_P = max_i kappa_i``.  ``allreduce="contributors"``: over the
  workers with ``b_i >= 1``, costing ``kappa_P = max_{b_i >= 1} kappa_i``; every other worker
  receives the new point over its own link and is ready at ``T + max(kappa_P, kappa_i)``.
  The next round starts at ``t_end = T + kappa_P`` (the server point is updated then).
  ``comms`` counts vector communications: one AllReduce = 1 (scalar signals are free).
* **In flight at T** is the gradient a worker *began before* ``T`` and had not completed by
  ``T`` (or completed exactly at ``T`` without being used, a Rennala tie).  A gradient that
  would begin at or after ``T`` has done no work: the worker whose completion ends the
  collection, and any worker completing exactly at ``T``, is free at ``T``.
  ``cancel`` -- the partial gradient is stopped: wasted worker-time ``T - last completion``
  (or ``T - s_i``), wasted trajectories = the completed fraction of that gradient.
  ``discard`` -- the in-flight gradient runs to completion and is thrown away: wasted time =
  its whole compute time, 1 wasted trajectory, and the worker is busy until that completion.
  Either way ``busy_until`` of the next round is the later of that and the time the worker
  receives the new point.  With ``kappa = 0`` discard mode is Tyurin's asynchronous
  simulator: every worker restarts at the newest point after each completion, and
  completions computed at an older point are dropped.
* The synchronous schedule has no in-flight work: every worker computes exactly ``b``
  gradients then idles (idle time is not "wasted"; see utilisation in ``jaxnigt clock``).

Compute times drawn per round: Malenia ``capacity + 1`` per worker and sync ``per_worker``
(``sample_compute_times(tm, key, num)``; the extra column is the in-flight gradient).
Rennala draws every worker's first time and ``M`` more only for the ``min(n, M)`` workers
that can contribute (:func:`sample_rennala_times`), so its cost does not grow with ``n * M``.
The ``*_from_times`` functions take a full ``[n, K]`` matrix explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxnigt.timing import TimeModel, sample_compute_times, sample_noise

INFLIGHT = ("cancel", "discard")
ALLREDUCE = ("all", "contributors")
# Malenia's rule compares a float32 sum of 1/b_i with n^2/M; this relative slack keeps exact
# ties (e.g. b = (3, 3, 3), M = 9) on the "holds" side despite rounding.
MALENIA_RTOL = 1e-5


class RoundSchedule(NamedTuple):
    """One round of a collection schedule (arrays only).

    Attributes:
      slot_worker: ``[S]`` int32 worker of each trajectory slot; valid slots first, in
        completion-time order.
      slot_rank: ``[S]`` int32 ``k``: the slot is its worker's ``k``-th (0-based) gradient of
        the round (use for per-slot PRNG keys).
      slot_valid: ``[S]`` bool.
      num_slots: ``[]`` int32 number of valid slots.
      counts: ``[n]`` int32 gradients per worker ``b_i``.
      t_start: ``[]`` float32 round start ``t0``.
      t_collect_end: ``[]`` float32 end of collection ``T``.
      t_end: ``[]`` float32 ``T + comm_time``, the next round's start.
      comm_time: ``[]`` float32 ``kappa_P``, the AllReduce's cost (``max_i kappa_i`` over
        its participants).
      time_wasted: ``[]`` float32 worker-time spent on cancelled or discarded gradients.
      traj_wasted: ``[]`` float32 trajectories' worth of wasted work (times ``H`` = steps).
      comms: ``[]`` int32 vector communications (one AllReduce = 1).
      busy_until: ``[n]`` float32 absolute time each worker is free to start the next
        round's work: it has the new point and (``discard``) has finished its stale gradient.
      overflow: ``[]`` bool Malenia needed more than ``capacity`` gradients from a worker
        (always False for Rennala and sync).
      time_used: ``[]`` float32 worker-time spent on the gradients that count.
    """

    slot_worker: jax.Array
    slot_rank: jax.Array
    slot_valid: jax.Array
    num_slots: jax.Array
    counts: jax.Array
    t_start: jax.Array
    t_collect_end: jax.Array
    t_end: jax.Array
    comm_time: jax.Array
    time_wasted: jax.Array
    traj_wasted: jax.Array
    comms: jax.Array
    busy_until: jax.Array
    overflow: jax.Array
    time_used: jax.Array


class Collection(NamedTuple):
    """What a rule decided (before the shared end-of-round bookkeeping).

    Attributes:
      t_rel: ``[]`` ``T - t0``.
      counts: ``[n]`` int32 gradients used per worker.
      slot_worker, slot_rank, slot_valid: ``[S]`` the slots, valid ones first.
      overflow: ``[]`` bool.
    """

    t_rel: jax.Array
    counts: jax.Array
    slot_worker: jax.Array
    slot_rank: jax.Array
    slot_valid: jax.Array
    overflow: jax.Array


class WorkerTimes(NamedTuple):
    """Per-worker times of a round, relative to ``t0`` (all ``[n]`` float32).

    Attributes:
      off: when the worker starts.
      done: compute time of its used gradients (``off + done`` = its last used completion).
      tau_next: compute time of its next gradient (the one that may be in flight).
      cum_next: ``done + tau_next``: that gradient's end relative to ``off``.
    """

    off: jax.Array
    done: jax.Array
    tau_next: jax.Array
    cum_next: jax.Array


def sync_batch(M: int, n: int, per_worker: int | None = None) -> int:
    """Per-worker batch of the synchronous schedule: ``max(1, ceil(M / n))`` unless given."""
    if per_worker is not None:
        if int(per_worker) < 1:
            raise ValueError(f"per_worker must be >= 1, got {per_worker}")
        return int(per_worker)
    return max(1, math.ceil(M / n))


def default_malenia_capacity(M: int, n: int) -> int:
    """Default per-worker gradient capacity of a Malenia round: ``6 * M``.

    The rule needs ``b_i >= M / n^2`` from every worker and roughly ``h_slow / h_fast`` times
    more from the fastest one.  The hardest scenario of the paper, ``n = 2``,
    ``h = (1, 10)``, needs about ``2.75 M`` from the fast worker on average; ``6 M`` leaves
    room for noise (exponential noise overflowed ~1 round in 5 at ``4 M``).  A round that
    needs more sets ``overflow``; pass a larger ``capacity`` then.
    """
    del n
    return 6 * int(M)


def _check_static(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")


def _check_modes(inflight: str, allreduce: str) -> None:
    _check_choice("inflight", inflight, INFLIGHT)
    _check_choice("allreduce", allreduce, ALLREDUCE)


def sequential_cumsum(tau: jax.Array) -> jax.Array:
    """Prefix sums along the last axis of ``[n, K]``, accumulated left to right in order.

    ``jnp.cumsum`` may associate differently on some backends; a sequential sum makes the
    float32 completion times (and hence tie-breaking) reproducible by a plain simulator.
    """

    def step(acc, col):
        acc = acc + col
        return acc, acc

    _, out = lax.scan(step, jnp.zeros(tau.shape[0], tau.dtype), tau.T)
    return out.T


def start_offsets(t0: jax.typing.ArrayLike, busy_until: jax.Array) -> jax.Array:
    """``[n]`` float32 start of each worker relative to ``t0``: ``max(busy_until - t0, 0)``."""
    t0 = jnp.asarray(t0, jnp.float32)
    return jnp.maximum(jnp.asarray(busy_until, jnp.float32) - t0, 0.0)


def _prologue(rule: str, tau: jax.Array, need: int, t0, busy_until):
    """Shared prologue of the full-matrix rules: ``(t0, tau, off, cum)`` with ``cum[i, k]``
    the time worker i needs for its first k+1 gradients and ``off[i]`` when it starts."""
    K = tau.shape[1]
    if K < need:
        raise ValueError(f"{rule} needs {need} compute times per worker, got {K}")
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, :need].astype(jnp.float32)
    return t0, tau, start_offsets(t0, busy_until), sequential_cumsum(tau)


def worker_times(off: jax.Array, tau: jax.Array, cum: jax.Array, counts: jax.Array):
    """:class:`WorkerTimes` from full ``[n, K]`` matrices and the used ``counts``
    (requires ``K > max(counts)`` for the next gradient; it is clipped to column K-1)."""
    prev = jnp.take_along_axis(cum, jnp.maximum(counts - 1, 0)[:, None], axis=1)[:, 0]
    done = jnp.where(counts > 0, prev, 0.0)
    idx = jnp.minimum(counts, tau.shape[1] - 1)[:, None]
    tau_next = jnp.take_along_axis(tau, idx, axis=1)[:, 0]
    cum_next = jnp.take_along_axis(cum, idx, axis=1)[:, 0]
    return WorkerTimes(off, done, tau_next, cum_next)


def allreduce_times(
    kappa: jax.Array, counts: jax.Array, t_collect_end: jax.Array, allreduce: str
) -> tuple[jax.Array, jax.Array]:
    """``(kappa_P, ready)``: the AllReduce's cost and ``[n]`` when each worker has the new
    point (``t_collect_end + kappa_P``, or ``+ max(kappa_P, kappa_i)`` for a worker outside
    the AllReduce's participants P)."""
    kappa = jnp.asarray(kappa, jnp.float32)
    if allreduce == "all":
        kappa_p = jnp.max(kappa)
        return kappa_p, jnp.full(kappa.shape, t_collect_end + kappa_p)
    inside = counts >= 1
    kappa_p = jnp.max(jnp.where(inside, kappa, 0.0))
    ready = jnp.where(inside, kappa_p, jnp.maximum(kappa_p, kappa))
    return kappa_p, t_collect_end + ready


def finish_round(
    kappa: jax.Array,
    t0: jax.Array,
    busy_until: jax.Array,
    work: WorkerTimes,
    coll: Collection,
    *,
    inflight: str,
    allreduce: str,
    has_inflight: bool = True,
) -> RoundSchedule:
    """Timing, waste and readiness bookkeeping shared by every round schedule."""
    t_rel = coll.t_rel
    t_collect_end = t0 + t_rel
    comm_time, ready = allreduce_times(kappa, coll.counts, t_collect_end, allreduce)
    started = work.off < t_rel
    last = work.off + work.done  # the worker's last used completion (or its start)
    # In flight: its next gradient began strictly before T (a worker whose completion is
    # exactly at T would only begin one at T: it has done no work and is free at T).
    busy = started & (last < t_rel) if has_inflight else jnp.zeros_like(started)
    if inflight == "cancel":
        wasted = jnp.where(busy, t_rel - last, 0.0)
        safe_tau = jnp.where(work.tau_next > 0, work.tau_next, 1.0)
        frac = jnp.where(busy & (work.tau_next > 0), jnp.clip(wasted / safe_tau, 0.0, 1.0), 0.0)
        new_busy = ready
    else:
        wasted = jnp.where(busy, work.tau_next, 0.0)
        frac = busy.astype(jnp.float32)
        free = jnp.where(started, t0 + last, jnp.asarray(busy_until, jnp.float32))
        free = jnp.where(busy, t0 + (work.off + work.cum_next), free)
        new_busy = jnp.maximum(ready, free)
    return RoundSchedule(
        slot_worker=coll.slot_worker.astype(jnp.int32),
        slot_rank=coll.slot_rank.astype(jnp.int32),
        slot_valid=coll.slot_valid,
        num_slots=jnp.sum(coll.counts).astype(jnp.int32),
        counts=coll.counts.astype(jnp.int32),
        t_start=t0,
        t_collect_end=t_collect_end,
        t_end=t_collect_end + comm_time,
        comm_time=comm_time,
        time_wasted=jnp.sum(wasted).astype(jnp.float32),
        traj_wasted=jnp.sum(frac).astype(jnp.float32),
        comms=jnp.int32(1),
        busy_until=new_busy.astype(jnp.float32),
        overflow=jnp.asarray(coll.overflow, bool),
        time_used=jnp.sum(work.done).astype(jnp.float32),
    )


def _rennala_candidates(first_end: jax.Array, M: int) -> jax.Array:
    """The ``min(n, M)`` workers, in increasing id, that can contribute to a Rennala round.

    ``first_end[i]`` is worker ``i``'s first completion (relative to ``t0``).  Completions
    of a worker only grow with ``k`` (``tau >= 0``), so in the order (time, worker, k) the
    ``M`` earliest completions overall come from the ``M`` workers whose *first* completion
    is earliest: any other worker's first completion is preceded by those ``M``.  Only these
    workers' later compute times are ever needed.
    """
    m = min(first_end.shape[0], M)
    # top_k puts the lower index (= lower worker) first among equal values.
    _, rows = lax.top_k(-first_end, m)
    return jnp.sort(lax.optimization_barrier(rows))


def _rennala_round(
    kappa: jax.Array,
    t0: jax.Array,
    busy_until: jax.Array,
    first: jax.Array,
    rows: jax.Array,
    tau_rows: jax.Array,
    *,
    M: int,
    inflight: str,
    allreduce: str,
) -> RoundSchedule:
    """Rennala round from every worker's first compute time ``first`` ``[n]`` and the full
    compute times ``tau_rows`` ``[m, M + 1]`` of the candidate workers ``rows``
    (:func:`_rennala_candidates`, increasing ids)."""
    n, m = first.shape[0], rows.shape[0]
    off = start_offsets(t0, busy_until)
    cum_rows = sequential_cumsum(tau_rows)
    cand = (off[rows][:, None] + cum_rows[:, :M]).reshape(-1)
    # Flat index j * M + k orders candidates by (worker, k) because rows are sorted, and
    # top_k puts the lower flat index first among equal values.  The barrier keeps XLA from
    # folding later slices of the result into the top_k, which turns it into a full sort on
    # CPU.  It wraps the indices alone: a barrier over top_k's whole (values, indices) tuple
    # crashes XLA's SPMD partitioner when the run is sharded; T is gathered from the indices.
    _, idx = lax.top_k(-cand, M)
    idx = lax.optimization_barrier(idx)
    slot_row, slot_rank = idx // M, idx % M
    counts_rows = jnp.zeros((m,), jnp.int32).at[slot_row].add(1)
    rows_work = worker_times(off[rows], tau_rows, cum_rows, counts_rows)
    # Workers outside ``rows`` use no gradient; their next gradient is their first.
    work = WorkerTimes(
        off=off,
        done=jnp.zeros((n,), jnp.float32).at[rows].set(rows_work.done),
        tau_next=first.at[rows].set(rows_work.tau_next),
        cum_next=first.at[rows].set(rows_work.cum_next),
    )
    coll = Collection(
        t_rel=cand[idx[M - 1]],
        counts=jnp.zeros((n,), jnp.int32).at[rows].set(counts_rows),
        slot_worker=rows[slot_row],
        slot_rank=slot_rank,
        slot_valid=jnp.ones((M,), bool),
        overflow=jnp.bool_(False),
    )
    return finish_round(kappa, t0, busy_until, work, coll, inflight=inflight, allreduce=allreduce)


def rennala_from_times(
    kappa: jax.Array,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Rennala round from sampled compute times ``tau`` ``[n, K >= M + 1]``.

    ``T`` is the ``M``-th earliest completion overall; exactly ``M`` slots (ties: lower worker
    id, then lower ``k``).  Only the ``min(n, M)`` workers with the earliest first completion
    can contribute (:func:`_rennala_candidates`), so the cost is one ``top_k`` over ``n``
    first completions and one over ``M * min(n, M)`` candidates.
    """
    M = _check_static("M", M)
    _check_modes(inflight, allreduce)
    if tau.shape[1] < M + 1:
        raise ValueError(
            f"rennala (M + 1) needs {M + 1} compute times per worker, got {tau.shape[1]}"
        )
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, : M + 1].astype(jnp.float32)
    rows = _rennala_candidates(start_offsets(t0, busy_until) + tau[:, 0], M)
    return _rennala_round(
        kappa,
        t0,
        busy_until,
        tau[:, 0],
        rows,
        tau[rows],
        M=M,
        inflight=inflight,
        allreduce=allreduce,
    )


def malenia_from_times(
    kappa: jax.Array,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    capacity: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Malenia round from sampled compute times ``tau`` ``[n, K >= capacity + 1]``.

    ``T`` is the first completion time at which every ``b_i >= 1`` and
    ``(1/n sum_i 1/b_i)^{-1} >= M/n``, i.e. ``sum_i 1/b_i <= n^2 / M`` (with relative slack
    :data:`MALENIA_RTOL`), where ``b_i`` counts all completions ``<= T``.  The rule is
    monotone in time, so ``T`` is found by binary search over the sorted completion times,
    evaluating ``sum_i 1/b_i`` directly (no drifting running sum).  ``overflow`` is set when
    the rule never holds within ``capacity`` gradients per worker (then every slot is used)
    or when a worker's ``capacity + 1``-th completion is ``<= T``.  Every worker contributes,
    so ``allreduce`` makes no difference.

    Cost: one stable sort of the ``n * capacity`` completion times (to order the slots by
    completion time) plus ``O(log(n capacity))`` passes of ``O(n capacity)`` comparisons.  The
    sort dominates on CPU (about 1.3 s at ``n = 10,000``, ``capacity = 300``).
    """
    M = _check_static("M", M)
    cap = _check_static("capacity", capacity)
    _check_modes(inflight, allreduce)
    t0, tau, off, cum = _prologue("malenia (capacity + 1)", tau, cap + 1, t0, busy_until)
    comp = off[:, None] + cum
    used = comp[:, :cap]
    flat = used.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    events = flat[order]
    hi = _malenia_end(used, events, M)
    t_rel = events[jnp.minimum(hi, events.shape[0] - 1)]
    counts = jnp.sum(used <= t_rel, axis=1).astype(jnp.int32)
    coll = Collection(
        t_rel=t_rel,
        counts=counts,
        slot_worker=order // cap,
        slot_rank=order % cap,
        slot_valid=events <= t_rel,
        overflow=(hi >= events.shape[0]) | jnp.any(comp[:, cap] <= t_rel),
    )
    work = worker_times(off, tau, cum, counts)
    return finish_round(kappa, t0, busy_until, work, coll, inflight=inflight, allreduce=allreduce)


def _malenia_end(used: jax.Array, events: jax.Array, M: int) -> jax.Array:
    """Index into the sorted completions ``events`` of the first at which Malenia's rule
    holds for the ``[n, capacity]`` completion times ``used`` (``len(events)`` if never).

    The rule is monotone in time: a binary search evaluating ``sum_i 1/b_i`` directly."""
    n, num = used.shape[0], events.shape[0]
    threshold = jnp.float32(n * n / M * (1.0 + MALENIA_RTOL))

    def holds(t):
        b = jnp.sum(used <= t, axis=1)
        return jnp.all(b >= 1) & (jnp.sum(1.0 / jnp.maximum(b, 1).astype(jnp.float32)) <= threshold)

    def search(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        ok = holds(events[jnp.minimum(mid, num - 1)])
        active = lo < hi
        return jnp.where(active & ~ok, mid + 1, lo), jnp.where(active & ok, mid, hi)

    _, hi = lax.fori_loop(0, num.bit_length() + 1, search, (jnp.int32(0), jnp.int32(num)))
    return hi


def sync_from_times(
    kappa: jax.Array,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Synchronous round from ``tau`` ``[n, K >= per_worker]``: every worker computes
    ``b = per_worker`` gradients; ``T`` is the slowest worker's ``b``-th completion.  Every
    worker contributes, so ``allreduce`` makes no difference; nothing is ever in flight."""
    b = _check_static("per_worker", per_worker)
    _check_modes(inflight, allreduce)
    n = tau.shape[0]
    t0, tau, off, cum = _prologue("sync (per_worker)", tau, b, t0, busy_until)
    flat = (off[:, None] + cum).reshape(-1)
    order = jnp.argsort(flat, stable=True)
    counts = jnp.full((n,), b, jnp.int32)
    coll = Collection(
        t_rel=jnp.max(flat),
        counts=counts,
        slot_worker=order // b,
        slot_rank=order % b,
        slot_valid=jnp.ones((n * b,), bool),
        overflow=jnp.bool_(False),
    )
    work = worker_times(off, tau, cum, counts)
    return finish_round(
        kappa,
        t0,
        busy_until,
        work,
        coll,
        inflight=inflight,
        allreduce=allreduce,
        has_inflight=False,
    )


def rennala(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Rennala round (SPEC §4): the first ``M`` gradients to finish, ``S = M`` slots.

    Args:
      tm: time model.
      key: PRNG key for this round's compute times (:func:`sample_rennala_times`).
      t0: ``[]`` round start.
      busy_until: ``[n]`` absolute time each worker is free to start (see
        :class:`RoundSchedule`).
      M: static batch size.
      inflight: ``"cancel"`` or ``"discard"``.
      allreduce: ``"all"`` or ``"contributors"`` (who takes part in the AllReduce).

    Example::

      tm = make_time_model(10, h="sqrt", noise="exponential")
      s = rennala(tm, key, 0.0, jnp.zeros(10), M=50)
    """
    M = _check_static("M", M)
    _check_modes(inflight, allreduce)
    t0 = jnp.asarray(t0, jnp.float32)
    first, rows, tau_rows = sample_rennala_times(tm, key, start_offsets(t0, busy_until), M=M)
    return _rennala_round(
        tm.kappa,
        t0,
        busy_until,
        first,
        rows,
        tau_rows,
        M=M,
        inflight=inflight,
        allreduce=allreduce,
    )


def sample_rennala_times(
    tm: TimeModel, key: jax.Array, off: jax.Array, *, M: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The compute times one Rennala round needs, drawn lazily: ``O(n + M^2)`` draws.

    Every worker's first compute time is drawn (``first`` ``[n]``, from
    ``fold_in(key, 0)``); the ``m = min(n, M)`` workers whose first completion
    ``off + first`` is earliest (``rows``, increasing ids) are the only ones that can
    contribute, and only they get their next ``M`` compute times (from ``fold_in(key, 1)``).
    ``tau_rows`` ``[m, M + 1]`` is their full row.  In distribution this is the same as
    drawing all ``n * (M + 1)`` times; :func:`rennala_from_times` on any ``[n, M + 1]``
    matrix with column 0 ``first`` and rows ``rows`` equal to ``tau_rows`` (other entries
    arbitrary) gives the same round.
    """
    first = sample_compute_times(tm, jax.random.fold_in(key, 0), 1)[:, 0]
    rows = _rennala_candidates(off + first, M)
    rest = tm.h[rows][:, None] * sample_noise(tm, jax.random.fold_in(key, 1), (rows.shape[0], M))
    return first, rows, jnp.concatenate([first[rows][:, None], rest], axis=1)


def malenia(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    capacity: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Malenia round (SPEC §4), ``S = n * capacity`` slots; see :func:`malenia_from_times`.

    ``capacity`` is the static maximum number of gradients per worker
    (:func:`default_malenia_capacity`); ``capacity + 1`` compute times are drawn per worker.
    """
    tau = sample_compute_times(tm, key, int(capacity) + 1)
    return malenia_from_times(
        tm.kappa,
        tau,
        t0,
        busy_until,
        M=M,
        capacity=capacity,
        inflight=inflight,
        allreduce=allreduce,
    )


def sync(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Synchronous round (SPEC §4), ``S = n * per_worker`` slots (:func:`sync_batch`)."""
    tau = sample_compute_times(tm, key, int(per_worker))
    return sync_from_times(
        tm.kappa,
        tau,
        t0,
        busy_until,
        per_worker=per_worker,
        inflight=inflight,
        allreduce=allreduce,
    )


def run_rounds(schedule: Callable, tm: TimeModel, key: jax.Array, rounds: int) -> RoundSchedule:
    """``rounds`` consecutive rounds of ``schedule`` (``(tm, key, t0, busy_until) ->
    RoundSchedule``) from time 0 with every worker free, round r keyed ``fold_in(key, r)``;
    the schedules stacked along a leading ``[rounds]`` axis (``rounds`` static)."""

    def one(carry, r):
        t0, busy = carry
        s = schedule(tm, jax.random.fold_in(key, r), t0, busy)
        return (s.t_end, s.busy_until), s

    init = (jnp.float32(0.0), jnp.zeros((tm.n,), jnp.float32))
    return jax.lax.scan(one, init, jnp.arange(rounds))[1]
