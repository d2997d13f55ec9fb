"""Aggregators: weights over trajectory slots and reductions over a worker axis (SPEC §4).

Two equivalent forms:

* **Weights** over the ``S`` trajectory slots of a :class:`~jaxnigt.schedules.RoundSchedule`
  (each slot tagged with its worker); the trainer plugs them into one weighted surrogate so a
  single backward pass gives ``g = sum_j w_j g_j`` (SPEC §1).  Invalid slots get weight 0.
* **Reductions** of per-worker gradient sums ``s_i`` (a pytree with a leading ``[n]`` axis)
  and counts ``b_i``.  With ``axis_name`` the inputs are one worker's unbatched values and the
  sums become ``lax.psum`` over that named axis, so the same code runs under
  ``jax.vmap(..., axis_name="worker")`` and later ``shard_map``.

Rennala and sync return the plain mean of all collected gradients,
``g = sum_i s_i / sum_i b_i``; Malenia returns ``g = (1/n) sum_i s_i / b_i``, unbiased for
the average objective of heterogeneous workers (Rennala is biased toward fast workers).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxnigt.schedules import RoundSchedule

PyTree = Any


def mean_weights(slot_valid: jax.Array) -> jax.Array:
    """Plain-mean weights ``w_j = valid_j / sum_j valid_j`` over ``[S]`` slots (float32)."""
    valid = slot_valid.astype(jnp.float32)
    return valid / jnp.maximum(jnp.sum(valid), 1.0)


def per_worker_mean_weights(
    slot_worker: jax.Array, slot_valid: jax.Array, counts: jax.Array
) -> jax.Array:
    """Malenia weights ``w_j = valid_j / (n * b_{worker(j)})`` over ``[S]`` slots.

    Args:
      slot_worker: ``[S]`` int32 worker of each slot.
      slot_valid: ``[S]`` bool.
      counts: ``[n]`` int32 valid slots per worker ``b_i``.
    """
    n = counts.shape[0]
    b = jnp.maximum(counts[slot_worker], 1).astype(jnp.float32)  # guard: invalid slots
    return slot_valid.astype(jnp.float32) / (n * b)


def rennala_weights(sched: RoundSchedule) -> jax.Array:
    """``[S]`` float32 weights ``1/M`` on the ``M`` valid slots."""
    return mean_weights(sched.slot_valid)


def malenia_weights(sched: RoundSchedule) -> jax.Array:
    """``[S]`` float32 weights ``1 / (n b_i)`` on worker ``i``'s valid slots."""
    return per_worker_mean_weights(sched.slot_worker, sched.slot_valid, sched.counts)


def sync_weights(sched: RoundSchedule) -> jax.Array:
    """``[S]`` float32 weights ``1 / (n b)`` (the plain mean)."""
    return mean_weights(sched.slot_valid)


def rennala_reduce(
    worker_sums: PyTree, counts: jax.Array, *, axis_name: str | None = None
) -> PyTree:
    """Plain mean of all collected gradients: ``sum_i s_i / sum_i b_i``.

    Args:
      worker_sums: pytree of per-worker gradient sums, leaves ``[n, ...]`` (or one worker's
        ``[...]`` when ``axis_name`` is given).
      counts: ``[n]`` (or ``[]``) gradients per worker.
      axis_name: named worker axis to ``psum`` over, or None for a leading batch axis.
    """
    if axis_name is None:
        total = jnp.maximum(jnp.sum(counts), 1).astype(jnp.float32)
        return jax.tree.map(lambda s: jnp.sum(s, axis=0) / total.astype(s.dtype), worker_sums)
    total = jnp.maximum(lax.psum(counts, axis_name), 1).astype(jnp.float32)
    return jax.tree.map(lambda s: lax.psum(s, axis_name) / total.astype(s.dtype), worker_sums)


def malenia_reduce(
    worker_sums: PyTree, counts: jax.Array, *, axis_name: str | None = None
) -> PyTree:
    """Mean of per-worker means: ``(1/n) sum_i s_i / b_i`` (workers with ``b_i = 0`` add 0).

    Args: as :func:`rennala_reduce`.
    """
    b = jnp.maximum(counts, 1).astype(jnp.float32)
    if axis_name is None:

        def leaf(s):
            per = s / b.reshape((-1,) + (1,) * (s.ndim - 1)).astype(s.dtype)
            return jnp.mean(per, axis=0)

        return jax.tree.map(leaf, worker_sums)
    return jax.tree.map(lambda s: lax.pmean(s / b.astype(s.dtype), axis_name), worker_sums)


def sync_reduce(worker_sums: PyTree, counts: jax.Array, *, axis_name: str | None = None) -> PyTree:
    """Plain mean of the ``n b`` gradients (same reduction as :func:`rennala_reduce`)."""
    return rennala_reduce(worker_sums, counts, axis_name=axis_name)
