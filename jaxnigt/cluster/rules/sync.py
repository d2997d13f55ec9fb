"""Synchronous rounds: every worker computes b gradients and the round waits for the
slowest (docs/cluster_model.md), read in one place: the rule (:func:`sync`, registered as
``sync``), on given times (:func:`sync_from_times`), and its weights (:data:`WEIGHTS`: the
plain mean).  Every worker contributes, so ``allreduce`` makes no difference; nothing is ever
in flight.  A padded record's rows that are not the run's deliver nothing and are not waited
for."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxnigt.cluster import aggregators
from jaxnigt.cluster.model import ClusterModel, sample_compute_times
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    RoundSize,
    check_static,
    each_slot,
    ends,
    every,
    finish_round,
    keep,
    live_rows,
    sequential_cumsum,
    start_offsets,
    worker_times,
)
from jaxnigt.cluster.rules.registry import register_rule

#: The synchronous aggregation: the plain mean of the round's gradients.
WEIGHTS = aggregators.sync_weights


@register_rule("sync", pads=True, cluster_options=("down_exchange",))
def sync(
    model: ClusterModel, key: jax.Array, t0: jax.typing.ArrayLike, busy_until, size: RoundSize
) -> RoundSchedule:
    """Synchronous: every worker's ``per_worker`` gradients.

    Args:
      model: the cluster model.
      key: the round's PRNG key.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      size: the round's sizes (``per_worker``).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    tau = sample_compute_times(model, key, size.per_worker)
    return sync_from_times(model, tau, t0, busy_until, per_worker=size.per_worker)


def sync_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
) -> RoundSchedule:
    """A round from given compute times ``tau`` ``[n, K >= per_worker]``: ``T`` is the
    slowest worker's ``b``-th completion.

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
    if tau.shape[1] < b:
        raise ValueError(
            f"sync (per_worker) needs {b} compute times per worker, got {tau.shape[1]}"
        )
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, :b].astype(jnp.float32)
    off, cum = start_offsets(t0, busy_until), sequential_cumsum(tau)
    comp = ends(model, t0, off, cum)
    flat = comp.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    # a padded row: no gradient, last in the order, not waited for
    counts = keep(jnp.full((tau.shape[0],), b, jnp.int32), live_rows(model), 0)
    t_rel = jnp.max(keep(flat, each_slot(live_rows(model), b), -jnp.inf))
    slot_valid = every(live_rows(model, order // b), order.shape)
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
