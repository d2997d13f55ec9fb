"""The actor-critic family's value function and loss: a critic MLP beside the Gaussian policy,
GAE and V-trace targets (from rlax), and one actor-critic loss with one backward pass.

:class:`ActorCritic` holds the parameters ``{"policy": ..., "value": ...}`` and behaves like
the :class:`~jaxnigt.rl.policy.GaussianPolicy` it wraps (``init``, ``sample``, ``log_prob``,
...), so rollouts, evaluation and the engines take it unchanged; ``value`` is the critic
``V(s, t/H)`` (2 × 64 tanh): the time left matters on a finite horizon, where the objective is
the H-step return and an episode's end at H is terminal.

The loss of a batch of trajectories with weights ``w_j`` (one backward pass)::

    L = Σ_j w_j Σ_t mask [ −sg(A_t) log π(u_t|s_t) + c_v/2 (sg(G_t) − V(s_t))² − c_e H[π(·|s_t)] ]

with on-policy advantages from generalized advantage estimation (``A = GAE(λ)``, ``G = A +
V``) or, off-policy, V-trace (Espeholt et al., 2018: ``G = v_s``, ``A = ρ̄-clipped
importance weight × (r + γ v_{s+1} − V)``) against the behaviour policy's log-probabilities.
The returned "gradient" is ``−∇L`` (an ascent direction, as the policy-gradient estimator's).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxnigt.rl.policy import GaussianPolicy
from jaxnigt.rl.rollout import Trajectories


class _ValueMLP(nn.Module):
    hidden: tuple[int, ...]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i, width in enumerate(self.hidden):
            x = jnp.tanh(nn.Dense(width, name=f"hidden_{i}")(x))
        return nn.Dense(1, name="value")(x)[..., 0]


@dataclasses.dataclass(frozen=True)
class ActorCritic:
    """A Gaussian policy and a value MLP; hashable (a static jit argument).

    Attributes:
      policy: the :class:`~jaxnigt.rl.policy.GaussianPolicy`.
      horizon: H, for the critic's time feature t/H.
      hidden: the critic's hidden widths (2 × 64 tanh).
    """

    policy: GaussianPolicy
    horizon: int
    hidden: tuple[int, ...] = (64, 64)

    @property
    def obs_size(self) -> int:
        return self.policy.obs_size

    @property
    def action_size(self) -> int:
        return self.policy.action_size

    def init(self, key: jax.Array) -> dict:
        """The policy from ``key`` itself (the same initial policy as the policy-gradient
        methods of a seed: comparisons start from one point), the critic from a key folded
        out of it."""
        x = jnp.zeros((self.policy.obs_size + 1,), jnp.float32)
        value = _ValueMLP(self.hidden).init(jax.random.fold_in(key, 1), x)
        return {"policy": self.policy.init(key), "value": value}

    def distribution(self, params, obs):
        return self.policy.distribution(params["policy"], obs)

    def sample(self, params, obs, key):
        return self.policy.sample(params["policy"], obs, key)

    def log_prob(self, params, obs, u):
        return self.policy.log_prob(params["policy"], obs, u)

    def to_action(self, u):
        return self.policy.to_action(u)

    def mode(self, params, obs):
        return self.policy.mode(params["policy"], obs)

    def entropy(self, params, obs) -> jax.Array:
        """Differential entropy of the pre-squash Gaussian, summed over action dims."""
        _, std = self.policy.distribution(params["policy"], obs)
        return jnp.sum(jnp.log(std) + 0.5 * math.log(2 * math.pi * math.e), axis=-1)

    def value(self, params, obs: jax.Array) -> jax.Array:
        """``V(s_t, t/H)`` of ``obs`` ``[..., H, obs]`` (the time axis second to last)."""
        steps = obs.shape[-2]
        t = jnp.broadcast_to(
            jnp.arange(steps, dtype=obs.dtype)[:, None] / self.horizon, (*obs.shape[:-1], 1)
        )
        return _ValueMLP(self.hidden).apply(params["value"], jnp.concatenate([obs, t], -1))


def _discounts(mask: jax.Array, gamma) -> jax.Array:
    """``γ`` while the episode goes on after step t, 0 at its last step (termination or H)."""
    alive_next = jnp.concatenate([mask[..., 1:], jnp.zeros_like(mask[..., :1])], axis=-1)
    return jnp.asarray(gamma, jnp.float32) * alive_next


def _next(values: jax.Array) -> jax.Array:
    """``V(s_{t+1})`` ``[S, H]``: the next step's value, 0 after the last step."""
    return jnp.concatenate([values[..., 1:], jnp.zeros_like(values[..., :1])], axis=-1)


def gae_targets(rewards, values, mask, gamma, lambda_) -> tuple[jax.Array, jax.Array]:
    """``(advantages, returns)`` ``[S, H]`` by GAE(λ) (``rlax``); every quantity is 0 on the
    steps after an episode ended, and the end (termination or H) is terminal."""
    import rlax

    values = values * mask
    ends = jnp.zeros_like(values[..., :1])
    adv = jax.vmap(
        lambda r, d, v: rlax.truncated_generalized_advantage_estimation(r, d, lambda_, v)
    )(rewards, _discounts(mask, gamma), jnp.concatenate([values, ends], axis=-1))
    adv = adv * mask
    return adv, adv + values


def vtrace_targets(rewards, values, mask, gamma, log_rho, *, clip_rho=1.0, clip_pg_rho=1.0):
    """``(pg_advantages, v_s)`` ``[S, H]`` by V-trace (``rlax``): λ = 1, ρ̄ = ``clip_rho``,
    c̄ = 1, the policy-gradient ratio clipped at ``clip_pg_rho``; ``log_rho`` is
    ``log π(u|s) − log μ(u|s)`` (target minus behaviour)."""
    import rlax

    def one(v_tm1, v_t, r_t, d_t, rho):
        out = rlax.vtrace_td_error_and_advantage(
            v_tm1,
            v_t,
            r_t,
            d_t,
            rho,
            lambda_=1.0,
            clip_rho_threshold=clip_rho,
            clip_pg_rho_threshold=clip_pg_rho,
        )
        return out.pg_advantage, out.errors + v_tm1

    values = values * mask
    rho = jnp.exp(jnp.where(mask > 0, log_rho, 0.0))
    discounts = _discounts(mask, gamma)
    adv, v_s = jax.vmap(one)(values, _next(values), rewards, discounts, rho)
    return adv * mask, v_s * mask


def actor_critic_gradient(
    model: ActorCritic,
    params: Any,
    traj: Trajectories,
    weights: jax.Array,
    hyper: dict,
    *,
    per_slot_params: bool = False,
    behaviour: Any = None,
    behaviour_log_prob: jax.Array | None = None,
) -> tuple[Any, dict[str, jax.Array]]:
    """``−∇L`` of the actor-critic loss (module docstring) and rollout statistics.

    Args:
      model: the :class:`ActorCritic`.
      params: its parameters (a leading ``[S]`` axis with ``per_slot_params``).
      traj: ``[S]`` trajectories; weights: ``[S]`` ``w_j`` (0 drops a trajectory).
      hyper: traced ``gamma``, ``gae_lambda``, ``value_coef``, ``entropy_coef``.
      behaviour: None (on-policy: GAE) or per-slot behaviour params (V-trace, leading [S]).
      behaviour_log_prob: or, for V-trace, the behaviour's ``log μ(u_t|s_t)`` ``[S, H]``
        itself (central inference: a trajectory's steps come from several versions).
    """
    if behaviour is not None and behaviour_log_prob is not None:
        raise ValueError("give behaviour params or behaviour_log_prob, not both")

    def loss(p):
        lp = _per_slot(model.log_prob, p, traj, per_slot_params)
        v = _value(model, p, traj.obs, per_slot_params)
        adv, target = _targets(model, traj, lp, v, hyper, behaviour, behaviour_log_prob)
        ent = _per_slot(lambda q, o, u: model.entropy(q, o), p, traj, per_slot_params)
        per_step = (
            -adv * lp + 0.5 * hyper["value_coef"] * (target - v) ** 2 - hyper["entropy_coef"] * ent
        )
        per_step = jnp.where(traj.mask > 0, per_step, 0.0)
        return jnp.sum(jnp.asarray(weights, per_step.dtype) * jnp.sum(per_step, axis=-1))

    grads = jax.tree.map(jnp.negative, jax.grad(loss)(params))
    used = (jnp.asarray(weights) != 0).astype(jnp.float32)
    stats = {
        "sum_return": jnp.sum(used * traj.returns),
        "sum_length": jnp.sum(used * traj.lengths.astype(jnp.float32)),
        "count": jnp.sum(used),
    }
    return grads, stats


def _targets(model, traj, lp, v, hyper, behaviour, behaviour_log_prob):
    """``(advantages, value targets)`` ``[S, H]``, held constant: GAE on-policy, else V-trace
    against the behaviour's log-probabilities (given, or from its per-slot params)."""
    v = jax.lax.stop_gradient(v)
    if behaviour is None and behaviour_log_prob is None:
        adv, target = gae_targets(traj.rewards, v, traj.mask, hyper["gamma"], hyper["gae_lambda"])
    else:
        lb = behaviour_log_prob
        if lb is None:
            lb = jax.vmap(model.log_prob)(
                behaviour, _clean(traj.obs, traj.mask), _clean(traj.u, traj.mask)
            )
        log_rho = jax.lax.stop_gradient(lp) - lb
        adv, target = vtrace_targets(traj.rewards, v, traj.mask, hyper["gamma"], log_rho)
    return jax.lax.stop_gradient(adv), jax.lax.stop_gradient(target)


def _clean(x, mask):
    return jnp.where((mask > 0)[..., None], x, 0.0)


def _per_slot(fn, params, traj, per_slot_params):
    obs, u = _clean(traj.obs, traj.mask), _clean(traj.u, traj.mask)
    if per_slot_params:
        return jax.vmap(fn)(params, obs, u)
    return fn(params, obs, u)


def _value(model, params, obs, per_slot_params):
    if per_slot_params:
        return jax.vmap(model.value)(params, obs)
    return model.value(params, obs)
