"""Per-worker reductions: a round's update direction from each worker's gradient sum and count.

Pure functions on plain arrays, in the style of rlax: a caller with its own loop (its own
workers, its own all-reduce) holds, after a round, each worker ``i``'s sum ``s_i`` of the
gradients it computed and their number ``b_i``, as pytrees with a leading worker axis
``[n, ...]`` and an ``[n]`` count vector, and reduces them to one direction:

* :func:`rennala_reduce`: the mean of every gradient delivered, ``g = sum_i s_i / sum_i b_i``
  (Rennala's and the synchronous rules' aggregation: homogeneous workers, fast workers
  weigh more);
* :func:`malenia_reduce`: the mean over the contributing workers of each worker's mean,
  ``g = (1/|A|) sum_{i in A} s_i / b_i`` with ``A = {i : b_i > 0}`` (Malenia's aggregation:
  unbiased for the average objective of heterogeneous workers).

:func:`worker_sums` turns per-slot gradients tagged with their worker (a round's
:class:`~jaxnigt.cluster.rounds.RoundSchedule` slots) into those sums and counts.  The
definitions are those of docs/cluster_model.md and of the slot weights of
:mod:`jaxnigt.cluster.aggregators` (the library's path: one weighted backward pass,
``sum_j w_j g_j``), which give the same direction on the same gradients up to float rounding.
Every function is ``jax.jit``-able and checks its shapes with chex; ``examples/
rennala_nigt_minimal.py`` uses them in a whole round of Rennala NIGT.

Reference: "Asynchronous Policy Gradient Aggregation for Efficient Distributed Reinforcement
Learning" (ICLR 2026), Rennala NIGT and Malenia NIGT.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

__all__ = ["malenia_reduce", "rennala_reduce", "worker_sums"]


def _check(sums: Any, counts: jax.Array) -> jax.Array:
    """``counts`` as an array after checking it is ``[n]`` and every leaf of ``sums`` is
    ``[n, ...]``."""
    counts = jnp.asarray(counts)
    chex.assert_rank(counts, 1)
    chex.assert_tree_shape_prefix(sums, counts.shape)
    return counts


def rennala_reduce(sums: Any, counts: jax.typing.ArrayLike) -> Any:
    """The mean of all gradients delivered: Rennala's aggregation.

    .. math::
        g = \\frac{\\sum_i s_i}{\\max(\\sum_i b_i, 1)}

    A worker that delivered more gradients weighs more (Rennala is biased toward fast
    workers when their objectives differ).  The guard ``max(., 1)`` makes a round with no
    gradient a zero direction, as :func:`jaxnigt.cluster.aggregators.mean_weights` does.

    Args:
      sums: pytree of ``[n, ...]`` arrays: ``s_i``, worker ``i``'s sum of gradients.
      counts: ``[n]`` ``b_i``, the number of gradients in ``s_i`` (int32 or float).

    Returns:
      A pytree like one worker's slice of ``sums`` (leading axis reduced), each leaf of its
      dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxnigt.cluster import rennala_reduce
      >>> sums = {"w": jnp.array([[2.0, 4.0], [0.0, 0.0], [3.0, 3.0]])}
      >>> rennala_reduce(sums, jnp.array([2, 0, 3]))["w"]
      Array([1. , 1.4], dtype=float32)
    """
    counts = _check(sums, counts)
    total = jnp.maximum(jnp.sum(counts), 1)
    return jax.tree.map(lambda s: jnp.sum(s, axis=0) / total.astype(s.dtype), sums)


def malenia_reduce(sums: Any, counts: jax.typing.ArrayLike) -> Any:
    """The mean over contributing workers of each worker's mean: Malenia's aggregation.

    .. math::
        g = \\frac{1}{|A|} \\sum_{i \\in A} \\frac{s_i}{b_i}, \\qquad A = \\{i : b_i > 0\\}

    Every contributing worker weighs the same whatever its speed, so ``g`` is unbiased for the
    average of the workers' objectives.  ``A`` is every worker once Malenia's rule holds (it
    waits for each); a worker with ``b_i = 0`` (a padded record's extra rows) is left out, as
    in :func:`jaxnigt.cluster.aggregators.per_worker_mean_weights`.  With no contributing
    worker at all the direction is zero (the slot weights are 0/0 there).

    Args:
      sums: pytree of ``[n, ...]`` arrays: ``s_i``, worker ``i``'s sum of gradients.
      counts: ``[n]`` ``b_i``, the number of gradients in ``s_i`` (int32 or float).

    Returns:
      A pytree like one worker's slice of ``sums`` (leading axis reduced), each leaf of its
      dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxnigt.cluster import malenia_reduce
      >>> sums = {"w": jnp.array([[2.0, 4.0], [0.0, 0.0], [3.0, 3.0]])}
      >>> malenia_reduce(sums, jnp.array([2, 0, 3]))["w"]
      Array([1. , 1.5], dtype=float32)
    """
    counts = _check(sums, counts)
    contributes = counts > 0
    workers = jnp.maximum(jnp.sum(contributes), 1)
    per_worker = jnp.where(contributes, 1.0 / jnp.maximum(counts, 1), 0.0) / workers

    def reduce(s):
        return jnp.tensordot(per_worker.astype(s.dtype), s, axes=1)

    return jax.tree.map(reduce, sums)


def worker_sums(
    slot_values: Any,
    slot_worker: jax.Array,
    slot_valid: jax.Array,
    num_workers: int,
) -> tuple[Any, jax.Array]:
    """Each worker's sum and count of the valid slots tagged with it.

    .. math::
        s_i = \\sum_{j : w(j) = i, v_j} x_j, \\qquad b_i = |\\{j : w(j) = i, v_j\\}|

    An invalid slot adds nothing, not even a NaN it may hold (selected out, not multiplied
    by 0).

    Args:
      slot_values: pytree of ``[S, ...]`` arrays: ``x_j``, slot ``j``'s value (its gradient).
      slot_worker: ``[S]`` int worker ``w(j)`` of each slot, in ``[0, num_workers)``.
      slot_valid: ``[S]`` bool ``v_j``: the slot counts.
      num_workers: static ``n``.

    Returns:
      ``(sums, counts)``: a pytree of ``[n, ...]`` arrays like ``slot_values`` and ``[n]``
      int32 counts, the inputs of :func:`rennala_reduce` and :func:`malenia_reduce`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxnigt.cluster import worker_sums
      >>> x = jnp.array([[1.0, 1.0], [2.0, 0.0], [5.0, 5.0], [0.0, 4.0]])
      >>> sums, counts = worker_sums(
      ...     x, jnp.array([1, 0, 1, 0]), jnp.array([True, True, True, False]), 3
      ... )
      >>> sums
      Array([[2., 0.],
             [6., 6.],
             [0., 0.]], dtype=float32)
      >>> counts
      Array([1, 2, 0], dtype=int32)
    """
    chex.assert_rank(slot_worker, 1)
    chex.assert_equal_shape([slot_worker, slot_valid])
    chex.assert_tree_shape_prefix(slot_values, slot_worker.shape)
    valid = jnp.asarray(slot_valid, bool)

    def total(x):
        kept = jnp.where(valid.reshape((-1,) + (1,) * (x.ndim - 1)), x, jnp.zeros_like(x))
        return jax.ops.segment_sum(kept, slot_worker, num_segments=num_workers)

    counts = jax.ops.segment_sum(valid.astype(jnp.int32), slot_worker, num_segments=num_workers)
    return jax.tree.map(total, slot_values), counts
