"""m-synchronous rounds (Begunov & Tyurin, 2026): every worker computes one gradient at the
round's point and the round ends at the m-th completion (docs/cluster_model.md), read in one
place: the rule (:func:`msync`, registered as ``msync``), on given times
(:func:`msync_from_times`), and its weights (:data:`WEIGHTS`: the plain mean).  The others'
gradients are in flight at ``T`` (cancelled or discarded: ``model.inflight``); a worker that
delivered waits for the new point.  ``m = n`` is the synchronous round with one gradient per
worker.  A padded program's run waits for its own m (:class:`~jaxnigt.cluster.rounds.
RoundSize`)."""

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
    check_static,
    ends,
    every,
    finish_round,
    leading,
    sequential_cumsum,
    start_offsets,
    worker_times,
)
from jaxnigt.cluster.rules.registry import register_rule

#: The m-synchronous aggregation: the plain mean of the m gradients.
WEIGHTS = aggregators.sync_weights


@register_rule("msync", pads=True)
def msync(
    model: ClusterModel, key: jax.Array, t0: jax.typing.ArrayLike, busy_until, size: RoundSize
) -> RoundSchedule:
    """m-synchronous: one gradient per worker, the fastest m count.

    Args:
      model: the cluster model.
      key: the round's PRNG key.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      size: the round's sizes (``m``).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    return _round(model, sample_compute_times(model, key, 1), t0, busy_until, size)


def msync_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    m: int,
) -> RoundSchedule:
    """A round from given compute times ``tau`` ``[n, K >= 1]``.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      m: static number of workers the round waits for.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: ``m`` is not an integer in ``[1, n]``.
    """
    return _round(model, tau, t0, busy_until, RoundSize(M=1, m=check_static("m", m)))


def _round(model: ClusterModel, tau, t0, busy_until, size: RoundSize) -> RoundSchedule:
    m, own_m, n = size.m, size.value("m"), tau.shape[0]
    if m > n:
        raise ValueError(f"msync needs m <= n, got m = {m} with n = {n}")
    if tau.shape[1] < 1:
        raise ValueError("msync (one gradient) needs 1 compute time per worker, got 0")
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, :1].astype(jnp.float32)
    off, cum = start_offsets(t0, busy_until), sequential_cumsum(tau)
    first = ends(model, t0, off, cum[:, 0])
    _, rows = lax.top_k(-first, m)  # ascending completion; ties: lower worker id first
    rows = lax.optimization_barrier(rows)
    valid = every(leading(m, own_m), (m,))
    counts = jnp.zeros((n,), jnp.int32).at[rows].set(valid.astype(jnp.int32))
    coll = Collection(
        t_rel=first[rows[own_m - 1]],
        counts=counts,
        slot_worker=rows,
        slot_rank=jnp.zeros((m,), jnp.int32),
        slot_valid=valid,
        overflow=jnp.bool_(False),
    )
    work = worker_times(off, tau, cum, counts)
    return finish_round(model, t0, busy_until, work, coll, may_continue=counts == 0)
