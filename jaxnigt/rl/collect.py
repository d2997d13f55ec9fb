"""Turning a round's schedule into one policy gradient: rollouts of the slots that count.

A schedule (``jaxnigt.cluster.schedules``) decides *which* trajectories count — a static-capacity
slot list tagged with worker ids — and an aggregator (``jaxnigt.cluster.aggregators``) gives each
slot its weight. This module rolls out exactly those slots and reduces them to
``Σ_j w_j g_H(τ_j, θ)`` with the one-backward-pass estimator. Capacities larger than the
chunk size (Malenia, large synchronous rounds) are processed in fixed-size chunks inside a
``lax.while_loop`` that stops after the last valid slot, so a round never rolls out more than
``ceil(num_valid / chunk)`` chunks and no counted slot is dropped.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxnigt.cluster.schedules import RoundSchedule
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.rollout import rollout
from jaxnigt.rl.sharding import constrain_slots


def slot_keys(round_key: jax.Array, worker: jax.Array, rank: jax.Array) -> jax.Array:
    """Per-slot keys ``fold_in(fold_in(round_key, worker), rank)``.

    A trajectory's randomness depends only on (round, worker, the worker's k-th gradient), so
    two schedules that pick the same (worker, k) pairs roll out identical trajectories.

    Args:
      round_key: the key of the round's trajectories.
      worker: ``[S]`` worker id of each slot.
      rank: ``[S]`` rank of each slot among its worker's gradients (the k of its k-th).

    Returns:
      ``[S]`` keys, one per slot.
    """
    per_worker = jax.vmap(lambda w: jax.random.fold_in(round_key, w))(worker)
    return jax.vmap(jax.random.fold_in)(per_worker, rank)


def gradient_from_schedule(
    task: Any,
    policy: Any,
    params: Any,
    sched: RoundSchedule,
    weights: jax.Array,
    round_key: jax.Array,
    worker_types: jax.Array,
    gamma: jax.typing.ArrayLike,
    *,
    chunk: int,
    mesh: Any = None,
    estimator: Any = None,
) -> tuple[Any, dict[str, jax.Array]]:
    """``Σ_j w_j g_H(τ_j, θ)`` over a schedule's valid slots, plus summed rollout stats.

    Args:
      task: the environment the trajectories are rolled out in.
      policy: the policy (:mod:`jaxnigt.rl.policy`).
      params: the point θ where the gradients are taken.
      sched: the round's :class:`RoundSchedule` (capacity S, valid slots first).
      weights: ``[S]`` aggregator weights (zero on invalid slots).
      round_key: key of this round's trajectories (see :func:`slot_keys`).
      worker_types: ``[n]`` int32 environment type of each worker.
      gamma: discount (may be traced).
      chunk: static rollout batch; S <= chunk means one batch and no loop.
      mesh: optional device mesh; each rollout batch is split across it along the slot
        axis (:func:`jaxnigt.rl.sharding.constrain_slots`) and the sum becomes an all-reduce.
      estimator: ``(params, traj, weights) -> (grads, stats)``; default the policy-gradient
        estimator with discount ``gamma``.

    Returns:
      ``(grads, stats)`` with ``stats`` holding ``sum_return``, ``sum_length`` and ``count``
      over slots with nonzero weight.
    """
    keys = slot_keys(round_key, sched.slot_worker, sched.slot_rank)
    types = jnp.asarray(worker_types, jnp.int32)[sched.slot_worker]

    def batch_gradient(k, t, w):
        k, t, w = (constrain_slots(x, mesh) for x in (k, t, w))
        traj = rollout(task, policy, params, k, t)
        if estimator is None:
            grads, stats = policy_gradient(policy, params, traj, w, gamma)
        else:
            grads, stats = estimator(params, traj, w)
        return grads, {key: stats[key] for key in _STATS}

    if sched.slot_worker.shape[0] <= chunk:
        return batch_gradient(keys, types, weights)
    return _chunked_sum(batch_gradient, params, (keys, types, weights), sched.num_slots, chunk)


_STATS = ("sum_return", "sum_length", "count")


def _chunked_sum(batch_gradient, params, slots, num_valid: jax.Array, chunk: int):
    """Sum of ``batch_gradient`` over fixed-size chunks of the ``[S]`` slot arrays ``slots``
    (keys, types, weights), in a ``while_loop`` that stops after the last valid slot."""
    keys, types, weights = slots
    capacity = keys.shape[0]
    pad = -(-capacity // chunk) * chunk - capacity
    if pad:
        keys = jnp.concatenate([keys, keys[:pad]])
        types = jnp.concatenate([types, types[:pad]])
        weights = jnp.concatenate([weights, jnp.zeros((pad,), weights.dtype)])
    num_chunks = (num_valid + chunk - 1) // chunk

    def body(carry):
        i, acc_g, acc_s = carry
        take = lambda x: jax.lax.dynamic_slice_in_dim(x, i * chunk, chunk)
        g, s = batch_gradient(take(keys), take(types), take(weights))
        acc_g = jax.tree.map(jnp.add, acc_g, g)
        acc_s = jax.tree.map(jnp.add, acc_s, s)
        return i + 1, acc_g, acc_s

    zeros_g = jax.tree.map(jnp.zeros_like, params)
    zeros_s = {k: jnp.zeros([], jnp.float32) for k in _STATS}
    _, grads, stats = jax.lax.while_loop(
        lambda c: c[0] < num_chunks, body, (jnp.int32(0), zeros_g, zeros_s)
    )
    return grads, stats
