"""Tests for jaxnigt.cluster.timing (profiles, noise) and jaxnigt.cluster.model (the cluster
model's record, its builders and its draws)."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.cluster import model, timing
from jaxnigt.cluster.model import make_cluster_model, sample_compute_times
from jaxnigt.cluster.timing import parse_noise, profile_values


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


def test_make_cluster_model_scaling_and_validation():
    tm = make_cluster_model(4, h="sqrt", kappa="linear", scale_by_dim=True, dim=16)
    chex.assert_shape([tm.h, tm.kappa, tm.message, tm.worker_types], (4,))
    chex.assert_type([tm.h, tm.kappa, tm.message, tm.noise_params], jnp.float32)
    chex.assert_type(tm.worker_types, jnp.int32)
    np.testing.assert_allclose(tm.kappa, 2.0 * np.arange(1, 5), rtol=1e-6)
    np.testing.assert_array_equal(tm.message, tm.kappa)  # a step message costs a vector's
    assert tm.n == 4 and tm.noise == "deterministic"
    assert (tm.inflight, tm.link, tm.allreduce) == ("cancel", "shared", "all")
    per_step = make_cluster_model(2, h=[0.5, 1.0], per_step=True, horizon=50)
    np.testing.assert_allclose(per_step.h, [25.0, 50.0])
    np.testing.assert_allclose(make_cluster_model(3).kappa, 0.0)
    uniform = make_cluster_model(2, noise="uniform:0.5:2")
    np.testing.assert_allclose(uniform.noise_params, [0.5, 2, 0])
    # every per-worker array and the noise's parameters are data; the choices are static
    assert len(jax.tree.leaves(tm)) == 5
    with pytest.raises(ValueError, match="dim"):
        make_cluster_model(2, scale_by_dim=True)
    with pytest.raises(ValueError, match="horizon"):
        make_cluster_model(2, per_step=True)
    with pytest.raises(ValueError, match="noise"):
        make_cluster_model(2, noise="cauchy")


def test_the_named_choices_are_static_fields_checked_on_construction():
    discard = make_cluster_model(3, inflight="discard", link="independent")
    assert (discard.inflight, discard.link, discard.allreduce) == ("discard", "independent", "all")
    leaves, tree = jax.tree.flatten(discard)
    assert tree != jax.tree.structure(make_cluster_model(3))  # another program
    assert jax.tree.unflatten(tree, leaves).inflight == "discard"
    for choice in model.CHOICES:
        assert choice.default == choice.values[0]
        assert getattr(make_cluster_model(2), choice.name) == choice.default
        with pytest.raises(ValueError, match=rf"{choice.name}: got 'x'; expected one of"):
            make_cluster_model(2, **{choice.name: "x"})
    with pytest.raises(TypeError):
        make_cluster_model(2, inflights="cancel")


def test_message_times_scale_with_the_message_size_instead_of_d():
    """κ_i d^{1/4} for a vector; a step message of size o + a costs κ_i (o + a)^{1/4}."""
    scaled = make_cluster_model(2, kappa=[1.0, 2.0], scale_by_dim=True, dim=81, message_size=16)
    np.testing.assert_allclose(scaled.kappa, [3.0, 6.0], rtol=1e-6)
    np.testing.assert_allclose(scaled.message, [2.0, 4.0], rtol=1e-6)
    unscaled = make_cluster_model(2, kappa=[1.0, 2.0], message_size=16)
    np.testing.assert_array_equal(unscaled.message, unscaled.kappa)
    given = make_cluster_model(2, kappa=1.0, message="0.5,0.25")
    np.testing.assert_allclose(given.message, [0.5, 0.25])


def test_from_config_reads_every_key_and_choice():
    from jaxnigt.config import schema

    section = schema.ClusterConfig(
        n=3, h="linear", kappa=0.5, inflight="discard", link="independent"
    )
    built = model.from_config(section, worker_types=np.array([0, 1, 0]))
    np.testing.assert_allclose(built.h, [1, 2, 3])
    np.testing.assert_array_equal(built.worker_types, [0, 1, 0])
    assert (built.inflight, built.link, built.allreduce) == ("discard", "independent", "all")


def test_noise_kinds_are_one_table():
    assert timing.NOISES == tuple(timing.NOISE_KINDS)
    assert timing.NOISE_FORMS == (
        "deterministic",
        "exponential",
        "lognormal:SIGMA",
        "uniform:LOW:HIGH",
        "straggler:P:FACTOR",
    )
    assert timing.NOISE_TEXT.endswith("uniform:LOW:HIGH or straggler:P:FACTOR")


def test_a_profile_name_or_number_is_checked_without_its_n_values(monkeypatch):
    real = timing.profile_values

    def small(spec, n, **kw):
        assert n <= 10, n
        return real(spec, n, **kw)

    monkeypatch.setattr(timing, "profile_values", small)
    for spec in ("sqrt", 0.5, "0.5", " 2 "):
        timing.check_profile(spec, 10**9)
    with pytest.raises(ValueError, match="must be > 0"):
        timing.check_profile("-1", 10**9)
    with pytest.raises(ValueError, match="unknown h profile"):
        timing.check_profile("fast", 10**9)


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
    tm = make_cluster_model(2, h=[1.0, 3.0], noise=noise)
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
    tm = make_cluster_model(3, h="linear", noise="lognormal:0.3")
    k0, k1 = jax.random.key(0), jax.random.key(1)
    chex.assert_trees_all_equal(_sample(tm, k0, 5), _sample(tm, k0, 5))
    assert not np.allclose(_sample(tm, k0, 5), _sample(tm, k1, 5))
    traces = []

    @jax.jit
    def f(tm, key):
        traces.append(1)
        return sample_compute_times(tm, key, 4)

    f(tm, k0)
    f(make_cluster_model(3, h="sqrt", noise="lognormal:1.3"), k0)  # new values, same kind
    assert len(traces) == 1
    batched = jax.vmap(lambda k: sample_compute_times(tm, k, 4))(jax.random.split(k0, 6))
    chex.assert_shape(batched, (6, 3, 4))
    one = model.sample_worker_compute_time(tm, k1, jnp.int32(2))
    chex.assert_rank(one, 0)
    np.testing.assert_allclose(one, 3.0 * model.sample_noise(tm, k1, ()), rtol=1e-6)
