"""MuJoCo Playground's dm_control suite as ``playground/<Name>`` (jaxnigt.envs.playground).

These run with the ``playground`` extra (``.ci/run`` installs it) and skip without it; the
message a config gets without the extra is tested in tests/test_config.py."""

import csv
import subprocess
import sys
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.envs import make_env, playground

pytestmark = pytest.mark.skipif(
    not playground.available(), reason=f"MuJoCo Playground is absent ({playground.EXTRA})"
)
ROOT = Path(__file__).resolve().parents[1]
NAMED = ("PointMass", "ReacherEasy", "CartpoleBalance", "HopperHop", "WalkerWalk", "HumanoidWalk")


def test_the_suite_is_playgrounds_with_its_episode_length():
    from mujoco_playground import dm_control_suite

    assert set(playground.SUITE) == set(dm_control_suite.ALL_ENVS)
    for name in NAMED:
        cfg = dm_control_suite.get_default_config(name)
        assert cfg.episode_length == playground.EPISODE_LENGTH, name
        assert cfg.get("action_repeat", 1) == 1, name


def test_a_suite_env_loads_with_mjx_in_jax_and_never_terminates():
    task = make_env("playground/PointMass")
    assert (task.obs_size, task.action_size, task.horizon) == (4, 2, 1000)
    assert not task.terminates and task.action_scale == 1.0
    assert task.env.mjx_model.impl.value == "jax"
    assert make_env("playground/PointMass", horizon=5).env is task.env  # one env: one compile
    tuned = make_env("playground/PointMass", solver_iterations=2, ls_iterations=3)
    assert (tuned.env.mjx_model.opt.iterations, tuned.env.mjx_model.opt.ls_iterations) == (2, 3)
    with pytest.raises(ValueError, match="unknown Playground environment 'playground/Pong'"):
        make_env("playground/Pong")
    state = jax.jit(task.env.reset)(jax.random.key(0))
    chex.assert_shape(state.obs, (4,))
    assert float(state.done) == 0.0


def test_a_run_with_physics_types_on_a_suite_env(tmp_path):
    """`jaxnigt run` on playground/CartpoleBalance (a dense reward) with two physics types
    (the second four times as heavy, a quarter of the friction): it trains, and the per-type
    evaluation columns differ (the same policy on two dynamics)."""
    cfg = tmp_path / "pm.yaml"
    cfg.write_text(
        "name: pm\nalgorithms: [sync_nigt]\nseeds: 1\nbudget: 12.0\n"
        "env: {name: playground/CartpoleBalance, horizon: 40,\n"
        "      physics: {mass: [1, 4], friction: [1, 0.25]}}\n"
        "cluster: {n: 2, h: 1.0, kappa: 0.0}\n"
        "hparams: {learning_rate: 0.01, eta: 0.1}\neval: {every: 4, episodes: 4}\n"
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "jaxnigt.cli", "run", str(cfg), "--out", str(tmp_path / "r"),
         "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [r for r in csv.DictReader((tmp_path / "r" / "metrics.csv").open()) if r["eval_return"]]
    assert len(rows) >= 2
    per_type = np.array([[float(r["eval_type0"]), float(r["eval_type1"])] for r in rows])
    assert np.all((per_type >= 0.0) & (per_type <= 40.0))  # dm_control rewards lie in [0, 1]
    assert np.any(np.abs(per_type[:, 0] - per_type[:, 1]) > 1e-3), per_type
    chex.assert_tree_all_finite(jnp.asarray(per_type))
