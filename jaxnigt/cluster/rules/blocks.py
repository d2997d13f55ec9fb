"""The building blocks of a round rule of one's own (``examples/my_rule.py`` uses them).

:func:`draw_times` draws a round's compute times so that a padded run draws what its
unpadded run would; :func:`collect_until` turns any stopping time into the round's record
with the end-of-round conventions every rule shares (:mod:`jaxnigt.cluster.rounds`: in-flight
work, the AllReduce, a down worker); :func:`kth_smallest` reads "the k-th completion".  With
:class:`~jaxnigt.cluster.rounds.RoundSize` (the sizes) and
:func:`~jaxnigt.cluster.rounds.worker_count` (the run's workers) a rule is written once for
ordinary and padded programs alike.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxnigt.cluster import padding
from jaxnigt.cluster.model import ClusterModel, sample_noise
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    RoundSize,
    ends,
    finish_round,
    keep,
    leading,
    live_rows,
    sequential_cumsum,
    start_offsets,
    worker_times,
)

__all__ = ["collect_until", "draw_times", "kth_smallest", "padded_times"]


def padded_times(
    model: ClusterModel,
    key: jax.Array,
    shape: tuple[int, int],
    cols: jax.Array,
    rows=None,
    fold: int | None = None,
) -> jax.Array:
    """``[m, K]`` compute times ``h_i ξ`` of which the run's are its first ``cols`` columns,
    drawn as the run's own ``[m, cols]`` draw (:func:`jaxnigt.cluster.padding.flat_draws`);
    the columns past ``cols`` and the rows that are not the run's never complete (``inf``).

    Args:
      model: the cluster model.
      key: the draw's key.
      shape: ``(m, K)``, static.
      cols: ``[]`` int the run's columns.
      rows: ``[m]`` the workers of the rows (None: every worker, ``m = n``).
      fold: draw from ``fold_in(key, fold)`` instead (None: ``key``).

    Returns:
      ``[m, K]`` float32 (an ordinary record's full draw: ``h_i ξ`` drawn as ``[m, K]``).
    """
    h = (model.h if rows is None else model.h[rows])[:, None]
    key = key if fold is None else jax.random.fold_in(key, fold)
    columns, live = leading(shape[1], cols), live_rows(model)
    if columns is None and live is None:  # the run's own draw: every column and row is its
        return h * sample_noise(model, key, shape)
    draw = lambda k, s: sample_noise(model, k, s)
    tau = keep(h * padding.flat_draws(draw, key, shape, cols), columns, jnp.inf, axis=1)
    return keep(tau, live_rows(model, rows), jnp.inf, axis=0)


def draw_times(model: ClusterModel, key: jax.Array, size: RoundSize, extra: int = 1):
    """A round's compute times, column k each worker's (k+1)-th gradient.

    Args:
      model: the cluster model.
      key: the round's PRNG key.
      size: the round's sizes (``size.M`` columns, and the run's own in a padded program).
      extra: times beyond the batch (the gradient in flight at the round's end).

    Returns:
      ``[n, size.M + extra]`` float32.
    """
    return padded_times(model, key, (model.n, size.M + extra), size.value("M") + extra)


def kth_smallest(values: jax.Array, k: jax.typing.ArrayLike) -> jax.Array:
    """The ``k``-th smallest of ``values``, flattened.

    Args:
      values: an array of times.
      k: 1-based, traced or static.

    Returns:
      ``[]``: ``inf`` when fewer than ``k`` are finite (``-inf`` for ``k < 1``).
    """
    flat = jnp.sort(jnp.ravel(values))
    k = jnp.asarray(k, jnp.int32)
    return jnp.where(k >= 1, flat[jnp.clip(k - 1, 0, flat.shape[0] - 1)], -jnp.inf)


def collect_until(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    stop: Callable[[jax.Array], jax.Array],
    *,
    slots: int,
) -> RoundSchedule:
    """A round that collects every completion up to a stopping time.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times (:func:`draw_times`; ``K > slots`` keeps the gradient
        each worker has in flight at the end).
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      stop: ``completions -> T``: given ``[n, slots]`` completion times relative to ``t0``
        (worker i's (k+1)-th gradient of the round in column k, in simulated time, power
        traces applied), the collection's end, relative to ``t0``.
      slots: static most gradients a round uses (columns of ``completions``).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`: the completions at or
      before ``T`` count (ties: lower worker, then lower k), at most ``slots``; the work in
      flight at ``T`` is cancelled or discarded (``model.inflight``); the AllReduce follows.

    Raises:
      ValueError: ``tau`` has fewer than ``slots`` columns.
    """
    t0 = jnp.asarray(t0, jnp.float32)
    tau = jnp.asarray(tau, jnp.float32)
    if tau.shape[1] < slots:
        raise ValueError(f"collect_until needs {slots} compute times per worker")
    off = start_offsets(t0, busy_until)
    cum = sequential_cumsum(tau)
    comp = ends(model, t0, off, cum)[:, :slots]
    t_rel = jnp.asarray(stop(comp), jnp.float32)
    flat = comp.reshape(-1)
    order = jnp.argsort(flat, stable=True)[:slots]
    valid = flat[order] <= t_rel
    counts = jnp.zeros((tau.shape[0],), jnp.int32).at[order // slots].add(valid.astype(jnp.int32))
    coll = Collection(
        t_rel=t_rel,
        counts=counts,
        slot_worker=order // slots,
        slot_rank=order % slots,
        slot_valid=valid,
        overflow=jnp.bool_(False),
    )
    return finish_round(model, t0, busy_until, worker_times(off, tau, cum, counts), coll)
