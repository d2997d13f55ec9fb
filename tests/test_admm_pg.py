"""Tests for jaxnigt.algorithms.admm_pg: hand-computed ADMM steps, sync-PG limit, CLI."""

import csv
import dataclasses
import functools
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tasks import match_setup

from jaxnigt import cli
from jaxnigt import config as config_lib
from jaxnigt.algorithms.admm_pg import (
    AdmmOptions,
    consensus_residual,
    consensus_update,
    lagrangian_ascent,
)
from jaxnigt.rl.collect import slot_keys
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.rollout import rollout
from jaxnigt.run.trainer import build_trainer, make_trainer

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


# --- the consensus and dual updates on known quadratics ----------------------------------


def test_consensus_update_hand_computed():
    # z = mean(θ + λ/ρ) = mean(1 + 0.25, 3 − 0.25) = 2; λ' = λ + ρ(θ − z) = (−1.5, 1.5).
    theta = {"w": jnp.array([[1.0], [3.0]])}
    lam = {"w": jnp.array([[0.5], [-0.5]])}
    z, lam_new = consensus_update(theta, lam, 2.0)
    chex.assert_trees_all_close(z, {"w": jnp.array([2.0])})
    chex.assert_trees_all_close(lam_new, {"w": jnp.array([[-1.5], [1.5]])})
    # The named-axis form (one worker per vmap lane, pmean as the AllReduce) agrees.
    per_worker = functools.partial(consensus_update, rho=2.0, axis_name="worker")
    z_w, lam_w = jax.vmap(per_worker, axis_name="worker")(theta, lam)
    chex.assert_trees_all_close(z_w, {"w": jnp.array([[2.0], [2.0]])})
    chex.assert_trees_all_close(lam_w, lam_new)


def _quadratic_round(theta, lam, z, a, c, *, alpha, rho, local_steps):
    """One ADMM round on J_i(θ) = −a_i (θ − c_i)² / 2 with exact gradients g_i = −a_i (θ − c_i)."""
    for _ in range(local_steps):
        d = lagrangian_ascent(-a * (theta - c), theta, lam, z, rho)
        theta = theta + alpha * d
    z, lam = consensus_update(theta, lam, rho)
    return theta, lam, z


def _close(got, want, atol):
    chex.assert_trees_all_close(got, tuple(jnp.asarray(w, jnp.float32) for w in want), atol=atol)


def test_admm_rounds_on_quadratic_match_hand_computation_and_kkt_point():
    a, c = jnp.array([1.0, 3.0]), jnp.array([1.0, -1.0])
    theta, lam, z = jnp.zeros(2), jnp.zeros(2), jnp.zeros(())
    step = functools.partial(_quadratic_round, a=a, c=c, alpha=0.1, rho=2.0, local_steps=1)
    # Round 1: g = (1, −3); θ = (0.1, −0.3); z = −0.1; λ = 2 (θ − z) = (0.4, −0.4).
    theta, lam, z = step(theta, lam, z)
    _close((theta, lam, z), ([0.1, -0.3], [0.4, -0.4], -0.1), atol=1e-6)
    # Round 2: g = (0.9, −2.1); d = g − λ − ρ(θ − z) = (0.1, −1.3); θ = (0.11, −0.43);
    # z = mean(θ + λ/ρ) = mean(0.31, −0.63) = −0.16; λ = (0.4 + 2·0.27, −0.4 − 2·0.27).
    theta, lam, z = step(theta, lam, z)
    _close((theta, lam, z), ([0.11, -0.43], [0.94, -0.94], -0.16), atol=1e-6)
    # Σ_i λ_i stays 0, so z = mean θ.
    np.testing.assert_allclose(float(jnp.sum(lam)), 0.0, atol=1e-6)
    np.testing.assert_allclose(float(z), float(jnp.mean(theta)), atol=1e-6)
    # The fixed point is the KKT point of max Σ J_i s.t. θ_i = z:
    # z* = Σ a_i c_i / Σ a_i = −0.5, θ_i* = z*, λ_i* = ∇J_i(z*) = −a_i (z* − c_i) = (1.5, −1.5).
    run = jax.jit(lambda t, lm, zz: jax.lax.fori_loop(0, 300, lambda _, s: step(*s), (t, lm, zz)))
    theta, lam, z = run(theta, lam, z)
    _close((theta, lam, z), ([-0.5, -0.5], [1.5, -1.5], -0.5), atol=1e-4)


# --- one round with θ_i = z, λ_i = 0 equals a synchronous PG step ------------------------


def _point_mass_config(**admm):
    hp = {"learning_rate": 1e-3, "M": 6, "gamma": 0.99}
    return config_lib.from_dict(
        {
            # endings drawn at reset (tests/tasks.py): ADMM's and sync_pg's rollouts are
            # different programs, equal to float32 rounding, and rounding cannot end an episode
            "env": {"name": "timed_point_mass", "heterogeneous": "sign_flip"},
            "cluster": {"n": 3, "h": "sqrt", "kappa": 1.0},
            "algorithms": ["admm_pg", "sync_pg"],
            "hparams": hp,
            "per_algorithm": {
                "sync_pg": {"per_worker_batch": 2},
                "admm_pg": {"admm_local_batch": 2, **admm},
            },
            "budget": 100.0,
        }
    )


def test_first_round_equals_sync_pg_step_for_any_rho():
    """With θ_i = z and λ_i = 0 (the initial state) and K = 1 local step:

    * local step: θ_i' = z + α (g_i(z) − λ_i − ρ (θ_i − z)) = z + α g_i(z), where
      g_i(z) = (1/B) Σ_b g_H(τ_{i,b}, z) over worker i's B trajectories at z;
    * consensus: z' = mean_i(θ_i' + λ_i/ρ) = z + α · mean_i g_i(z) = z + α · (1/(nB)) Σ_{i,b} g_H;
    * dual: λ_i' = ρ (θ_i' − z') = ρ α (g_i(z) − mean_j g_j(z)).

    z' is exactly ``sync_pg``'s step θ + α g with per-worker batch b = B on the same
    trajectories: ADMM's trajectory (i, b) of local step 0 has the sync schedule's key of
    worker i's b-th gradient. ρ drops out of z', so the relation holds as ρ → ∞ (checked at
    ρ = 1e4) and at small ρ alike; ρ is traced, so both share one compiled step.
    """
    cfg = _point_mass_config(admm_rho=1.0, admm_local_steps=1)
    admm, sync = make_trainer(cfg, "admm_pg"), make_trainer(cfg, "sync_pg")
    key = jax.random.key(7)
    s_sync, m_sync = jax.jit(sync.step)(sync.init(key, sync.hyper()))
    step = jax.jit(chex.assert_max_traces(lambda s: admm.step(s), n=1))
    setup, n, B, alpha = admm.setup, 3, 2, 1e-3
    for rho in (1e4, 0.1):
        state0 = admm.init(key, {**admm.hyper(), "rho": jnp.float32(rho)})
        z0 = state0.params
        state, metrics = step(state0)
        assert type(metrics) is type(m_sync)
        # z' equals sync_pg's update from the same x_0 and key.
        chex.assert_trees_all_close(state.params, s_sync.params, rtol=1e-5, atol=1e-6)
        for k in ("sim_time", "round_time", "env_steps", "comms", "grads"):
            np.testing.assert_array_equal(getattr(metrics, k), getattr(m_sync, k), err_msg=k)
        # a mean of 6 returns, each a sum of <= 30 rewards: a few float32 ulps apart
        np.testing.assert_allclose(metrics.train_return, m_sync.train_return, rtol=1e-5)
        # θ_i' = z + α g_i(z) with g_i rolled out by hand from worker i's slot keys.
        _, _, k_roll = jax.random.split(state0.key, 3)
        for i in range(n):
            keys = slot_keys(k_roll, jnp.full((B,), i, jnp.int32), jnp.arange(B, dtype=jnp.int32))
            types = jnp.full((B,), setup.cluster.worker_types[i], jnp.int32)
            traj = rollout(setup.task, setup.policy, z0, keys, types)
            g_i, _ = policy_gradient(setup.policy, z0, traj, jnp.full((B,), 1.0 / B), 0.99)
            theta_i = jax.tree.map(lambda t, i=i: t[i], state.extra.theta)
            want = jax.tree.map(lambda p, g: p + alpha * g, z0, g_i)
            chex.assert_trees_all_close(theta_i, want, rtol=1e-5, atol=1e-6)
        # λ_i' = ρ (θ_i' − z').
        want_lam = jax.tree.map(lambda t, c: rho * (t - c), state.extra.theta, state.params)
        chex.assert_trees_all_close(state.extra.lam, want_lam, rtol=1e-5, atol=1e-6 * rho)
        np.testing.assert_array_equal(metrics.counts_min, B)
        np.testing.assert_array_equal(metrics.counts_max, B)
        assert np.isnan(metrics.staleness_mean) and not metrics.nonfinite
        np.testing.assert_allclose(state.hyper["rho"], rho)


# --- heterogeneous one-step task: consensus is reached on the average objective ----------


def _match_setup():
    return match_setup(h=[1.0, 10.0], kappa=0.5, M=16)


def test_consensus_residual_decreases_on_heterogeneous_task():
    # Gain k: type 0's objective −(k − 1)² − σ² wants k = 1, type 1's wants k = −1; the
    # consensus optimum is k = 0 with λ_i = ∇_k J_i(0) = ±2. Workers start 1 apart from z.
    hp = config_lib.HParams(
        learning_rate=0.05, M=16, gamma=1.0, admm_rho=10.0, admm_local_steps=2, admm_local_batch=32
    )
    tr = build_trainer(_match_setup(), "admm_pg", hp)
    seeds = 3
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(2), s))(jnp.arange(seeds))
    state = jax.vmap(tr.init)(keys, tr.hyper(batch=seeds))
    apart = lambda t: t + jnp.array([1.0, -1.0]).reshape((1, 2) + (1,) * (t.ndim - 2))
    state = state._replace(extra=state.extra._replace(theta=jax.tree.map(apart, state.extra.theta)))

    def body(s, _):
        s, m = tr.step(s)
        return s, (consensus_residual(s.extra.theta, s.params), s.params, s.extra.lam, m)

    run = jax.jit(jax.vmap(lambda s: jax.lax.scan(body, s, None, length=40)))
    start = jax.vmap(consensus_residual)(state.extra.theta, state.params)
    _, (res, z, lam, metrics) = run(state)
    res = np.asarray(res)  # [seeds, rounds, n]
    np.testing.assert_allclose(start, np.sqrt(3.0), rtol=1e-6)  # 3 parameters, each ±1
    late = res[:, -20:].mean()
    assert late < 0.15 * float(start.mean()), res.mean(axis=(0, 2))
    assert res[:, -20:].mean() < res[:, :3].mean()
    gain = np.asarray(z["params"]["mean"]["kernel"])[:, -20:].mean()
    assert abs(gain) < 0.25, gain
    lam_gain = np.asarray(lam["params"]["mean"]["kernel"])[:, -20:].mean(axis=(0, 1)).ravel()
    np.testing.assert_allclose(lam_gain, [2.0, -2.0], atol=0.8)
    assert not np.any(metrics.nonfinite)
    np.testing.assert_array_equal(metrics.counts_mean, 2 * 32)
    # Per round: max_i(K·B·h_i) + max_i κ_i = 64·10 + 0.5.
    np.testing.assert_allclose(metrics.round_time, 640.5, rtol=1e-6)
    np.testing.assert_array_equal(metrics.comms[:, -1], 40)


# --- config ---------------------------------------------------------------------------------


def test_config_defaults_and_validation():
    cfg = config_lib.from_dict({"algorithms": ["admm_pg"], "cluster": {"n": 3}})
    hp = cfg.hparams_for("admm_pg")
    assert (hp.admm_rho, hp.admm_local_steps, hp.admm_local_batch) == (1.0, 1, 1)
    opts = AdmmOptions.resolve(_match_setup(), hp)
    assert (opts.rho, opts.local_steps, opts.local_batch) == (1.0, 1, 1)
    matched = dataclasses.replace(hp, admm_local_batch="match_M")  # M = 16, n = 2 → B = 8
    assert AdmmOptions.resolve(_match_setup(), matched).local_batch == 8
    bad = {"admm_rho": 0.0, "admm_local_steps": 0, "admm_local_batch": 0}
    for name, value in bad.items():
        with pytest.raises(config_lib.ConfigError, match=rf"per_algorithm\.admm_pg\.{name}"):
            config_lib.from_dict({"per_algorithm": {"admm_pg": {name: value}}})


# --- end to end through the CLI --------------------------------------------------------------


def test_cli_runs_demo_with_admm_pg(tmp_path):
    out = tmp_path / "run"
    argv = ["run", str(CONFIGS / "demo.yaml"), "--set", "algorithms=[admm_pg]"]
    argv += ["--set", "env.name=point_mass", "--set", "budget=150", "--set", "seeds=2"]
    argv += ["--set", "cluster.n=10", "--set", "eval.every_time=null"]
    admm = "{learning_rate: 0.0001, admm_rho: 1000.0, admm_local_steps: 2, admm_local_batch: 2}"
    argv += ["--set", f"per_algorithm={{admm_pg: {admm}}}"]
    assert cli.main([*argv, "--out", str(out), "--no-progress"]) == 0
    with open(out / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["seed"] == "0"]
    assert {r["algorithm"] for r in rows} == {"admm_pg"}
    trained = [r for r in rows if int(r["round"]) > 0]
    assert trained
    hp = config_lib.load(out / "config.yaml").hparams_for("admm_pg")
    per_worker = hp.admm_local_steps * hp.admm_local_batch
    for r in trained:
        assert float(r["comms"]) == int(r["round"])  # one AllReduce per round
        assert float(r["counts_min"]) == float(r["counts_max"]) == per_worker
        assert float(r["grads"]) == 10 * per_worker
        assert r["staleness_mean"] in ("", "nan")
    assert (out / "summary.json").is_file()
