"""Tests for jaxnigt.cluster.timing (profiles, noise) and jaxnigt.cluster.model (the cluster
model's record, its builders and its draws)."""

from __future__ import annotations

import math

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
    assert parse_noise("pareto:1.5") == ("pareto", (1.5,))
    assert parse_noise("loglogistic:0.8") == ("loglogistic", (0.8,))


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
        "pareto",
        "pareto:0",
        "pareto:-1.5",
        "pareto:x",
        "pareto:nan",
        "pareto:inf",
        "pareto:1.5:2",
        "loglogistic:0",
        "loglogistic:-2",
        "loglogistic:two",
    ],
)
def test_parse_noise_errors(spec):
    with pytest.raises(ValueError, match=r"allowed|need|must"):
        parse_noise(spec)


@pytest.mark.parametrize(
    "spec,form,need",
    [("pareto:0", "pareto:ALPHA", "ALPHA > 0"), ("loglogistic:-1", "loglogistic:BETA", "BETA > 0")],
)
def test_a_bad_tail_index_is_a_config_error_naming_the_field_and_the_forms(spec, form, need):
    from jaxnigt import config as config_lib

    raw = {"env": {"name": "point_mass"}, "cluster": {"n": 2, "noise": spec}, "budget": 5.0}
    with pytest.raises(config_lib.ConfigError) as err:
        config_lib.from_dict(raw)
    message = str(err.value)
    assert message.startswith("cluster.noise: ") and "\n" not in message, message
    assert f"({form})" in message and need in message and "median" in message, message
    assert "allowed: " + " | ".join(timing.NOISE_FORMS) in message, message


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
        "pareto:ALPHA",
        "loglogistic:BETA",
    )
    assert timing.NOISE_TEXT.endswith("straggler:P:FACTOR, pareto:ALPHA or loglogistic:BETA")


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
        # heavy tails with a tail index high enough for a 4th moment (a sample mean that
        # converges like a normal one's: std of xi 0.20 and 0.32, so 5 % is > 20 SEs)
        ("pareto:6", 1.0),
        ("loglogistic:6", 1.0),
    ],
)
def test_sample_compute_times_moments(noise, mean):
    assert timing.noise_mean(noise) == pytest.approx(mean)
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


def _scale(kind: str, index: float) -> float:
    """The closed-form scale of the heavy tails (float64, independent of the draws' code):
    Pareto's minimum ``(a - 1) / a`` (mean 1) or ``2^(-1/a)`` (median 1); the log-logistic's
    median ``sin(b) / b``, ``b = pi / beta`` (mean 1) or 1."""
    if kind == "pareto":
        return (index - 1) / index if index > 1 else 2.0 ** (-1 / index)
    return math.sin(math.pi / index) / (math.pi / index) if index > 1 else 1.0


def _cdf(kind: str, index: float, x: np.ndarray) -> np.ndarray:
    """``P(xi <= x)``: Pareto I ``1 - (s / x)^a`` (``x >= s``); log-logistic
    ``1 / (1 + (x / s)^-beta)``."""
    s = _scale(kind, index)
    if kind == "pareto":
        return np.where(x >= s, 1 - (s / np.maximum(x, s)) ** index, 0.0)
    with np.errstate(divide="ignore"):
        return 1 / (1 + np.exp(-index * (np.log(x) - math.log(s))))


#: Draws per KS check and the DKW bound on the KS distance, ``P(D > eps) <= 2 exp(-2 N eps^2)``,
#: at a false-alarm rate of 1e-6 (the draws are fixed by the key, so the test is reproducible
#: either way; the bound says the tolerance is not tuned to them).  float32's grid of 2^-23 in
#: u moves the CDF by less than 1e-6.
N_KS = 40_000
EPS_KS = math.sqrt(math.log(2 / 1e-6) / (2 * N_KS))  # ~0.0135


@pytest.mark.parametrize(
    "kind,index",
    [("pareto", 0.5), ("pareto", 1.0), ("pareto", 1.5), ("pareto", 3.0),
     ("loglogistic", 0.8), ("loglogistic", 1.0), ("loglogistic", 2.5)],
)  # fmt: skip
def test_heavy_tails_follow_their_closed_form_cdf(kind, index):
    """The Kolmogorov–Smirnov distance of ``tau_i / h_i`` to the closed form is within the DKW
    bound for both workers; with a tail index > 1 the closed form's mean is 1 (so h_i is the
    mean time), with one <= 1 its median is 1 (h_i is the median time)."""
    h = np.array([0.5, 4.0])
    tm = make_cluster_model(2, h=h, noise=f"{kind}:{index}")
    tau = np.asarray(_sample(tm, jax.random.key(3), N_KS))
    chex.assert_shape(tau, (2, N_KS))
    chex.assert_tree_all_finite(tau)
    assert np.all(tau >= 0)
    for i in range(2):
        x = np.sort(tau[i].astype(np.float64) / h[i])
        f = _cdf(kind, index, x)
        ranks = np.arange(1, N_KS + 1) / N_KS
        distance = max(np.max(ranks - f), np.max(f - (ranks - 1 / N_KS)))
        assert distance < EPS_KS, (kind, index, i, distance)
        # the convention, read off the sample: P(tau <= h) is 1/2 where h is the median
        below = np.mean(tau[i] <= h[i])
        if index <= 1:
            assert abs(below - 0.5) < EPS_KS, below
        else:
            assert abs(below - _cdf(kind, index, np.array(1.0))) < EPS_KS, below
    if kind == "pareto":
        assert np.all(tau >= h[:, None] * _scale(kind, index) * (1 - 1e-6))  # s: the minimum


def test_the_closed_forms_scales_give_mean_or_median_one():
    """Pareto I mean ``a s / (a - 1)``; log-logistic mean ``s b / sin b`` (both for index > 1);
    medians ``s 2^(1/a)`` and ``s``: the parametrisation the docs state."""
    for a in (1.01, 1.5, 3.0, 10.0):
        assert a * _scale("pareto", a) / (a - 1) == pytest.approx(1.0)
        b = math.pi / a
        assert _scale("loglogistic", a) * b / math.sin(b) == pytest.approx(1.0)
    for a in (0.2, 0.5, 1.0):
        assert _scale("pareto", a) * 2 ** (1 / a) == pytest.approx(1.0)
        assert _scale("loglogistic", a) == 1.0
        assert _cdf("pareto", a, np.array(1.0)) == pytest.approx(0.5)
        assert _cdf("loglogistic", a, np.array(1.0)) == pytest.approx(0.5)
    means = {s: timing.noise_mean(s) for s in ("pareto:1.5", "loglogistic:2", "uniform:0.5:2.5")}
    assert means == {"pareto:1.5": 1.0, "loglogistic:2": 1.0, "uniform:0.5:2.5": 1.5}
    assert timing.noise_mean("pareto:1") == math.inf == timing.noise_mean("loglogistic:0.5")


@pytest.mark.parametrize("spec", ["pareto:0.05", "loglogistic:0.05", "pareto:1e-30"])
def test_a_tiny_tail_index_draws_finite_capped_times(spec):
    """A tail index far below 0.18 would draw past float32; the draws stay finite, capped at
    XI_MAX (a time past any budget), never NaN, and h is still the median."""
    tm = make_cluster_model(2, h=[1.0, 2.0], noise=spec)
    xi = np.asarray(model.sample_noise(tm, jax.random.key(0), (N_KS,)))
    chex.assert_tree_all_finite(xi)
    assert xi.min() >= 0 and xi.max() <= np.float32(timing.XI_MAX)
    assert np.mean(xi >= np.float32(timing.XI_MAX)) > 0  # the cap is reached
    if spec != "pareto:1e-30":  # (that one is 0 or XI_MAX: a coin flip either side of 1)
        assert abs(np.mean(xi <= 1.0) - 0.5) < EPS_KS


@pytest.mark.parametrize("kind", ["pareto", "loglogistic"])
def test_heavy_tails_are_keyed_traced_and_batched(kind):
    """One key, one draw; the tail index is traced (one compilation across ALPHA = 1, where
    the scale's convention switches), and a stacked batch of records (padded programs,
    sweeps) draws each record's own values."""
    specs = [f"{kind}:{a}" for a in (0.6, 1.0, 1.7, 4.0)]
    models = [make_cluster_model(3, h="linear", noise=s) for s in specs]
    k0, k1 = jax.random.key(0), jax.random.key(1)
    chex.assert_trees_all_equal(_sample(models[0], k0, 64), _sample(models[0], k0, 64))
    assert not np.allclose(_sample(models[0], k0, 64), _sample(models[0], k1, 64))
    traces = []

    @jax.jit
    def f(tm, key):
        traces.append(1)
        return sample_compute_times(tm, key, 64)

    jitted = [f(m, k0) for m in models]
    assert len(traces) == 1
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *models)
    batched = jax.vmap(lambda tm: sample_compute_times(tm, k0, 64))(stacked)
    chex.assert_shape(batched, (4, 3, 64))
    for j, m in enumerate(models):
        eager = sample_compute_times(m, k0, 64)
        chex.assert_trees_all_close(jitted[j], eager, rtol=1e-5)
        chex.assert_trees_all_close(batched[j], eager, rtol=1e-5)
    # the same uniforms under every tail index: a heavier tail is a monotone stretch of them
    xi = [np.asarray(model.sample_noise(m, k0, (256,))) for m in models]
    order = np.argsort(xi[0])
    for other in xi[1:]:
        assert np.all(np.diff(other[order]) >= 0)


@pytest.mark.parametrize("rule", ["rennala", "sync", "async"])
def test_jaxnigt_clock_with_a_pareto_noise(tmp_path, capsys, rule):
    """``jaxnigt clock --noise pareto:1.5`` (and an infinite-mean one) runs every kind of rule;
    a bad tail index is one line naming --noise."""
    from jaxnigt import cli

    out = tmp_path / "c.csv"
    base = ["clock", "--n", "4", "--M", "6", "--rounds", "5", "--seed", "2", "--h", "sqrt"]
    for noise in ("pareto:1.5", "loglogistic:0.9"):
        assert cli.main([*base, "--rule", rule, "--noise", noise, "--out", str(out)]) == 0
        stdout, err = capsys.readouterr()
        assert stdout.startswith(f"clock: rule={rule}"), (stdout, err)
        rows = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2)
        assert rows.shape[0] >= 1 and np.all(np.isfinite(rows))
    assert cli.main([*base, "--noise", "pareto:0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--noise" in err[0] and "ALPHA > 0" in err[0], err
