"""Aggregators: weights over a round's trajectory slots (docs/cluster_model.md).

Weights over the ``S`` trajectory slots of a :class:`~jaxnigt.cluster.schedules.RoundSchedule` (each
slot tagged with its worker); the round engine plugs them into one weighted surrogate so a
single backward pass gives ``g = sum_j w_j g_j`` (docs/algorithms.md).  Invalid slots get weight 0.
Split over devices (:mod:`jaxnigt.run.devices`), the slots are sharded and XLA turns the weighted
sum into one all-reduce, so no separate reduction over a worker axis is needed.

Rennala and sync return the plain mean of all collected gradients,
``g = sum_i s_i / sum_i b_i``; Malenia returns ``g = (1/n) sum_i s_i / b_i``, unbiased for
the average objective of heterogeneous workers (Rennala is biased toward fast workers).
The same averages of per-worker gradient sums and counts are the pure reductions of
:mod:`jaxnigt.cluster.reductions`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxnigt.cluster.rounds import RoundSchedule


def mean_weights(slot_valid: jax.Array) -> jax.Array:
    """Plain-mean weights ``w_j = valid_j / sum_j valid_j`` over ``[S]`` slots (float32).

    Args:
      slot_valid: ``[S]`` bool.

    Returns:
      ``[S]`` float32 weights, zero on invalid slots (all zero when none is valid).
    """
    valid = slot_valid.astype(jnp.float32)
    return valid / jnp.maximum(jnp.sum(valid), 1.0)


def per_worker_mean_weights(
    slot_worker: jax.Array, slot_valid: jax.Array, counts: jax.Array
) -> jax.Array:
    """Malenia weights ``w_j = valid_j / (n * b_{worker(j)})`` over ``[S]`` slots, ``n``
    the workers with ``b_i >= 1`` (every worker once Malenia's rule holds; a padded record's
    own workers, :mod:`jaxnigt.cluster.padding`).

    Args:
      slot_worker: ``[S]`` int32 worker of each slot.
      slot_valid: ``[S]`` bool.
      counts: ``[n]`` int32 valid slots per worker ``b_i``.

    Returns:
      ``[S]`` float32 weights, zero on invalid slots (:func:`jaxnigt.cluster.reductions.
      malenia_reduce` is the same average of per-worker sums).
    """
    # n: the workers that contribute, all n when the rule holds (a padded record's own).
    n = jnp.sum(counts > 0).astype(jnp.float32)
    b = jnp.maximum(counts[slot_worker], 1).astype(jnp.float32)  # guard: invalid slots
    return slot_valid.astype(jnp.float32) / (n * b)


def rennala_weights(sched: RoundSchedule) -> jax.Array:
    """Rennala's weights: the plain mean of the round's ``M`` gradients.

    Args:
      sched: the round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Returns:
      ``[S]`` float32 weights ``1/M`` on the ``M`` valid slots.
    """
    return mean_weights(sched.slot_valid)


def malenia_weights(sched: RoundSchedule) -> jax.Array:
    """Malenia's weights: the mean over workers of each worker's mean.

    Args:
      sched: the round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Returns:
      ``[S]`` float32 weights ``1 / (n b_i)`` on worker ``i``'s valid slots.
    """
    return per_worker_mean_weights(sched.slot_worker, sched.slot_valid, sched.counts)


def sync_weights(sched: RoundSchedule) -> jax.Array:
    """The synchronous rules' weights: the plain mean of the round's gradients.

    Args:
      sched: the round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Returns:
      ``[S]`` float32 weights ``1 / (n b)`` (an m-synchronous round's ``1 / m``).
    """
    return mean_weights(sched.slot_valid)
