"""Rennala: a round collects the first M gradients in total (docs/cluster_model.md), read in
one place: its draws (:func:`sample_times`), which gradients land (:func:`rennala_round`),
the rule (:func:`rennala`, registered as ``rennala``) and its weights (:data:`WEIGHTS`: the
plain mean of the M gradients, :func:`jaxnigt.cluster.aggregators.rennala_weights`).

``T`` is the M-th earliest completion overall; exactly M slots (ties: lower worker id, then
lower ``k``).  Completions of a worker only grow with ``k``, so the M earliest completions
come from the ``min(n, M)`` workers whose *first* completion is earliest
(:func:`rennala_candidates`): only they get their next M compute times, so a round costs
``O(n + M^2)`` draws, one ``top_k`` over n first completions and one over ``M min(n, M)``
candidates.  Every size is the run's (:class:`~jaxnigt.cluster.rounds.RoundSize`): a padded
program's run collects its own M on its own workers, with the draws of its unpadded run.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxnigt.cluster import aggregators
from jaxnigt.cluster.model import ClusterModel, sample_compute_times
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    RoundSize,
    WorkerTimes,
    check_static,
    ends,
    every,
    finish_round,
    keep,
    leading,
    sequential_cumsum,
    smaller,
    start_offsets,
    worker_count,
    worker_times,
)
from jaxnigt.cluster.rules.blocks import padded_times
from jaxnigt.cluster.rules.registry import register_rule

#: Rennala's aggregation: the plain mean of the round's gradients.
WEIGHTS = aggregators.rennala_weights


@register_rule("rennala", pads=True)
def rennala(
    model: ClusterModel, key: jax.Array, t0: jax.typing.ArrayLike, busy_until, size: RoundSize
) -> RoundSchedule:
    """Rennala: the first M gradients in total.

    Args:
      model: the cluster model (its times, ``inflight`` and ``allreduce``).
      key: the round's PRNG key (:func:`sample_times`).
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      size: the round's sizes (``M``).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    t0 = jnp.asarray(t0, jnp.float32)
    off = start_offsets(t0, busy_until)
    first, rows, tau_rows = sample_times(model, key, off, size, t0)
    return rennala_round(model, t0, busy_until, first, rows, tau_rows, size)


def sample_times(
    model: ClusterModel, key: jax.Array, off: jax.Array, size: RoundSize, t0=0.0
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The compute times one round needs, drawn lazily: ``O(n + M^2)`` draws.

    Every worker's first compute time is drawn (``first`` ``[n]``, from ``fold_in(key, 0)``);
    the ``min(n, M)`` workers whose first completion ``off + first`` is earliest (``rows``,
    increasing ids, the run's own first) are the only ones that can contribute, and only
    they get their next M compute times (from ``fold_in(key, 1)``, the run's ``[m, M]``
    draw).  In distribution this is drawing all ``n (M + 1)`` times; :func:`rennala_from_times`
    on any ``[n, M + 1]`` matrix with column 0 ``first`` and rows ``rows`` equal to
    ``tau_rows`` gives the same round.

    Args:
      model: the cluster model.
      key: the round's PRNG key.
      off: ``[n]`` each worker's start relative to the round's.
      size: the round's sizes.
      t0: the round's start (where a power trace maps work to time).

    Returns:
      ``(first, rows, tau_rows)``, ``tau_rows`` ``[min(n, M), M + 1]``.
    """
    first = sample_compute_times(model, jax.random.fold_in(key, 0), 1)[:, 0]
    take = smaller(worker_count(model), size.value("M"))
    rows = rennala_candidates(ends(model, t0, off, first), size.M, take)
    shape = (rows.shape[0], size.M)
    rest = padded_times(model, key, shape, size.value("M"), rows, fold=1)
    return first, rows, jnp.concatenate([first[rows][:, None], rest], axis=1)


def rennala_candidates(first_end: jax.Array, M: int, take: jax.Array) -> jax.Array:
    """The ``min(n, M)`` workers that can contribute to a round, the run's first.

    ``first_end[i]`` is worker ``i``'s first completion (relative to ``t0``).  In the order
    (time, worker, k) the M earliest completions come from the M workers whose first
    completion is earliest; only these workers' later compute times are ever needed.

    Args:
      first_end: ``[n]`` first completions.
      M: the static bound of the batch.
      take: the run's ``min(n, M)`` (static in an ordinary program): the first ``take`` rows
        returned are its candidates in increasing id (a padded program's bound may give
        more rows).

    Returns:
      ``[min(n, M)]`` int32 worker ids.
    """
    n = first_end.shape[0]
    m = min(n, M)
    # top_k puts the lower index (= lower worker) first among equal values.
    _, rows = lax.top_k(-first_end, m)
    rows = lax.optimization_barrier(rows)
    own = leading(m, take)  # top_k's first `take` are the run's own top `take`
    if own is None:  # every candidate is the run's
        return jnp.sort(rows)
    later = ~own
    rows = jnp.sort(jnp.where(later, rows + n, rows))
    return jnp.where(rows >= n, rows - n, rows)


def rennala_round(
    model: ClusterModel,
    t0: jax.Array,
    busy_until: jax.Array,
    first: jax.Array,
    rows: jax.Array,
    tau_rows: jax.Array,
    size: RoundSize,
) -> RoundSchedule:
    """A round from the compute times of its candidate workers alone.

    Args:
      model: the cluster model.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      first: ``[n]`` every worker's first compute time.
      rows: ``[m]`` the candidate workers (:func:`rennala_candidates`).
      tau_rows: ``[m, M + 1]`` their compute times.
      size: the round's sizes: ``size.M`` slots, the run's M of them valid.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    n, m, M, own_M = first.shape[0], rows.shape[0], size.M, size.value("M")
    off = start_offsets(t0, busy_until)
    cum_rows = sequential_cumsum(tau_rows)
    cand = ends(model, t0, off[rows], cum_rows[:, :M], rows)
    # rows past the run's candidates and columns past its M never count
    own_rows = leading(m, smaller(worker_count(model), own_M))
    own_cols = leading(M, own_M)
    cand = keep(keep(cand, own_rows, jnp.inf, axis=0), own_cols, jnp.inf, axis=1).reshape(-1)
    # Flat index j * M + k orders candidates by (worker, k) because rows are sorted, and
    # top_k puts the lower flat index first among equal values.  The barrier keeps XLA from
    # folding later slices of the result into the top_k, which turns it into a full sort on
    # CPU.  It wraps the indices alone: a barrier over top_k's whole (values, indices) tuple
    # crashes XLA's SPMD partitioner when the run is sharded; T is gathered from the indices.
    _, idx = lax.top_k(-cand, M)
    idx = lax.optimization_barrier(idx)
    slot_row, slot_rank = idx // M, idx % M
    valid = every(own_cols, (M,))
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
        t_rel=cand[idx[own_M - 1]],
        counts=jnp.zeros((n,), jnp.int32).at[rows].set(counts_rows),
        slot_worker=rows[slot_row],
        slot_rank=slot_rank,
        slot_valid=valid,
        overflow=jnp.bool_(False),
    )
    return finish_round(model, t0, busy_until, work, coll)


def rennala_from_times(
    model: ClusterModel, tau: jax.Array, t0: jax.typing.ArrayLike, busy_until, *, M: int
) -> RoundSchedule:
    """A round from given compute times ``tau`` ``[n, K >= M + 1]`` (tests, references).

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
    size = RoundSize(M=M)
    first_end = ends(model, t0, start_offsets(t0, busy_until), tau[:, 0])
    rows = rennala_candidates(first_end, M, smaller(worker_count(model), M))
    return rennala_round(model, t0, busy_until, tau[:, 0], rows, tau[rows], size)
