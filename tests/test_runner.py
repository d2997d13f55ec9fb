"""Tests for jaxnigt.runner: summaries, atomic writes, run-directory safety, health checks."""

import numpy as np
import pytest

from jaxnigt import runner


def _rows():
    rows = []
    # Two seeds; eval at t = 0, 10, 20 with returns rising; seed 1 reaches 5 later.
    for seed, values in ((0, [0.0, 5.0, 6.0]), (1, [1.0, 2.0, 5.0])):
        for t, v in zip((0.0, 10.0, 20.0), values, strict=True):
            rows.append(
                {
                    "algorithm": "a",
                    "grid": 0,
                    "seed": seed,
                    "sim_time": f"{t}",
                    "eval_return": f"{v}",
                    "learning_rate": 0.1,
                    "eta": 0.5,
                }
            )
    return rows


def test_summarize_final_best_and_time_to_target():
    s = runner.summarize(_rows(), target=5.0)["a"]
    assert s["seeds"] == 2
    assert s["final_median_return"] == pytest.approx(5.5)
    # median curve: t=0 -> 0.5, t=10 -> 3.5, t=20 -> 5.5
    assert s["best_median_return"] == pytest.approx(5.5)
    assert s["time_to_target"] == pytest.approx(20.0)
    assert runner.summarize(_rows(), target=100.0)["a"]["time_to_target"] is None


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "x.txt"
    runner.atomic_write_text(p, "one")
    runner.atomic_write_text(p, "two")
    assert p.read_text() == "two"
    import os
    import stat

    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    assert [f.name for f in tmp_path.iterdir()] == ["x.txt"]


def test_prepare_run_dir(tmp_path):
    out = tmp_path / "run"
    runner.prepare_run_dir(out, overwrite=False)
    (out / "metrics.csv").write_text("x")
    with pytest.raises(FileExistsError, match="--overwrite"):
        runner.prepare_run_dir(out, overwrite=False)
    runner.prepare_run_dir(out, overwrite=True)


def test_health_check_names_algorithm_seed_and_round():
    last = {
        "nonfinite": np.array([[False, False], [False, True]]),
        "overflow": np.zeros((2, 2), bool),
        "active": np.ones((2, 2), bool),
        "round": np.array([[3, 4], [3, 4]]),
        "sim_time": np.zeros((2, 2)),
    }
    points = [{"learning_rate": 0.1, "eta": 0.5}]
    with pytest.raises(runner.RunError, match=r"afedpg: non-finite .* round 4, seed 1"):
        runner._check_health(last, "afedpg", points, num_seeds=2)
    # on_nonfinite: mark -> the flags come back instead of an error.
    np.testing.assert_array_equal(
        runner._check_health(last, "afedpg", points, num_seeds=2, raise_=False), [False, True]
    )
    last["active"][1, 1] = False  # a no-op step after the budget does not count
    assert not runner._check_health(last, "afedpg", points, num_seeds=2).any()
