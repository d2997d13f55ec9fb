"""Malenia: every worker delivers, and a round ends once the harmonic mean of the counts
reaches M / n (docs/cluster_model.md), read in one place: its draws and rule
(:func:`malenia`, registered as ``malenia``), the rule on given times
(:func:`malenia_from_times`) and its weights (:data:`WEIGHTS`: the mean over workers of each
worker's mean, :func:`jaxnigt.cluster.aggregators.malenia_weights`).

``T`` is the first completion time at which every ``b_i >= 1`` and
``(1/n sum_i 1/b_i)^{-1} >= M/n``, i.e. ``sum_i 1/b_i <= n^2 / M`` (relative slack
:data:`MALENIA_RTOL`), ``b_i`` counting all completions ``<= T``: a binary search over the
sorted completion times (the rule is monotone in time).  ``overflow`` is set when the rule
never holds within ``capacity`` gradients per worker (then every slot is used) or when a
worker's ``capacity + 1``-th completion is ``<= T``.  Every worker contributes, so
``allreduce`` makes no difference.  Cost: a stable sort of the ``n * capacity`` completions
(1.3 s at n = 10,000, capacity = 300), ``O(log(n capacity))`` passes.  A padded program's run
has its own capacity, workers and threshold (:class:`~jaxnigt.cluster.rounds.RoundSize`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxnigt.cluster import aggregators
from jaxnigt.cluster.model import ClusterModel
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    RoundSize,
    check_static,
    ends,
    finish_round,
    keep,
    leading,
    live_rows,
    sequential_cumsum,
    start_offsets,
    worker_count,
    worker_times,
)
from jaxnigt.cluster.rules.blocks import padded_times
from jaxnigt.cluster.rules.registry import register_rule

#: Malenia's aggregation: the mean over workers of each worker's mean.
WEIGHTS = aggregators.malenia_weights
# Malenia's rule compares a float32 sum of 1/b_i with n^2/M; this relative slack keeps exact
# ties (e.g. b = (3, 3, 3), M = 9) on the "holds" side despite rounding.
MALENIA_RTOL = 1e-5
OVERFLOW = "Malenia capacity overflow (raise hparams.malenia_capacity)"


def malenia_threshold(n: int, M: int) -> float:
    """Malenia's threshold ``n^2 / M (1 + MALENIA_RTOL)``, computed in float64 and rounded to
    float32: the value its rule compares ``sum_i 1/b_i`` with (a padded run carries its own).

    Args:
      n: the run's workers.
      M: its batch.

    Returns:
      The threshold.
    """
    return float(np.float32(n * n / M * (1 + MALENIA_RTOL)))


@register_rule(
    "malenia", pads=True, cluster_options=("inflight", "down_exchange"), overflow=OVERFLOW
)
def malenia(
    model: ClusterModel, key: jax.Array, t0: jax.typing.ArrayLike, busy_until, size: RoundSize
) -> RoundSchedule:
    """Malenia: every worker delivers, until the harmonic mean of the counts reaches M / n.

    Args:
      model: the cluster model.
      key: the round's PRNG key (``capacity + 1`` compute times per worker).
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      size: the round's sizes (``M``, ``capacity``; a padded run's threshold).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    num = size.capacity + 1
    tau = padded_times(model, key, (model.n, num), size.value("capacity") + 1)
    return _round(model, tau, t0, busy_until, size)


def malenia_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    capacity: int,
) -> RoundSchedule:
    """A round from given compute times ``tau`` ``[n, K >= capacity + 1]`` (module docstring).

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      M: static batch size.
      capacity: static most gradients per worker.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: a size is not an integer >= 1 or ``tau`` has too few columns.
    """
    size = RoundSize(M=check_static("M", M), capacity=check_static("capacity", capacity))
    if tau.shape[1] < size.capacity + 1:
        raise ValueError(
            f"malenia (capacity + 1) needs {size.capacity + 1} compute times per worker, "
            f"got {tau.shape[1]}"
        )
    return _round(model, tau[:, : size.capacity + 1], t0, busy_until, size)


def _round(model: ClusterModel, tau, t0, busy_until, size: RoundSize) -> RoundSchedule:
    cap, run_cap = size.capacity, size.value("capacity")
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, : cap + 1].astype(jnp.float32)
    off, cum = start_offsets(t0, busy_until), sequential_cumsum(tau)
    comp = ends(model, t0, off, cum)
    # a padded run's gradients past its own capacity are not its events
    used = keep(comp[:, :cap], leading(cap, run_cap), jnp.inf, axis=1)
    flat = used.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    events = flat[order]
    n_events = run_cap * worker_count(model)
    threshold = size.value("threshold", malenia_threshold(comp.shape[0], size.M))
    hi = _malenia_end(used, events, threshold, live_rows(model), n_events)
    beyond = keep(comp[:, run_cap], live_rows(model), jnp.inf)  # a gradient past capacity
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
    return finish_round(model, t0, busy_until, worker_times(off, tau, cum, counts), coll)


def _malenia_end(used, events, threshold, active, num) -> jax.Array:
    """Index into the sorted completions ``events`` of the first at which the rule holds for
    the ``[n, capacity]`` completion times ``used`` (``num``, the run's events, if never);
    ``active``: the run's workers, the rule's n.

    The rule is monotone in time: a binary search evaluating ``sum_i 1/b_i`` directly."""
    size = events.shape[0]

    def holds(t):
        b = jnp.sum(used <= t, axis=1)
        ok, inverse = b >= 1, 1.0 / jnp.maximum(b, 1).astype(jnp.float32)
        ok, inverse = keep(ok, active, True), keep(inverse, active, 0.0)
        return jnp.all(ok) & (jnp.sum(inverse) <= threshold)

    def search(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        ok = holds(events[jnp.minimum(mid, size - 1)])
        going = lo < hi
        return jnp.where(going & ~ok, mid + 1, lo), jnp.where(going & ok, mid, hi)

    top = jnp.asarray(num, jnp.int32)
    _, hi = lax.fori_loop(0, size.bit_length() + 1, search, (jnp.int32(0), top))
    return hi
