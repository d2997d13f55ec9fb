"""Tests for jaxnigt.rl.critic: V-trace and GAE targets against the IMPALA paper's definitions, the
critic learning a fixed policy's value, and the actor-critic gradient."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tasks import linear_policy

from jaxnigt.envs import make_env
from jaxnigt.envs.toy import lqr1d_objective
from jaxnigt.rl import critic
from jaxnigt.rl.rollout import rollout


def test_vtrace_on_policy_equals_gae_lambda_one():
    """Behaviour = target (ρ = c = 1) and λ = 1: v_s are the Monte-Carlo returns to the
    episode's end and the V-trace advantages GAE(1)'s, also across a termination."""
    rng = np.random.default_rng(0)
    S, H = 4, 7
    rewards = jnp.asarray(rng.normal(size=(S, H)), jnp.float32)
    values = jnp.asarray(rng.normal(size=(S, H)), jnp.float32)
    mask = jnp.asarray(np.arange(H)[None] < np.array([[7], [3], [1], [5]]), jnp.float32)
    rewards = rewards * mask
    adv_v, v_s = critic.vtrace_targets(rewards, values, mask, 0.9, jnp.zeros((S, H)))
    adv_g, ret_g = critic.gae_targets(rewards, values, mask, 0.9, 1.0)
    np.testing.assert_allclose(v_s, ret_g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv_v, adv_g, rtol=1e-5, atol=1e-5)
    # Monte Carlo: G_t = Σ_{h≥t} γ^(h−t) r_h within the episode
    g = np.zeros((S, H))
    for s in range(S):
        acc = 0.0
        for t in reversed(range(H)):
            acc = float(rewards[s, t]) + 0.9 * acc * float(mask[s, t + 1] if t + 1 < H else 0.0)
            g[s, t] = acc * float(mask[s, t])
    np.testing.assert_allclose(ret_g, g, rtol=1e-5, atol=1e-5)


def test_vtrace_hand_computed_off_policy_with_clipping():
    """Three steps, γ = 0.9, V = (1, 0.5, 2), r = (1, 0, 3), π/μ = (2, 0.5, 1.5), ρ̄ = c̄ = 1:
    ρ = c = (1, 0.5, 1); δ = (0.45, 0.65, 1.0);
    v_2 = 2 + 1 = 3, v_1 = 0.5 + 0.65 + 0.9·0.5·1 = 1.6,
    v_0 = 1 + 0.45 + 0.9·0.65 + 0.81·0.5·1 = 2.44;
    advantages ρ_s (r_s + γ v_{s+1} − V_s) = (1.44, 1.1, 1.0)."""
    rewards = jnp.array([[1.0, 0.0, 3.0]])
    values = jnp.array([[1.0, 0.5, 2.0]])
    mask = jnp.ones((1, 3))
    log_rho = jnp.log(jnp.array([[2.0, 0.5, 1.5]]))
    adv, v_s = critic.vtrace_targets(rewards, values, mask, 0.9, log_rho)
    np.testing.assert_allclose(v_s, [[2.44, 1.6, 3.0]], rtol=1e-5)
    np.testing.assert_allclose(adv, [[1.44, 1.1, 1.0]], rtol=1e-5)


def test_critic_learns_the_value_of_a_fixed_policy():
    """Regressing the critic on GAE(1) returns of a fixed linear policy on the linear-Gaussian
    system: its mean value at the start approaches the closed-form J_H."""
    H, gamma = 10, 0.95
    task = make_env("lqr1d", horizon=H)
    policy = linear_policy()
    model = critic.ActorCritic(policy, H)
    params = model.init(jax.random.key(0))
    hyper = {"gamma": gamma, "gae_lambda": 1.0, "value_coef": 1.0, "entropy_coef": 0.0}
    opt = optax.adam(1e-2)
    opt_state = opt.init(params["value"])
    S = 256

    @jax.jit
    def step(params, opt_state, key):
        keys = jax.random.split(key, S)
        traj = rollout(task, model, params, keys, jnp.zeros(S, jnp.int32))
        grads, _ = critic.actor_critic_gradient(model, params, traj, jnp.full(S, 1 / S), hyper)
        upd, opt_state = opt.update(jax.tree.map(jnp.negative, grads["value"]), opt_state)
        params = {**params, "value": optax.apply_updates(params["value"], upd)}
        v0 = model.value(params, traj.obs)[:, 0]
        return params, opt_state, jnp.mean(v0)

    v0s = []
    for i in range(600):
        params, opt_state, v0 = step(params, opt_state, jax.random.key(i))
        v0s.append(float(v0))
    v0 = np.mean(v0s[-200:])  # the critic's mean start value over the last batches
    flat = params["policy"]["params"]
    k = float(flat["mean"]["kernel"].reshape(()))
    b = float(flat["mean"]["bias"].reshape(()))
    _, std = policy.distribution(params["policy"], jnp.zeros((1,)))
    want = float(lqr1d_objective(task.env, k, b, float(std[0]), H, gamma))
    assert float(v0) == pytest.approx(want, rel=0.05), (float(v0), want)


def test_actor_critic_gradient_shapes_and_per_slot_equivalence():
    H = 6
    task = make_env("point_mass", horizon=H)
    from jaxnigt.rl.policy import make_policy

    model = critic.ActorCritic(make_policy(task), H)
    params = model.init(jax.random.key(1))
    # a seed's actor-critic run starts from the policy the policy-gradient methods start from
    chex.assert_trees_all_equal(params["policy"], model.policy.init(jax.random.key(1)))
    hyper = {"gamma": 0.99, "gae_lambda": 0.95, "value_coef": 0.5, "entropy_coef": 0.01}
    S = 4
    keys = jax.random.split(jax.random.key(2), S)
    traj = rollout(task, model, params, keys, jnp.zeros(S, jnp.int32))
    w = jnp.full(S, 1 / S)
    g, stats = critic.actor_critic_gradient(model, params, traj, w, hyper)
    assert jax.tree.structure(g) == jax.tree.structure(params)
    assert float(stats["count"]) == S
    per_slot = jax.tree.map(lambda p: jnp.broadcast_to(p, (S, *p.shape)), params)
    g_slot, _ = critic.actor_critic_gradient(model, per_slot, traj, w, hyper, per_slot_params=True)
    summed = jax.tree.map(lambda x: jnp.sum(x, axis=0), g_slot)
    for a, b in zip(jax.tree.leaves(summed), jax.tree.leaves(g), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)
    # V-trace with the target as behaviour gives GAE(1)'s gradient
    g_v, _ = critic.actor_critic_gradient(model, params, traj, w, {**hyper, "gae_lambda": 1.0},
                                          behaviour=per_slot)  # fmt: skip
    g_1, _ = critic.actor_critic_gradient(model, params, traj, w, {**hyper, "gae_lambda": 1.0})
    for a, b in zip(jax.tree.leaves(g_v), jax.tree.leaves(g_1), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)
