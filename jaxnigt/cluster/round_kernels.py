"""The collection rules on given compute times: one round of Rennala, Malenia or sync.

Each ``*_from_times`` function takes the cluster model (:class:`~jaxnigt.cluster.model.
ClusterModel`: its ``kappa`` and the ``inflight`` and ``allreduce`` choices) and an explicit
``[n, K]`` matrix ``tau`` of compute times (worker ``i``'s ``k``-th gradient of the round takes
``tau[i, k]``), decides which
completions count and when collection ends (a :class:`~jaxnigt.cluster.rounds.Collection`), and
hands that to :func:`jaxnigt.cluster.rounds.finish_round`, whose conventions (start, end,
AllReduce, in-flight work) every rule shares.  :mod:`jaxnigt.cluster.schedules` draws the times and
calls these; tests and references call them on times of their own.

**Ties.** Completions at equal times are ordered by lower worker id, then lower ``k``.
Rennala takes exactly ``M`` slots in that order; Malenia counts *all* completions ``<= T``.

Rennala needs only the ``min(n, M)`` workers whose first completion is earliest
(:func:`rennala_candidates`), so :func:`rennala_round` works on those rows alone and its cost
does not grow with ``n * M``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxnigt.cluster.model import ClusterModel
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    WorkerTimes,
    check_static,
    ends,
    finish_round,
    sequential_cumsum,
    start_offsets,
    worker_times,
)

# Malenia's rule compares a float32 sum of 1/b_i with n^2/M; this relative slack keeps exact
# ties (e.g. b = (3, 3, 3), M = 9) on the "holds" side despite rounding.
MALENIA_RTOL = 1e-5


def malenia_threshold(n: int, M: int) -> float:
    """Malenia's threshold ``n^2 / M (1 + MALENIA_RTOL)``, computed in float64 and rounded to
    float32: the value its rule compares ``sum_i 1/b_i`` with (a padded run carries it)."""
    return float(np.float32(n * n / M * (1 + MALENIA_RTOL)))


def _prologue(rule: str, tau: jax.Array, need: int, t0, busy_until):
    """Shared prologue of the full-matrix rules: ``(t0, tau, off, cum)`` with ``cum[i, k]``
    the time worker i needs for its first k+1 gradients and ``off[i]`` when it starts."""
    K = tau.shape[1]
    if K < need:
        raise ValueError(f"{rule} needs {need} compute times per worker, got {K}")
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, :need].astype(jnp.float32)
    return t0, tau, start_offsets(t0, busy_until), sequential_cumsum(tau)


def rennala_candidates(first_end: jax.Array, M: int, take: jax.Array | None = None) -> jax.Array:
    """The ``min(n, M)`` workers, in increasing id, that can contribute to a Rennala round.

    ``first_end[i]`` is worker ``i``'s first completion (relative to ``t0``).  Completions
    of a worker only grow with ``k`` (``tau >= 0``), so in the order (time, worker, k) the
    ``M`` earliest completions overall come from the ``M`` workers whose *first* completion
    is earliest: any other worker's first completion is preceded by those ``M``.  Only these
    workers' later compute times are ever needed.

    With ``take`` (a padded run, :mod:`jaxnigt.cluster.padding`: ``min(n, M)`` of the run,
    traced), the first ``take`` rows are the run's candidates in increasing id, exactly the
    unpadded run's rows, and the other rows follow.
    """
    m = min(first_end.shape[0], M)
    # top_k puts the lower index (= lower worker) first among equal values.
    _, rows = lax.top_k(-first_end, m)
    rows = lax.optimization_barrier(rows)
    if take is None:
        return jnp.sort(rows)
    n = first_end.shape[0]
    later = jnp.arange(m) >= take  # top_k's first `take` are the run's own top `take`
    rows = jnp.sort(jnp.where(later, rows + n, rows))
    return jnp.where(rows >= n, rows - n, rows)


def rennala_take(model: ClusterModel, M: int, run_M: jax.Array | None) -> jax.Array | None:
    """A padded Rennala round's number of candidate rows, ``min(n, M)`` of the run (None:
    the round is not padded)."""
    if model.workers is None and run_M is None:
        return None
    n = model.n if model.workers is None else model.workers
    return jnp.minimum(n, M if run_M is None else run_M)


def rennala_round(
    model: ClusterModel,
    t0: jax.Array,
    busy_until: jax.Array,
    first: jax.Array,
    rows: jax.Array,
    tau_rows: jax.Array,
    *,
    M: int,
    run_M: jax.Array | None = None,
) -> RoundSchedule:
    """Rennala round from the compute times of its candidate workers alone.

    Args:
      model: the cluster model.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      first: ``[n]`` every worker's first compute time.
      rows: ``[m]`` the candidate workers (:func:`rennala_candidates`, increasing ids).
      tau_rows: ``[m, M + 1]`` their full compute times.
      M: static batch size (with ``run_M``, the most slots of a round).
      run_M: ``[]`` int the run's batch, traced (:mod:`jaxnigt.cluster.padding`; None:
        ``M``): slots from ``run_M`` on are never valid.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    n, m = first.shape[0], rows.shape[0]
    off = start_offsets(t0, busy_until)
    cum_rows = sequential_cumsum(tau_rows)
    cand = ends(model, t0, off[rows], cum_rows[:, :M], rows)
    cand = _padded_candidates(model, cand, M, run_M).reshape(-1)
    # Flat index j * M + k orders candidates by (worker, k) because rows are sorted, and
    # top_k puts the lower flat index first among equal values.  The barrier keeps XLA from
    # folding later slices of the result into the top_k, which turns it into a full sort on
    # CPU.  It wraps the indices alone: a barrier over top_k's whole (values, indices) tuple
    # crashes XLA's SPMD partitioner when the run is sharded; T is gathered from the indices.
    _, idx = lax.top_k(-cand, M)
    idx = lax.optimization_barrier(idx)
    slot_row, slot_rank = idx // M, idx % M
    valid = jnp.ones((M,), bool) if run_M is None else jnp.arange(M) < run_M
    counts_rows = jnp.zeros((m,), jnp.int32).at[slot_row].add(valid.astype(jnp.int32))
    rows_work = worker_times(off[rows], tau_rows, cum_rows, counts_rows)
    # Workers outside ``rows`` use no gradient; their next gradient is their first.
    work = WorkerTimes(
        off=off,
        done=jnp.zeros((n,), jnp.float32).at[rows].set(rows_work.done),
        tau_next=first.at[rows].set(rows_work.tau_next),
        cum_next=first.at[rows].set(rows_work.cum_next),
    )
    coll = Collection(
        t_rel=cand[idx[M - 1 if run_M is None else run_M - 1]],
        counts=jnp.zeros((n,), jnp.int32).at[rows].set(counts_rows),
        slot_worker=rows[slot_row],
        slot_rank=slot_rank,
        slot_valid=valid,
        overflow=jnp.bool_(False),
    )
    return finish_round(model, t0, busy_until, work, coll)


def _padded_candidates(model: ClusterModel, cand: jax.Array, M: int, run_M) -> jax.Array:
    """``[m, M]`` candidate completions of a padded round (:func:`rennala_take`): rows past
    the run's candidates and columns past its ``run_M`` never count (``inf``)."""
    take = rennala_take(model, M, run_M)
    if take is None:
        return cand
    ok = jnp.arange(cand.shape[0])[:, None] < take
    if run_M is not None:
        ok = ok & (jnp.arange(M)[None, :] < run_M)
    return jnp.where(ok, cand, jnp.inf)


def rennala_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
) -> RoundSchedule:
    """Rennala round from sampled compute times ``tau`` ``[n, K >= M + 1]``.

    ``T`` is the ``M``-th earliest completion overall; exactly ``M`` slots (ties: lower worker
    id, then lower ``k``).  Only the ``min(n, M)`` workers with the earliest first completion
    can contribute (:func:`rennala_candidates`), so the cost is one ``top_k`` over ``n``
    first completions and one over ``M * min(n, M)`` candidates.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      M: static batch size.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: ``M`` is no size or ``tau`` has too few columns.
    """
    M = check_static("M", M)
    if tau.shape[1] < M + 1:
        raise ValueError(
            f"rennala (M + 1) needs {M + 1} compute times per worker, got {tau.shape[1]}"
        )
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, : M + 1].astype(jnp.float32)
    rows = rennala_candidates(ends(model, t0, start_offsets(t0, busy_until), tau[:, 0]), M)
    return rennala_round(model, t0, busy_until, tau[:, 0], rows, tau[rows], M=M)


def malenia_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    capacity: int,
    run: tuple[jax.Array, jax.Array] | None = None,
) -> RoundSchedule:
    """Malenia round from sampled compute times ``tau`` ``[n, K >= capacity + 1]``.

    ``T`` is the first completion time at which every ``b_i >= 1`` and
    ``(1/n sum_i 1/b_i)^{-1} >= M/n``, i.e. ``sum_i 1/b_i <= n^2 / M`` (relative slack
    :data:`MALENIA_RTOL`), ``b_i`` counting all completions ``<= T``: a binary search over
    the sorted completion times (the rule is monotone in time).  ``overflow`` is set when
    the rule never holds within ``capacity`` gradients per worker (then every slot is used)
    or when a worker's ``capacity + 1``-th completion is ``<= T``.  Every worker contributes,
    so ``allreduce`` makes no difference.  Cost: a stable sort of the ``n * capacity``
    completions (1.3 s at n = 10,000, capacity = 300), ``O(log(n capacity))`` passes.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      M: static batch size.
      capacity: static most gradients per worker (with ``run``: the bound).
      run: a padded run's ``(capacity, threshold)`` (:mod:`jaxnigt.cluster.padding`): its
        capacity and the float32 ``n^2 / M (1 + MALENIA_RTOL)`` of its own n and M.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: a size is not an integer >= 1 or ``tau`` has too few columns.
    """
    M = check_static("M", M)
    cap = check_static("capacity", capacity)
    t0, tau, off, cum = _prologue("malenia (capacity + 1)", tau, cap + 1, t0, busy_until)
    comp = ends(model, t0, off, cum)
    used = comp[:, :cap]
    if run is not None:  # a padded run's gradients past its own capacity are not its events
        used = jnp.where(jnp.arange(cap)[None, :] < run[0], used, jnp.inf)
    flat = used.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    events = flat[order]
    hi, n_events, beyond = _malenia_stop(model, comp, used, events, M, run)
    t_rel = events[jnp.minimum(hi, n_events - 1)]
    counts = jnp.sum(used <= t_rel, axis=1).astype(jnp.int32)
    coll = Collection(
        t_rel=t_rel,
        counts=counts,
        slot_worker=order // cap,
        slot_rank=order % cap,
        slot_valid=events <= t_rel,
        overflow=(hi >= n_events) | jnp.any(beyond <= t_rel),
    )
    work = worker_times(off, tau, cum, counts)
    return finish_round(model, t0, busy_until, work, coll)


def _malenia_stop(model: ClusterModel, comp, used, events, M: int, run):
    """``(hi, number of the run's events, each worker's completion past its capacity)``:
    :func:`_malenia_end` of the run (a padded run's own events come first, the others are
    ``inf``; its capacity and threshold are ``run``'s)."""
    if run is None:
        threshold = jnp.float32(malenia_threshold(comp.shape[0], M))
        return _malenia_end(used, events, threshold), events.shape[0], comp[:, used.shape[1]]
    run_cap, threshold = run
    n_events = run_cap * (model.n if model.workers is None else model.workers)
    beyond = jnp.take_along_axis(comp, jnp.full((comp.shape[0], 1), run_cap), axis=1)[:, 0]
    beyond = beyond if model.workers is None else jnp.where(model.active, beyond, jnp.inf)
    return _malenia_end(used, events, threshold, model.active, n_events), n_events, beyond


def _malenia_end(used, events, threshold, active=None, num=None) -> jax.Array:
    """Index into the sorted completions ``events`` of the first at which Malenia's rule
    holds for the ``[n, capacity]`` completion times ``used`` (``num`` if never; default
    ``len(events)``); ``active``: a padded record's own workers, the rule's n.

    The rule is monotone in time: a binary search evaluating ``sum_i 1/b_i`` directly."""
    size = events.shape[0]

    def holds(t):
        b = jnp.sum(used <= t, axis=1)
        ok, inverse = b >= 1, 1.0 / jnp.maximum(b, 1).astype(jnp.float32)
        if active is not None:
            ok, inverse = ok | ~active, jnp.where(active, inverse, 0.0)
        return jnp.all(ok) & (jnp.sum(inverse) <= threshold)

    def search(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        ok = holds(events[jnp.minimum(mid, size - 1)])
        active = lo < hi
        return jnp.where(active & ~ok, mid + 1, lo), jnp.where(active & ok, mid, hi)

    top = jnp.int32(size) if num is None else jnp.asarray(num, jnp.int32)
    _, hi = lax.fori_loop(0, size.bit_length() + 1, search, (jnp.int32(0), top))
    return hi


def msync_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    m: int,
    run_m: jax.Array | None = None,
) -> RoundSchedule:
    """m-synchronous round (Begunov & Tyurin, 2026) from ``tau`` ``[n, K >= 1]``.

    Every worker computes one gradient at the round's point; ``T`` is the ``m``-th earliest
    completion (ties: lower worker id), those ``m`` count and the others' gradients are in
    flight at ``T`` (cancelled or discarded: ``model.inflight``); a worker that delivered
    waits for the new point.  ``m = n`` is the synchronous round with one gradient per worker.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      m: static number of workers the round waits for (with ``run_m``: the most).
      run_m: ``[]`` int the run's ``m`` in a padded program (:mod:`jaxnigt.cluster.padding`;
        None: ``m``): slots from ``run_m`` on are never valid.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: ``m`` is not an integer in ``[1, n]``.
    """
    m = check_static("m", m)
    n = tau.shape[0]
    if m > n:
        raise ValueError(f"msync needs m <= n, got m = {m} with n = {n}")
    t0, tau, off, cum = _prologue("msync (one gradient)", tau, 1, t0, busy_until)
    first = ends(model, t0, off, cum[:, 0])
    _, rows = lax.top_k(-first, m)  # ascending completion; ties: lower worker id first
    rows = lax.optimization_barrier(rows)
    valid = jnp.ones((m,), bool) if run_m is None else jnp.arange(m) < run_m
    counts = jnp.zeros((n,), jnp.int32).at[rows].set(valid.astype(jnp.int32))
    coll = Collection(
        t_rel=first[rows[m - 1 if run_m is None else run_m - 1]],
        counts=counts,
        slot_worker=rows,
        slot_rank=jnp.zeros((m,), jnp.int32),
        slot_valid=valid,
        overflow=jnp.bool_(False),
    )
    work = worker_times(off, tau, cum, counts)
    return finish_round(model, t0, busy_until, work, coll, may_continue=counts == 0)


def sync_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
) -> RoundSchedule:
    """Synchronous round from ``tau`` ``[n, K >= per_worker]``.

    Every worker computes ``b = per_worker`` gradients; ``T`` is the slowest worker's
    ``b``-th completion.  Every worker contributes, so ``allreduce`` makes no difference;
    nothing is ever in flight.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      per_worker: static gradients per worker.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: ``per_worker`` is no size or ``tau`` has too few columns.
    """
    b = check_static("per_worker", per_worker)
    n = tau.shape[0]
    t0, tau, off, cum = _prologue("sync (per_worker)", tau, b, t0, busy_until)
    comp = ends(model, t0, off, cum)
    flat = comp.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    counts = jnp.full((n,), b, jnp.int32)
    t_rel, slot_valid = jnp.max(flat), jnp.ones((n * b,), bool)
    if model.workers is not None:  # padded rows: no gradient, last in the order, not waited for
        active = model.active
        counts = jnp.where(active, counts, 0)
        t_rel = jnp.max(jnp.where(active[:, None], comp, -jnp.inf))
        slot_valid = active[order // b]
    coll = Collection(
        t_rel=t_rel,
        counts=counts,
        slot_worker=order // b,
        slot_rank=order % b,
        slot_valid=slot_valid,
        overflow=jnp.bool_(False),
    )
    work = worker_times(off, tau, cum, counts)
    return finish_round(model, t0, busy_until, work, coll, has_inflight=False)
