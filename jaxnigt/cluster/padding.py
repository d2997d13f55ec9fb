"""Padded cluster models: shapes as upper bounds, sizes as data.

A program built for ``n_max`` workers and ``M_max`` trajectory slots can run a cluster of
``n <= n_max`` workers collecting ``M <= M_max`` gradients a round, when ``n`` and ``M`` are
values of the run rather than shapes of the program: so runs that differ in n or M (a sweep
over the cluster's size, Rennala's M grid) share one compiled program and step their
rollouts together.  The conventions:

* A **padded worker** (rows ``n .. n_max - 1`` of the record; :func:`pad`) never completes:
  its compute times are ``inf`` (:func:`jaxnigt.cluster.model.sample_compute_times`), it
  contributes no gradient, wastes no work and takes no part in an AllReduce (its ``kappa``
  and message time are 0, the smallest there is).  :attr:`ClusterModel.workers
  <jaxnigt.cluster.model.ClusterModel>` holds ``n`` and :attr:`~jaxnigt.cluster.model.
  ClusterModel.active` the mask of the run's rows.
* A **padded slot** (slots ``M .. M_max - 1`` of a Rennala round) is never valid: its weight
  is 0 and its rollout, which is computed (shapes are fixed), does not count.
* **Draws are those of the unpadded run.**  Draws over a leading worker axis keep their
  values when rows are added (``[n_max, K][:n]`` equals ``[n, K]`` for the same key).  A
  trailing axis does not, so a draw whose trailing size is the run's ``M`` is taken from
  one flat draw at the unpadded run's flat positions (:func:`flat_draws`): JAX's
  partitionable threefry draws element ``(j, k)`` of a ``[m, M]`` draw from counter
  ``j * M + k`` (``jax_threefry_partitionable``, the default since JAX 0.5), so a padded run
  draws exactly the unpadded run's compute times.

What a padded run computes differently: sums over workers or slots include the padding's
zeros, and a reduction's order may change with its length, so sums of wasted time and the
gradient's weighted sum agree with the unpadded run's to float32 rounding, not always
bit for bit (the choice of gradients, their times and the round's end are exact).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from jaxnigt.cluster.model import ClusterModel


class PaddingError(ValueError):
    """A record that cannot be padded or stacked; the message says why."""


def pad(model: ClusterModel, n_max: int) -> ClusterModel:
    """``model`` (``n`` workers) as a record of ``n_max`` rows whose last ``n_max - n``
    never complete.

    Args:
      model: an unpadded record.
      n_max: the rows of the padded record (``>= model.n``).

    Returns:
      The record with ``workers = n``.

    Raises:
      PaddingError: ``n_max < n``, the record is already padded, or it has a power trace
        (a trace's drawn outages are not padded yet).
    """
    n = model.n
    if model.workers is not None:
        raise PaddingError("the cluster model is already padded")
    if int(n_max) < n:
        raise PaddingError(f"cannot pad {n} workers to {n_max}: n_max must be at least n")
    if model.power is not None:
        raise PaddingError(
            "a cluster with a computation-power trace (cluster.power) cannot be padded yet"
        )
    extra = int(n_max) - n

    def grow(x: jax.Array, fill) -> jax.Array:
        return jnp.concatenate([x, jnp.full((extra,), fill, x.dtype)])

    return dataclasses.replace(
        model,
        h=grow(model.h, 1.0),
        kappa=grow(model.kappa, 0.0),
        message=grow(model.message, 0.0),
        worker_types=grow(model.worker_types, 0),
        workers=jnp.int32(n),
    )


def stack(models: Sequence[ClusterModel]) -> ClusterModel:
    """Records of the same rows and choices stacked along a leading run axis (a program
    vmaps over it).

    Args:
      models: padded (or equal-sized) records with the same named choices and noise kind.

    Returns:
      One record whose arrays have a leading ``[len(models)]`` axis.

    Raises:
      PaddingError: the records differ in rows, noise kind or a named choice.
    """
    first = models[0]
    for m in models[1:]:
        if m.n != first.n:
            raise PaddingError(f"cannot stack records of {first.n} and {m.n} rows: pad them")
        if jax.tree.structure(m) != jax.tree.structure(first):
            raise PaddingError("cannot stack records that differ in a named choice or noise")
    return jax.tree.map(lambda *xs: jnp.stack(xs), *models)


def flat_draws(
    draw: Callable[[jax.Array, tuple[int, ...]], jax.Array],
    key: jax.Array,
    shape: tuple[int, int],
    cols: jax.Array,
) -> jax.Array:
    """The ``[m, K]`` draw of a run whose trailing size is ``cols <= K`` (traced): element
    ``(j, k)``, ``k < cols``, is element ``(j, k)`` of ``draw(key, (m, cols))``; the others
    are draws too (callers mask them).

    Args:
      draw: ``(key, shape) -> array``, elementwise in JAX's flat counter order (every noise
        kind of :mod:`jaxnigt.cluster.timing`).
      key: the draw's key.
      shape: ``(m, K)``, static.
      cols: ``[]`` int the run's trailing size.

    Returns:
      ``[m, K]``.
    """
    m, k_max = shape
    flat = draw(key, (m * k_max,))
    j = jnp.arange(m)[:, None]
    k = jnp.arange(k_max)[None, :]
    return flat[jnp.minimum(j * cols + k, m * k_max - 1)]


def worker_stats(values: jax.Array, active: jax.Array | None):
    """``(min, mean, max)`` of ``[n]`` per-worker values over a padded record's own workers
    (``active``, :attr:`~jaxnigt.cluster.model.ClusterModel.active`; None: all ``n``)."""
    if active is None:
        return jnp.min(values), jnp.mean(values), jnp.max(values)
    inside = lambda fill: jnp.where(active, values, fill)
    mean = jnp.sum(inside(0.0)) / jnp.sum(active.astype(values.dtype))
    return jnp.min(inside(jnp.inf)), mean, jnp.max(inside(-jnp.inf))
