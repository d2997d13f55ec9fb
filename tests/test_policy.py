"""Tests for jaxnigt.rl.policy: density against numpy, shapes, squashing, sizes."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.envs import make_env
from jaxnigt.rl.policy import GaussianPolicy, make_policy, num_params

OBS, ACT = 5, 3


@pytest.fixture(scope="module")
def mlp():
    policy = GaussianPolicy(obs_size=OBS, action_size=ACT, action_scale=2.0)
    params = policy.init(jax.random.key(0))
    # perturb so the heads are not ~0 and the test sees a state-dependent std
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    leaves = [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    return policy, jax.tree.unflatten(treedef, leaves)


def _numpy_forward(policy, params):
    p = jax.tree.map(np.asarray, params)["params"]

    def forward(obs):
        x = np.asarray(obs, np.float64)
        for i in range(len(policy.hidden)):
            x = np.tanh(x @ p[f"hidden_{i}"]["kernel"] + p[f"hidden_{i}"]["bias"])
        mean = x @ p["mean"]["kernel"] + p["mean"]["bias"]
        z = x @ p["std"]["kernel"] + p["std"]["bias"] + policy._std_offset
        std = np.log1p(np.exp(z)) + policy.std_floor
        return mean, std

    return forward


def test_log_prob_matches_numpy_gaussian(mlp):
    policy, params = mlp
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(4, 7, OBS)).astype(np.float32)
    u = rng.normal(size=(4, 7, ACT)).astype(np.float32)
    mean, std = _numpy_forward(policy, params)(obs)
    expected = np.sum(
        -0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi), axis=-1
    )
    got = policy.log_prob(params, jnp.asarray(obs), jnp.asarray(u))
    chex.assert_shape(got, (4, 7))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    m, s = policy.distribution(params, jnp.asarray(obs))
    np.testing.assert_allclose(m, mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(s, std, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lead", [(), (6,), (2, 3)])
def test_shapes_and_squash(mlp, lead):
    policy, params = mlp
    obs = jnp.ones((*lead, OBS))
    mean, std = policy.distribution(params, obs)
    chex.assert_shape([mean, std], (*lead, ACT))
    assert bool(jnp.all(std >= policy.std_floor))
    u, a = policy.sample(params, obs, jax.random.key(3))
    chex.assert_shape([u, a], (*lead, ACT))
    np.testing.assert_allclose(a, 2.0 * np.tanh(np.asarray(u)), rtol=1e-6)
    assert bool(jnp.all(jnp.abs(a) <= 2.0))
    np.testing.assert_allclose(policy.mode(params, obs), 2.0 * np.tanh(np.asarray(mean)), 1e-6)
    chex.assert_shape(policy.log_prob(params, obs, u), lead)


def test_sample_statistics(mlp):
    policy, params = mlp
    obs = jnp.full((20_000, OBS), 0.3)
    u, _ = policy.sample(params, obs, jax.random.key(5))
    mean, std = policy.distribution(params, obs[0])
    np.testing.assert_allclose(u.mean(0), mean, atol=5 * float(std.max()) / np.sqrt(20_000))
    np.testing.assert_allclose(u.std(0), std, rtol=0.05)


def test_init_std_linear_unsquashed_and_sizes():
    policy = GaussianPolicy(obs_size=OBS, action_size=ACT, init_std=0.7)
    params = policy.init(jax.random.key(0))
    _, std = policy.distribution(params, jnp.zeros(OBS))
    np.testing.assert_allclose(std, 0.7, rtol=1e-5)
    d = OBS * 64 + 64 + 64 * 64 + 64 + 2 * (64 * ACT + ACT)
    assert num_params(params) == d

    lin = GaussianPolicy(OBS, ACT, hidden=(), squash=False, state_dependent_std=False)
    lp = lin.init(jax.random.key(0))
    assert num_params(lp) == OBS * ACT + ACT + ACT
    u, a = lin.sample(lp, jnp.ones(OBS), jax.random.key(1))
    np.testing.assert_allclose(a, u)
    hash(lin)  # static-argument friendly
    assert lin == GaussianPolicy(OBS, ACT, hidden=[], squash=False, state_dependent_std=False)
    with pytest.raises(ValueError):
        GaussianPolicy(OBS, ACT, init_std=1e-4)


def test_make_policy_sizes_from_task():
    task = make_env("point_mass")
    policy = make_policy(task, hidden=(8,))
    assert (policy.obs_size, policy.action_size) == (4, 2)
    assert policy.action_scale == task.action_scale
    assert policy.hidden == (8,)
