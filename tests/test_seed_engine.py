"""Tests for jaxnigt.algorithms.engines.seed_engine (``seed_rl``): the engine's steps follow the
per-step clock (a hand-computed case with updates mid-trajectory: lags over steps, times,
counts, messages, the kept versions), its options, and with instant exchanges, no inference
time and B = n it is IMPALA (every trajectory acts with one version)."""

import dataclasses

import jax
import numpy as np
import pytest
from tasks import match_setup

from jaxnigt import config as config_lib
from jaxnigt.algorithms.engines import seed_engine
from jaxnigt.run.trainer import build_trainer, make_trainer


def hand_trainer(versions: int = 8):
    """Two actors, H = 4, no exchange time, B = 1 (tests/test_step_clock.py's hand case):
    trajectories complete at 1 (actor 0), 2 (actor 0), 2.2 (actor 1, served with versions
    0, 1, 1, 2) and 3 (actor 0)."""
    setup = match_setup(h=[1.0, 2.2], kappa=[0.0, 0.0], M=1, link="shared")
    setup = dataclasses.replace(setup, task=dataclasses.replace(setup.task, horizon=4))
    hp = config_lib.HParams(learning_rate=0.01, M=1, seed_batch=1, seed_versions=versions)
    return build_trainer(setup, "seed_rl", hp)


def test_steps_follow_the_per_step_clock():
    tr = hand_trainer()
    final, m = jax.jit(lambda s: tr.run_chunk(s, 4))(tr.init(jax.random.key(0), tr.hyper()))
    np.testing.assert_allclose(m["sim_time"], [1.0, 2.0, 2.2, 3.0], rtol=1e-6)
    # the third update's trajectory lags 2, 1, 1, 0 versions over its steps
    np.testing.assert_allclose(m["staleness_min"], [0, 0, 0, 0])
    np.testing.assert_allclose(m["staleness_mean"], [0, 0, 1, 0])
    np.testing.assert_allclose(m["staleness_max"], [0, 0, 2, 0])
    np.testing.assert_array_equal(m["worker_counts"], [[1, 0], [1, 0], [0, 1], [1, 0]])
    # messages so far: the steps served by each completion (5, 11, 12, 17); no vectors
    np.testing.assert_array_equal(m["messages"], [5, 11, 12, 17])
    np.testing.assert_array_equal(m["comms"], 0)
    np.testing.assert_array_equal(m["grads"], 1)
    assert not np.any(m["overflow"]) and not np.any(m["nonfinite"])
    assert int(final.extra.version) == 4
    # the learner keeps its versions newest first: history[0] is the current parameters
    # (to rounding: XLA may compute the update once for each of its two uses)
    held = jax.tree.map(lambda h: h[0], final.extra.history)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-9), held,
                 final.params)  # fmt: skip


def test_a_step_older_than_the_kept_versions_stops_the_run():
    tr = hand_trainer(versions=2)  # the lag of 2 in the third update needs 3 versions
    _, m = jax.jit(lambda s: tr.run_chunk(s, 4))(tr.init(jax.random.key(0), tr.hyper()))
    np.testing.assert_array_equal(m["overflow"], [False, False, True, False])
    assert "seed_versions" in tr.algorithm.traits.overflow


def _config(algorithm, **hparams):
    return config_lib.from_dict({
        "env": {"name": "point_mass", "horizon": 6},
        "cluster": {"n": 3, "h": "equal", "kappa": 0.0},
        "algorithms": [algorithm], "seeds": 1, "budget": 100.0,
        "hparams": {"learning_rate": 0.01, "entropy_coef": 0.01, **hparams},
    })  # fmt: skip


def test_with_instant_exchanges_and_b_equal_n_it_is_impala():
    """Equal deterministic times, κ = 0, no inference or learner time, B = n: every actor's
    trajectory k is served wholly with version k and all complete together, as IMPALA's
    actors arrive together and receive the new parameters; the same keys give the same
    trajectories, V-trace weights and updates (to float32 rounding: the behaviour
    log-probabilities are computed in another batch shape). Against a synchronous A2C
    round the difference is the loss (on-policy V-trace, i.e. λ = 1 returns, not
    GAE(gae_lambda)) and the trajectories' keys (per worker and trajectory, not per round)."""
    runs = {}
    for name in ("seed_rl", "impala"):
        tr = make_trainer(_config(name), name)
        runs[name] = jax.jit(lambda s, tr=tr: tr.run_chunk(s, 3))(
            tr.init(jax.random.key(0), tr.hyper())
        )
    (seed_state, seed), (impala_state, impala) = runs["seed_rl"], runs["impala"]
    for k in ("env_steps", "grads", "staleness_max"):
        np.testing.assert_array_equal(seed[k], impala[k], err_msg=k)
    # a trajectory's time is H steps of h/H here, one h there
    np.testing.assert_allclose(seed["sim_time"], impala["sim_time"], rtol=1e-6)
    np.testing.assert_allclose(seed["train_return"], impala["train_return"], rtol=1e-5)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
        seed_state.params, impala_state.params,
    )  # fmt: skip
    assert np.all(seed["staleness_max"] == 0)
    np.testing.assert_array_equal(seed["messages"], [18, 36, 54])  # n · H per update
    np.testing.assert_array_equal(impala["comms"], [3, 6, 9])


def test_options_resolve_and_refuse_a_block_that_is_not_whole_batches():
    setup = match_setup(h=[1.0, 2.0, 3.0], kappa=[1.0, 2.0, 3.0], M=1)
    base = config_lib.HParams(M=1)
    opts = seed_engine.SeedOptions.resolve(setup, base)
    assert (opts.batch, opts.block, opts.versions) == (3, 3, 8)
    # unscaled κ: the step exchange costs κ_i
    np.testing.assert_array_equal(seed_engine.message_times(setup.cluster, opts), [1, 2, 3])
    hp = dataclasses.replace(base, seed_batch=2, async_block=6, seed_message_time=0.25)
    opts = seed_engine.SeedOptions.resolve(setup, hp)
    assert (opts.batch, opts.block, opts.message_time) == (2, 6, 0.25)
    np.testing.assert_array_equal(seed_engine.message_times(setup.cluster, opts), [0.25] * 3)
    with pytest.raises(ValueError, match=r"async_block \(5\) must be a multiple of .*seed_batch"):
        seed_engine.SeedOptions.resolve(setup, dataclasses.replace(hp, async_block=5))


def test_scaled_exchanges_cost_the_message_size_instead_of_the_parameter_count():
    cfg = _config("seed_rl")
    cfg = dataclasses.replace(
        cfg, cluster=dataclasses.replace(cfg.cluster, kappa=1.0, scale_by_dim=True)
    )
    tr = make_trainer(cfg, "seed_rl")
    d, o, a = tr.dim, tr.setup.policy.obs_size, tr.setup.policy.action_size
    np.testing.assert_allclose(np.asarray(tr.setup.cluster.kappa), d**0.25, rtol=1e-6)
    np.testing.assert_allclose(tr.setup.cluster.message, (o + a) ** 0.25, rtol=1e-6)
    opts = seed_engine.SeedOptions.resolve(tr.setup, tr.hparams)
    np.testing.assert_array_equal(
        seed_engine.message_times(tr.setup.cluster, opts), tr.setup.cluster.message
    )


def test_its_options_are_read_only_by_seed_rl():
    with pytest.raises(config_lib.ConfigError, match=r"hparams.seed_batch: .* read by seed_rl"):
        _config("impala", seed_batch=2)
    assert config_lib.readers("seed_versions") == ("seed_rl",)
