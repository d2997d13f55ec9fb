"""Trajectory policy-gradient estimator g_H (docs/algorithms.md).

For one trajectory τ of H steps (global discount γ^h, not γ^{h−t}):

.. math::
    g_H(τ, θ) = \\sum_{t<H} R_t \\nabla_θ \\log π_θ(u_t | s_t), \\qquad
    R_t = \\sum_{h=t}^{H-1} γ^h r_h,

with steps after termination masked out. A weighted combination ``Σ_j w_j g_H(τ_j, θ)`` is
the gradient of the surrogate ``Σ_j w_j Σ_t mask_{j,t} · sg(R_{j,t}) · log π_θ(u_{j,t}|s_{j,t})``,
computed with ONE backward pass: no per-trajectory gradient vector is ever materialized.
The gradient is for *ascent* on J; pass its negation to optax (descent).

Reference: Williams (1992), REINFORCE; the G(PO)MDP form with reward-to-go.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxnigt.rl.policy import GaussianPolicy
from jaxnigt.rl.rollout import Trajectories


def reward_to_go(rewards: jax.Array, mask: jax.Array, gamma: jax.typing.ArrayLike) -> jax.Array:
    """``R_{j,t} = mask_{j,t} Σ_{h≥t} γ^h r_{j,h}`` (global discount), ``[S, H]``.

    Args:
      rewards: ``[S, H]`` (or ``[H]``) rewards.
      mask: same shape, 1.0 while alive.
      gamma: discount; may be traced.
    """
    horizon = rewards.shape[-1]
    discount_h = jnp.asarray(gamma, jnp.float32) ** jnp.arange(horizon, dtype=jnp.float32)
    disc = jnp.where(mask > 0, rewards, 0.0) * discount_h
    rtg = jnp.flip(jnp.cumsum(jnp.flip(disc, axis=-1), axis=-1), axis=-1)
    return jnp.where(mask > 0, rtg, 0.0)


def _log_probs(policy: GaussianPolicy, params: Any, traj: Trajectories, per_slot_params: bool):
    # Zero the inputs of masked steps: a NaN there would leak into the backward pass even
    # through a `where` on the output (0 * NaN cotangents).
    alive = (traj.mask > 0)[..., None]
    obs = jnp.where(alive, traj.obs, 0.0)
    u = jnp.where(alive, traj.u, 0.0)
    if per_slot_params:
        return jax.vmap(policy.log_prob)(params, obs, u)
    return policy.log_prob(params, obs, u)


def surrogate(
    policy: GaussianPolicy,
    params: Any,
    traj: Trajectories,
    weights: jax.Array,
    gamma: jax.typing.ArrayLike = 1.0,
    *,
    per_slot_params: bool = False,
) -> jax.Array:
    """``Σ_j w_j Σ_t mask · sg(R_{j,t}) · log π(u_{j,t} | s_{j,t})`` (scalar).

    Args:
      policy: the policy.
      params: parameters (leading ``[S]`` axis if ``per_slot_params``).
      traj: ``Trajectories`` with S slots.
      weights: ``[S]`` weights ``w_j`` (0 drops a slot).
      gamma: discount for the reward-to-go (traced ok).
      per_slot_params: params carry a leading slot axis.
    """
    rtg = jax.lax.stop_gradient(reward_to_go(traj.rewards, traj.mask, gamma))
    logp = _log_probs(policy, params, traj, per_slot_params)
    # where, not multiply: a masked log-prob must not leak inf/NaN into the sum.
    per_step = jnp.where(traj.mask > 0, rtg * logp, 0.0)
    return jnp.sum(jnp.asarray(weights, per_step.dtype) * jnp.sum(per_step, axis=-1))


def policy_gradient(
    policy: GaussianPolicy,
    params: Any,
    traj: Trajectories,
    weights: jax.Array,
    gamma: jax.typing.ArrayLike,
    *,
    per_slot_params: bool = False,
) -> tuple[Any, dict[str, jax.Array]]:
    """``Σ_j w_j g_H(τ_j, θ)`` with one ``jax.grad`` of :func:`surrogate`, plus stats.

    Args:
      policy, params, traj, weights, gamma: as in :func:`surrogate`.
      per_slot_params: params have a leading ``[S]`` axis; the returned gradient then has it
        too (slot j's entry is ``w_j g_H(τ_j, θ_j)``).

    Returns:
      ``(grads, stats)``: ``grads`` a pytree like ``params`` (ascent direction on J);
      ``stats`` with ``mean_return`` and ``mean_length`` over slots with ``w_j != 0``, and
      ``sum_return``, ``sum_length``, ``count`` (float32) so chunked callers can combine
      them: ``mean = Σ sum / Σ count``.
    """
    grads = jax.grad(
        lambda p: surrogate(policy, p, traj, weights, gamma, per_slot_params=per_slot_params)
    )(params)
    used = (jnp.asarray(weights) != 0).astype(jnp.float32)
    count = jnp.sum(used)
    sum_return = jnp.sum(used * traj.returns)
    sum_length = jnp.sum(used * traj.lengths.astype(jnp.float32))
    denom = jnp.maximum(count, 1.0)
    stats = {
        "mean_return": sum_return / denom,
        "mean_length": sum_length / denom,
        "sum_return": sum_return,
        "sum_length": sum_length,
        "count": count,
    }
    return grads, stats
