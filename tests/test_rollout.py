"""Tests for jaxnigt.rollout: masking, non-finite guard, types, per-slot params, MJX smoke."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.envs.base import State

from jaxnigt.envs import TaskEnv, make_env, make_heterogeneous
from jaxnigt.estimator import policy_gradient
from jaxnigt.policy import GaussianPolicy, make_policy
from jaxnigt.rollout import Trajectories, evaluate, rollout

H = 8


@dataclasses.dataclass(frozen=True)
class CountdownEnv:
    """Deterministic: reward 1 + t each step; terminates on the step taken at t = stop - 1.

    ``nan_at`` makes the reward of step ``nan_at`` NaN (non-finite guard). After termination
    it keeps returning reward 100 so masking is visible.
    """

    stop: int = 3
    nan_at: int = -1

    def reset(self, rng):
        del rng
        zero = jnp.zeros((), jnp.float32)
        return State(jnp.zeros((1,), jnp.float32), jnp.zeros((2,), jnp.float32), zero, zero)

    def step(self, state, action):
        t = state.pipeline_state[0]
        done = t >= self.stop - 1
        reward = jnp.where(t >= self.stop, 100.0, 1.0 + t)
        reward = jnp.where(t == self.nan_at, jnp.nan, reward)
        nxt = state.pipeline_state + 1.0
        obs = jnp.stack([nxt[0], jnp.sum(action)])
        return state.replace(
            pipeline_state=nxt, obs=obs, reward=reward, done=done.astype(jnp.float32)
        )


def _countdown_task(stop, nan_at=-1):
    return TaskEnv("countdown", CountdownEnv(stop, nan_at), horizon=H, obs_size=2, action_size=1)


POLICY = GaussianPolicy(obs_size=2, action_size=1, hidden=(4,))


def test_termination_masking():
    params = POLICY.init(jax.random.key(0))
    stops = [3, 1, 8, 20]
    keys = jax.random.split(jax.random.key(1), 2)
    types = jnp.zeros(2, jnp.int32)
    out = [rollout(_countdown_task(stop), POLICY, params, keys, types) for stop in stops]
    for stop, traj in zip(stops, out, strict=True):
        n = min(stop, H)
        expected_mask = (np.arange(H) < n).astype(np.float32)
        np.testing.assert_array_equal(traj.mask, np.broadcast_to(expected_mask, (2, H)))
        np.testing.assert_array_equal(traj.rewards[0], expected_mask * (1 + np.arange(H)))
        np.testing.assert_array_equal(traj.lengths, [n, n])
        np.testing.assert_allclose(traj.returns, [n * (n + 1) / 2] * 2)
        # stored inputs of dead steps are zeroed
        assert np.all(np.asarray(traj.u)[:, n:] == 0)
        assert np.all(np.asarray(traj.obs)[:, n:] == 0)
    assert out[0].mask.dtype == jnp.float32 and out[0].lengths.dtype == jnp.int32


def test_non_finite_is_termination():
    params = POLICY.init(jax.random.key(0))
    traj = rollout(
        _countdown_task(stop=20, nan_at=4),
        POLICY,
        params,
        jax.random.split(jax.random.key(1), 3),
        jnp.zeros(3, jnp.int32),
    )
    chex.assert_tree_all_finite(traj)
    np.testing.assert_array_equal(traj.lengths, [5, 5, 5])  # the NaN step is the last alive one
    np.testing.assert_array_equal(traj.rewards[0], [1, 2, 3, 4, 0, 0, 0, 0])
    g, _ = policy_gradient(POLICY, params, traj, jnp.ones(3), 0.99)
    chex.assert_tree_all_finite(g)


@pytest.fixture(scope="module")
def het_point_mass():
    task = make_heterogeneous(make_env("point_mass", horizon=10), "sign_flip")
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    return task, policy, params


def test_heterogeneous_observations(het_point_mass):
    task, policy, params = het_point_mass
    key = jax.random.key(4)
    keys = jnp.stack([key, key, jax.random.key(5), jax.random.key(5)])
    types = jnp.array([0, 1, 1, 0], jnp.int32)
    traj = rollout(task, policy, params, keys, types)
    chex.assert_shape(traj.obs, (4, 10, 5))
    # same reset key -> same s0: type 0 sees (s0, 0), type 1 sees (-s0, 1)
    s0 = np.asarray(traj.obs[0, 0, :4])
    np.testing.assert_allclose(traj.obs[1, 0], np.concatenate([-s0, [1.0]]), rtol=1e-6)
    np.testing.assert_allclose(traj.obs[2, 0, :4], -np.asarray(traj.obs[3, 0, :4]), rtol=1e-6)
    alive = np.asarray(traj.mask) > 0
    flags = np.asarray(traj.obs[..., 4])
    assert np.all(flags[[0, 3]][alive[[0, 3]]] == 0) and np.all(flags[[1, 2]][alive[[1, 2]]] == 1)


def test_per_slot_params_and_evaluate(het_point_mass):
    task, policy, params = het_point_mass
    keys = jax.random.split(jax.random.key(8), 6)
    types = jnp.arange(6, dtype=jnp.int32) % 2
    shared = rollout(task, policy, params, keys, types)
    stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (6, *x.shape)), params)
    per_slot = rollout(task, policy, stacked, keys, types, per_slot_params=True)
    chex.assert_trees_all_close(shared, per_slot, rtol=1e-5, atol=1e-5)
    # a different point in one slot changes only that slot
    other = jax.tree.map(lambda x: x.at[2].add(0.5), stacked)
    moved = rollout(task, policy, other, keys, types, per_slot_params=True)
    np.testing.assert_allclose(moved.u[0], shared.u[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(moved.u[2], shared.u[2])

    r1 = evaluate(task, policy, params, jax.random.key(3), 6)
    r2 = evaluate(task, policy, params, jax.random.key(3), 6)
    chex.assert_shape(r1, (6,))
    np.testing.assert_array_equal(r1, r2)
    det = rollout(
        task, policy, params, jax.random.split(jax.random.key(3), 6), types, deterministic=True
    )
    np.testing.assert_allclose(det.returns, r1)
    mean, _ = policy.distribution(params, det.obs)
    np.testing.assert_allclose(det.u, jnp.where(det.mask[..., None] > 0, mean, 0.0), atol=1e-6)


def test_no_retrace_on_second_call(het_point_mass):
    task, policy, params = het_point_mass
    keys = jax.random.split(jax.random.key(0), 4)
    types = jnp.zeros(4, jnp.int32)
    traced = jax.jit(
        chex.assert_max_traces(lambda t, p, k: rollout(t, policy, p, k, types), n=1),
        static_argnums=0,
    )
    traced(task, params, keys)
    new_params = jax.tree.map(lambda x: x + 1.0, params)
    traced(task, new_params, jax.random.split(jax.random.key(1), 4))
    # An equal task built anew hashes equal: no second trace either.
    traced(make_heterogeneous(make_env("point_mass", horizon=10)), params, keys)


def _mjx_smoke(name, horizon, batch=4, **kwargs):
    task = make_env(name, horizon=horizon, **kwargs)
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    traj = rollout(
        task,
        policy,
        params,
        jax.random.split(jax.random.key(1), batch),
        jnp.zeros(batch, jnp.int32),
    )
    assert isinstance(traj, Trajectories)
    chex.assert_shape(traj.obs, (batch, horizon, task.obs_size))
    chex.assert_shape(traj.u, (batch, horizon, task.action_size))
    chex.assert_shape([traj.rewards, traj.mask], (batch, horizon))
    chex.assert_shape([traj.returns, traj.lengths], (batch,))
    chex.assert_tree_all_finite(traj)
    grads, stats = policy_gradient(policy, params, traj, jnp.full((batch,), 1.0 / batch), 0.99)
    chex.assert_trees_all_equal_shapes(grads, params)
    chex.assert_tree_all_finite(grads)
    assert np.isfinite(float(stats["mean_return"]))
    return traj


def test_mjx_reacher_smoke():
    traj = _mjx_smoke("reacher", horizon=10)
    np.testing.assert_array_equal(traj.lengths, [10] * 4)  # reacher never terminates


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["hopper", "walker2d", "humanoid"])
def test_mjx_locomotion_smoke(name):
    traj = _mjx_smoke(name, horizon=100, solver_iterations=1, ls_iterations=4)
    assert np.all(np.asarray(traj.lengths) >= 1)


def test_early_exit_matches_full_horizon_scan():
    """point_mass terminates: the blocked while loop (stops once every slot has ended) must
    record exactly what one scan over all H steps records."""
    task = make_env("point_mass", horizon=40)
    assert task.terminates
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), 6)
    types = jnp.zeros(6, jnp.int32)
    early = rollout(task, policy, params, keys, types)
    full = rollout(dataclasses.replace(task, terminates=False), policy, params, keys, types)
    chex.assert_trees_all_equal(early, full)
