"""Tests for jaxnigt.cluster.timing."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.cluster import timing
from jaxnigt.cluster.timing import (
    make_time_model,
    parse_noise,
    profile_values,
    sample_compute_times,
)


def test_profiles_are_one_based():
    np.testing.assert_allclose(profile_values("equal", 4), [1, 1, 1, 1])
    np.testing.assert_allclose(profile_values("sqrt", 4), np.sqrt([1, 2, 3, 4]))
    np.testing.assert_allclose(profile_values("linear", 4), [1, 2, 3, 4])
    np.testing.assert_allclose(profile_values("decreasing", 4), np.sqrt([4, 3, 2, 1]))
    np.testing.assert_allclose(profile_values(2.5, 3), [2.5, 2.5, 2.5])
    np.testing.assert_allclose(profile_values("1,2.5,3", 3), [1, 2.5, 3])
    np.testing.assert_allclose(profile_values("0.5", 2), [0.5, 0.5])
    np.testing.assert_allclose(profile_values([1, 10], 2), [1, 10])
    np.testing.assert_allclose(profile_values("0,1", 2, name="kappa", allow_zero=True), [0, 1])


@pytest.mark.parametrize(
    "spec,n,kwargs,match",
    [
        ("fast", 3, {}, "unknown h profile 'fast'.*equal, sqrt, linear, decreasing"),
        ([1, 2], 3, {}, "2 values, expected n = 3"),
        ("1,2,3,4", 3, {}, "4 values"),
        ([1, 0, 2], 3, {}, "> 0"),
        (-1.0, 2, {}, "> 0"),
        ([1, -1], 2, {"name": "kappa", "allow_zero": True}, "kappa values must be >= 0"),
        ([1, float("nan")], 2, {}, "finite"),
        ("equal", 0, {}, "n must be"),
    ],
)
def test_profile_errors(spec, n, kwargs, match):
    with pytest.raises(ValueError, match=match):
        profile_values(spec, n, **kwargs)


def test_parse_noise():
    assert parse_noise("deterministic") == ("deterministic", ())
    assert parse_noise("exponential") == ("exponential", ())
    assert parse_noise("lognormal:0.5") == ("lognormal", (0.5,))
    assert parse_noise("uniform:0.5:1.5") == ("uniform", (0.5, 1.5))
    assert parse_noise("straggler:0.1:10") == ("straggler", (0.1, 10.0))


@pytest.mark.parametrize(
    "spec",
    [
        "gaussian",
        "lognormal",
        "lognormal:-1",
        "lognormal:x",
        "exponential:2",
        "uniform:2:1",
        "uniform:-1:1",
        "straggler:1.5:2",
        "straggler:0.1",
        "",
    ],
)
def test_parse_noise_errors(spec):
    with pytest.raises(ValueError, match=r"allowed|need|must"):
        parse_noise(spec)


def test_make_time_model_scaling_and_validation():
    tm = make_time_model(4, h="sqrt", kappa="linear", scale_by_dim=True, dim=16)
    chex.assert_shape([tm.h, tm.kappa], (4,))
    chex.assert_type([tm.h, tm.kappa, tm.noise_params], jnp.float32)
    np.testing.assert_allclose(tm.kappa, 2.0 * np.arange(1, 5), rtol=1e-6)
    assert tm.n == 4 and tm.noise == "deterministic"
    per_step = make_time_model(2, h=[0.5, 1.0], per_step=True, horizon=50)
    np.testing.assert_allclose(per_step.h, [25.0, 50.0])
    np.testing.assert_allclose(make_time_model(3).kappa, 0.0)
    np.testing.assert_allclose(make_time_model(2, noise="uniform:0.5:2").noise_params, [0.5, 2, 0])
    assert len(jax.tree.leaves(tm)) == 3  # noise kind is static
    with pytest.raises(ValueError, match="dim"):
        make_time_model(2, scale_by_dim=True)
    with pytest.raises(ValueError, match="horizon"):
        make_time_model(2, per_step=True)
    with pytest.raises(ValueError, match="noise"):
        make_time_model(2, noise="cauchy")


_sample = jax.jit(sample_compute_times, static_argnums=2)


@pytest.mark.parametrize(
    "noise,mean",
    [
        ("deterministic", 1.0),
        ("exponential", 1.0),
        ("lognormal:0.8", 1.0),
        ("uniform:0.5:2.5", 1.5),
        ("straggler:0.1:11", 2.0),  # literal reading: mean 1 + p (factor - 1)
    ],
)
def test_sample_compute_times_moments(noise, mean):
    tm = make_time_model(2, h=[1.0, 3.0], noise=noise)
    tau = _sample(tm, jax.random.key(0), 20_000)
    chex.assert_shape(tau, (2, 20_000))
    chex.assert_type(tau, jnp.float32)
    assert bool(jnp.all(tau > 0))
    np.testing.assert_allclose(jnp.mean(tau, axis=1), np.array([1.0, 3.0]) * mean, rtol=0.05)
    xi = np.asarray(tau[1] / 3.0)
    if noise.startswith("uniform"):
        assert xi.min() >= 0.5 - 1e-6 and xi.max() <= 2.5 + 1e-6
    if noise.startswith("straggler"):
        assert set(np.unique(np.round(xi, 5))) <= {1.0, 11.0}
        assert abs(np.mean(xi > 1) - 0.1) < 0.01


def test_sampling_is_keyed_traced_and_vmappable():
    tm = make_time_model(3, h="linear", noise="lognormal:0.3")
    k0, k1 = jax.random.key(0), jax.random.key(1)
    chex.assert_trees_all_equal(_sample(tm, k0, 5), _sample(tm, k0, 5))
    assert not np.allclose(_sample(tm, k0, 5), _sample(tm, k1, 5))
    traces = []

    @jax.jit
    def f(tm, key):
        traces.append(1)
        return sample_compute_times(tm, key, 4)

    f(tm, k0)
    f(make_time_model(3, h="sqrt", noise="lognormal:1.3"), k0)  # new values, same kind
    assert len(traces) == 1
    batched = jax.vmap(lambda k: sample_compute_times(tm, k, 4))(jax.random.split(k0, 6))
    chex.assert_shape(batched, (6, 3, 4))
    one = timing.sample_worker_compute_time(tm, k1, jnp.int32(2))
    chex.assert_rank(one, 0)
    np.testing.assert_allclose(one, 3.0 * timing.sample_noise(tm, k1, ()), rtol=1e-6)
