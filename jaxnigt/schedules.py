"""Round schedules (Rennala, Malenia, synchronous) and the asynchronous event engine.

A schedule is a pure function of sampled compute times (SPEC §3-4): it decides *which*
gradients count and when the round ends, before any trajectory is rolled out, so only the
trajectories that count need to be simulated.  Aggregator weights live in
:mod:`jaxnigt.aggregators`.

Conventions shared by every round schedule:

* **Start.** Worker ``i`` starts at ``s_i = t0`` (``inflight="cancel"``) or
  ``s_i = max(t0, busy_until_i)`` (``inflight="discard"``); its ``k``-th completion is
  ``s_i + tau_{i,0} + ... + tau_{i,k}``.  Completion times are computed relative to ``t0``
  with a *sequential* float32 prefix sum (a ``lax.scan``), so the rounding is reproducible by
  a plain-Python simulator; absolute times are ``t0 + relative``.
* **Ties.** Completions at equal times are ordered by lower worker id, then lower ``k``.
  Rennala takes exactly ``M`` slots in that order; Malenia counts *all* completions
  ``<= T``.
* **End.** Collection ends at ``T``; one AllReduce over all workers follows, costing
  ``comm_time = max_i kappa_i``; the next round starts at ``t_end = T + comm_time``.
  ``comms`` counts vector communications: one AllReduce = 1 (scalar signals are free).
* **In-flight work at T** (only workers that started before ``T``):
  ``cancel`` -- the partial gradient is stopped: wasted worker-time ``T - last completion``
  (or ``T - s_i``), wasted trajectories = the completed fraction of that gradient; every
  worker is free at ``t_end``.  ``discard`` -- the in-flight gradient runs to completion and
  is thrown away: wasted time = its whole compute time, 1 wasted trajectory, and the worker
  is busy until that completion.  A completion exactly at ``T`` that Rennala did not use
  (a tie) counts as in flight with fraction 1.
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
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxnigt.timing import (
    TimeModel,
    sample_compute_times,
    sample_noise,
    sample_worker_compute_time,
)

INFLIGHT = ("cancel", "discard")
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
      comm_time: ``[]`` float32 ``max_i kappa_i``.
      time_wasted: ``[]`` float32 worker-time spent on cancelled or discarded gradients.
      traj_wasted: ``[]`` float32 trajectories' worth of wasted work (times ``H`` = steps).
      comms: ``[]`` int32 vector communications (one AllReduce = 1).
      busy_until: ``[n]`` float32 absolute time each worker is busy until (discard mode;
        ``t_end`` in cancel mode).
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


def _check_inflight(inflight: str) -> None:
    if inflight not in INFLIGHT:
        raise ValueError(f"unknown inflight {inflight!r}; allowed: {', '.join(INFLIGHT)}")


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


def _completions(
    rule: str, tau: jax.Array, need: int, t0, busy_until, inflight: str
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Shared prologue of the rules: ``(t0, tau, off, cum)`` with ``cum[i, k]`` the time
    worker i needs for its first k+1 gradients and ``off[i]`` when it starts."""
    _check_inflight(inflight)
    n, K = tau.shape
    if K < need:
        raise ValueError(f"{rule} needs {need} compute times per worker, got {K}")
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau.astype(jnp.float32)
    off = _start_offsets(t0, busy_until, inflight, n)
    return t0, tau, off, sequential_cumsum(tau)


def _start_offsets(t0: jax.Array, busy_until: jax.Array, inflight: str, n: int) -> jax.Array:
    if inflight == "cancel":
        return jnp.zeros((n,), jnp.float32)
    return jnp.maximum(jnp.asarray(busy_until, jnp.float32) - t0, 0.0)


def _per_worker(tau: jax.Array, cum: jax.Array, counts: jax.Array):
    """``(done, tau_b, cum_b)`` per worker from full ``[n, K]`` matrices: the compute time of
    its ``counts`` used gradients, and the compute time and cumulative end (relative to its
    start) of its next, in-flight gradient ``counts`` (requires ``K > max(counts)``)."""
    prev = jnp.take_along_axis(cum, jnp.maximum(counts - 1, 0)[:, None], axis=1)[:, 0]
    done = jnp.where(counts > 0, prev, 0.0)
    idx = jnp.minimum(counts, tau.shape[1] - 1)[:, None]
    tau_b = jnp.take_along_axis(tau, idx, axis=1)[:, 0]
    cum_b = jnp.take_along_axis(cum, idx, axis=1)[:, 0]
    return done, tau_b, cum_b


def _finish(
    kappa: jax.Array,
    per_worker: tuple[jax.Array, jax.Array, jax.Array],
    off: jax.Array,
    t0: jax.Array,
    busy_until: jax.Array,
    t_rel: jax.Array,
    counts: jax.Array,
    slot_worker: jax.Array,
    slot_rank: jax.Array,
    slot_valid: jax.Array,
    overflow: jax.Array,
    inflight: str,
    has_inflight: bool = True,
) -> RoundSchedule:
    """Timing, waste and busy-until bookkeeping shared by every round schedule.

    ``per_worker`` is ``(done, tau_b, cum_b)`` as returned by :func:`_per_worker`."""
    n = off.shape[0]
    done, tau_b, cum_b = per_worker
    t_collect_end = t0 + t_rel
    comm_time = jnp.max(kappa).astype(jnp.float32)
    t_end = t_collect_end + comm_time
    time_used = jnp.sum(done)
    if has_inflight:
        end_b = off + cum_b
        started = off < t_rel
        if inflight == "cancel":
            wasted = jnp.where(started, t_rel - (off + done), 0.0)
            safe_tau = jnp.where(tau_b > 0, tau_b, 1.0)
            frac = jnp.where(started & (tau_b > 0), jnp.clip(wasted / safe_tau, 0.0, 1.0), 0.0)
            new_busy = jnp.full((n,), t_end)
        else:
            wasted = jnp.where(started, tau_b, 0.0)
            frac = started.astype(jnp.float32)
            new_busy = jnp.where(started, t0 + end_b, jnp.asarray(busy_until, jnp.float32))
        time_wasted, traj_wasted = jnp.sum(wasted), jnp.sum(frac)
    else:
        time_wasted = traj_wasted = jnp.float32(0.0)
        if inflight == "cancel":
            new_busy = jnp.full((n,), t_end)
        else:
            new_busy = t0 + off + done
    return RoundSchedule(
        slot_worker=slot_worker.astype(jnp.int32),
        slot_rank=slot_rank.astype(jnp.int32),
        slot_valid=slot_valid,
        num_slots=jnp.sum(counts).astype(jnp.int32),
        counts=counts.astype(jnp.int32),
        t_start=t0,
        t_collect_end=t_collect_end,
        t_end=t_end,
        comm_time=comm_time,
        time_wasted=time_wasted.astype(jnp.float32),
        traj_wasted=traj_wasted.astype(jnp.float32),
        comms=jnp.int32(1),
        busy_until=new_busy.astype(jnp.float32),
        overflow=jnp.asarray(overflow, bool),
        time_used=time_used.astype(jnp.float32),
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
    off: jax.Array,
    first: jax.Array,
    rows: jax.Array,
    tau_rows: jax.Array,
    M: int,
    inflight: str,
) -> RoundSchedule:
    """Rennala round from every worker's first compute time ``first`` ``[n]`` and the full
    compute times ``tau_rows`` ``[m, M + 1]`` of the candidate workers ``rows``
    (:func:`_rennala_candidates`, increasing ids)."""
    n, m = first.shape[0], rows.shape[0]
    cum_rows = sequential_cumsum(tau_rows)
    cand = (off[rows][:, None] + cum_rows[:, :M]).reshape(-1)
    # Flat index j * M + k orders candidates by (worker, k) because rows are sorted, and
    # top_k puts the lower flat index first among equal values.  The barrier keeps XLA from
    # folding later slices of the result into the top_k, which turns it into a full sort on
    # CPU.  It wraps the indices alone: a barrier over top_k's whole (values, indices) tuple
    # crashes XLA's SPMD partitioner when the run is sharded; T is gathered from the indices.
    _, idx = lax.top_k(-cand, M)
    idx = lax.optimization_barrier(idx)
    t_collect = cand[idx[M - 1]]
    slot_row, slot_rank = idx // M, idx % M
    counts_rows = jnp.zeros((m,), jnp.int32).at[slot_row].add(1)
    done_r, tau_b_r, cum_b_r = _per_worker(tau_rows, cum_rows, counts_rows)
    # Workers outside ``rows`` use no gradient; their in-flight one is their first.
    counts = jnp.zeros((n,), jnp.int32).at[rows].set(counts_rows)
    per_worker = (
        jnp.zeros((n,), jnp.float32).at[rows].set(done_r),
        first.at[rows].set(tau_b_r),
        first.at[rows].set(cum_b_r),
    )
    return _finish(
        kappa,
        per_worker,
        off,
        t0,
        busy_until,
        t_collect,
        counts,
        rows[slot_row],
        slot_rank,
        jnp.ones((M,), bool),
        False,
        inflight,
    )


def rennala_from_times(
    kappa: jax.Array,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    inflight: str = "cancel",
) -> RoundSchedule:
    """Rennala round from sampled compute times ``tau`` ``[n, K >= M + 1]``.

    ``T`` is the ``M``-th earliest completion overall; exactly ``M`` slots (ties: lower worker
    id, then lower ``k``).  Only the ``min(n, M)`` workers with the earliest first completion
    can contribute (:func:`_rennala_candidates`), so the cost is one ``top_k`` over ``n``
    first completions and one over ``M * min(n, M)`` candidates.
    """
    M = _check_static("M", M)
    _check_inflight(inflight)
    n, K = tau.shape
    if K < M + 1:
        raise ValueError(f"rennala (M + 1) needs {M + 1} compute times per worker, got {K}")
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, : M + 1].astype(jnp.float32)
    off = _start_offsets(t0, busy_until, inflight, n)
    rows = _rennala_candidates(off + tau[:, 0], M)
    return _rennala_round(kappa, t0, busy_until, off, tau[:, 0], rows, tau[rows], M, inflight)


def malenia_from_times(
    kappa: jax.Array,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    capacity: int,
    inflight: str = "cancel",
) -> RoundSchedule:
    """Malenia round from sampled compute times ``tau`` ``[n, K >= capacity + 1]``.

    ``T`` is the first completion time at which every ``b_i >= 1`` and
    ``(1/n sum_i 1/b_i)^{-1} >= M/n``, i.e. ``sum_i 1/b_i <= n^2 / M`` (with relative slack
    :data:`MALENIA_RTOL`), where ``b_i`` counts all completions ``<= T``.  The rule is
    monotone in time, so ``T`` is found by binary search over the sorted completion times,
    evaluating ``sum_i 1/b_i`` directly (no drifting running sum).  ``overflow`` is set when
    the rule never holds within ``capacity`` gradients per worker (then every slot is used)
    or when a worker's ``capacity + 1``-th completion is ``<= T``.

    Cost: one stable sort of the ``n * capacity`` completion times (to order the slots by
    completion time) plus ``O(log(n capacity))`` passes of ``O(n capacity)`` comparisons.  The
    sort dominates on CPU (about 1.3 s at ``n = 10,000``, ``capacity = 300``).
    """
    M = _check_static("M", M)
    cap = _check_static("capacity", capacity)
    n = tau.shape[0]
    t0, tau, off, cum = _completions(
        "malenia (capacity + 1)", tau, cap + 1, t0, busy_until, inflight
    )
    comp = off[:, None] + cum
    used = comp[:, :cap]
    flat = used.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    events = flat[order]
    num = flat.shape[0]
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
    found = hi < num
    t_rel = events[jnp.minimum(hi, num - 1)]
    counts = jnp.sum(used <= t_rel, axis=1).astype(jnp.int32)
    overflow = ~found | jnp.any(comp[:, cap] <= t_rel)
    return _finish(
        kappa,
        _per_worker(tau, cum, counts),
        off,
        t0,
        busy_until,
        t_rel,
        counts,
        order // cap,
        order % cap,
        events <= t_rel,
        overflow,
        inflight,
    )


def sync_from_times(
    kappa: jax.Array,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
    inflight: str = "cancel",
) -> RoundSchedule:
    """Synchronous round from ``tau`` ``[n, K >= per_worker]``: every worker computes
    ``b = per_worker`` gradients; ``T`` is the slowest worker's ``b``-th completion."""
    b = _check_static("per_worker", per_worker)
    n = tau.shape[0]
    if tau.shape[1] < b:
        raise ValueError(
            f"sync (per_worker) needs {b} compute times per worker, got {tau.shape[1]}"
        )
    t0, tau, off, cum = _completions("sync (per_worker)", tau[:, :b], b, t0, busy_until, inflight)
    flat = (off[:, None] + cum).reshape(-1)
    order = jnp.argsort(flat, stable=True)
    counts = jnp.full((n,), b, jnp.int32)
    return _finish(
        kappa,
        _per_worker(tau, cum, counts),
        off,
        t0,
        busy_until,
        jnp.max(flat),
        counts,
        order // b,
        order % b,
        jnp.ones((n * b,), bool),
        False,
        inflight,
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
) -> RoundSchedule:
    """Rennala round (SPEC §4): the first ``M`` gradients to finish, ``S = M`` slots.

    Args:
      tm: time model.
      key: PRNG key for this round's compute times (:func:`sample_rennala_times`).
      t0: ``[]`` round start.
      busy_until: ``[n]`` absolute time each worker is busy until (used with ``discard``).
      M: static batch size.
      inflight: ``"cancel"`` or ``"discard"``.

    Example::

      tm = make_time_model(10, h="sqrt", noise="exponential")
      s = rennala(tm, key, 0.0, jnp.zeros(10), M=50)
    """
    M = _check_static("M", M)
    _check_inflight(inflight)
    t0 = jnp.asarray(t0, jnp.float32)
    off = _start_offsets(t0, busy_until, inflight, tm.n)
    first, rows, tau_rows = sample_rennala_times(tm, key, off, M=M)
    return _rennala_round(tm.kappa, t0, busy_until, off, first, rows, tau_rows, M, inflight)


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
) -> RoundSchedule:
    """Malenia round (SPEC §4), ``S = n * capacity`` slots; see :func:`malenia_from_times`.

    ``capacity`` is the static maximum number of gradients per worker
    (:func:`default_malenia_capacity`); ``capacity + 1`` compute times are drawn per worker.
    """
    tau = sample_compute_times(tm, key, int(capacity) + 1)
    return malenia_from_times(
        tm.kappa, tau, t0, busy_until, M=M, capacity=capacity, inflight=inflight
    )


def sync(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
    inflight: str = "cancel",
) -> RoundSchedule:
    """Synchronous round (SPEC §4), ``S = n * per_worker`` slots (:func:`sync_batch`)."""
    tau = sample_compute_times(tm, key, int(per_worker))
    return sync_from_times(tm.kappa, tau, t0, busy_until, per_worker=per_worker, inflight=inflight)


# ----------------------------------------------------------------------------------------
# Asynchronous event engine (SPEC §6: AFedPG, asgd).


class AsyncState(NamedTuple):
    """State of the asynchronous event engine (arrays only).

    Attributes:
      arrival_time: ``[n]`` float32 arrival time of each worker's in-flight gradient.
      dispatch_version: ``[n]`` int32 server version each worker was dispatched with.
      dispatch_count: ``[n]`` int32 gradients dispatched to each worker so far.
      version: ``[]`` int32 server version (= arrivals processed).
      time: ``[]`` float32 time of the last arrival (``t0`` initially).
      compute_time: ``[n]`` float32 ``tau`` of each worker's in-flight gradient.
      dispatch_time: ``[n]`` float32 when each in-flight gradient was dispatched.
    """

    arrival_time: jax.Array
    dispatch_version: jax.Array
    dispatch_count: jax.Array
    version: jax.Array
    time: jax.Array
    compute_time: jax.Array
    dispatch_time: jax.Array


class Arrival(NamedTuple):
    """One gradient arriving at the server.

    Attributes:
      worker: ``[]`` int32.
      time: ``[]`` float32 arrival time.
      dispatch_version: ``[]`` int32 server version the gradient was computed from.
      staleness: ``[]`` int32 version before this arrival minus ``dispatch_version``.
      compute_time: ``[]`` float32 ``tau`` of this gradient.
      grad_index: ``[]`` int32 this worker's 0-based gradient counter (for keys).
    """

    worker: jax.Array
    time: jax.Array
    dispatch_version: jax.Array
    staleness: jax.Array
    compute_time: jax.Array
    grad_index: jax.Array


def async_init(tm: TimeModel, key: jax.Array, t0: jax.typing.ArrayLike) -> AsyncState:
    """Dispatches every worker at ``t0`` with version 0; arrivals at ``t0 + tau_i + kappa_i``.

    ``key`` draws the first compute time of each worker (``sample_compute_times(tm, key, 1)``).
    """
    t0 = jnp.asarray(t0, jnp.float32)
    tau = sample_compute_times(tm, key, 1)[:, 0]
    n = tm.n
    return AsyncState(
        arrival_time=(t0 + tau) + tm.kappa,
        dispatch_version=jnp.zeros((n,), jnp.int32),
        dispatch_count=jnp.ones((n,), jnp.int32),
        version=jnp.int32(0),
        time=t0,
        compute_time=tau,
        dispatch_time=jnp.full((n,), t0),
    )


def async_next(tm: TimeModel, key: jax.Array, state: AsyncState) -> tuple[AsyncState, Arrival]:
    """Processes the earliest arrival and re-dispatches that worker.

    The worker with the smallest arrival time arrives (ties: lower worker id); the server
    version increments; the worker is re-dispatched at the arrival time ``t`` with the new
    version and returns at ``t + tau + kappa_i`` where ``tau = h_i * xi`` and ``xi`` is
    drawn from ``key`` (callers pass ``fold_in(run_key, state.version)``).  Each arrival is
    one vector exchange (one communication; no AllReduce).
    """
    w = jnp.argmin(state.arrival_time).astype(jnp.int32)
    t = state.arrival_time[w]
    arrival = Arrival(
        worker=w,
        time=t,
        dispatch_version=state.dispatch_version[w],
        staleness=state.version - state.dispatch_version[w],
        compute_time=state.compute_time[w],
        grad_index=state.dispatch_count[w] - 1,
    )
    version = state.version + 1
    tau = sample_worker_compute_time(tm, key, w)
    new_state = AsyncState(
        arrival_time=state.arrival_time.at[w].set((t + tau) + tm.kappa[w]),
        dispatch_version=state.dispatch_version.at[w].set(version),
        dispatch_count=state.dispatch_count.at[w].add(1),
        version=version,
        time=t,
        compute_time=state.compute_time.at[w].set(tau),
        dispatch_time=state.dispatch_time.at[w].set(t),
    )
    return new_state, arrival


def async_arrivals(
    tm: TimeModel, run_key: jax.Array, state: AsyncState, num: int
) -> tuple[AsyncState, Arrival]:
    """Runs ``num`` (static) arrivals with keys ``fold_in(run_key, version)``.

    Returns the final state and the stacked :class:`Arrival` records (leading axis ``num``).
    """

    def step(s, _):
        return async_next(tm, jax.random.fold_in(run_key, s.version), s)

    return lax.scan(step, state, None, length=int(num))
