"""A user's rule and algorithm from one file outside the package (examples/my_rule.py),
loaded as a plugin (jaxnigt.plugins): the clock, a run under outages, a padded sweep.

The commands run in child processes: a plugin registers for the process that loads it, and
the other tests' processes must keep seeing the library's names alone."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxnigt import plugins

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my_rule.py"
ENV_EXAMPLE = ROOT / "examples" / "my_env.py"
CONFIG = """
name: half
algorithms: [half_nigt]
seeds: 2
budget: 30.0
env: {name: point_mass}
cluster: {n: 4, h: sqrt, kappa: 1.0, noise: exponential}
hparams: {M: 6, learning_rate: 0.05, eta: 0.3}
eval: {every: 4, episodes: 4}
"""


def _jaxnigt(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != plugins.ENV}
    return subprocess.run(
        [sys.executable, "-m", "jaxnigt.cli", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_the_example_is_one_short_file_outside_the_package():
    assert EXAMPLE.is_file() and len(EXAMPLE.read_text().splitlines()) <= 60
    assert "jaxnigt" not in EXAMPLE.parent.name


def test_the_clock_runs_the_plugins_rule_by_name(tmp_path):
    """Deterministic times h = (1, 1, 1, 8), M = 6: Rennala would wait for 6 gradients
    (t = 2); the half rule ends each round once 2 of the 4 workers have delivered, at t = 1,
    when workers 0-2 tie: 3 gradients, rounds ending at 1, 2, 3."""
    out = tmp_path / "half.csv"
    flags = ["--n", "4", "--h", "1,1,1,8", "--noise", "deterministic", "--M", "6"]
    done = _jaxnigt(
        "--plugin", str(EXAMPLE), "clock", *flags, "--rounds", "3", "--rule", "half",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open()))
    assert [float(r["t_end"]) for r in rows] == [1.0, 2.0, 3.0]
    assert [(r["b_0"], r["b_1"], r["b_2"], r["b_3"]) for r in rows] == [("1", "1", "1", "0")] * 3
    missing = _jaxnigt("clock", *flags, "--rule", "half")  # without the plugin: not a rule
    assert missing.returncode == 2 and "--rule: got 'half'" in missing.stderr


def test_a_run_of_the_plugins_algorithm_under_outages_from_a_configs_plugins_key(tmp_path):
    cfg = tmp_path / "half.yaml"
    # the config names its plugin relative to itself, as it would a power trace
    rel = os.path.relpath(EXAMPLE, tmp_path)
    cfg.write_text(f"plugins: [{rel}]\n" + CONFIG.replace("noise: exponential", "noise: "
                   'exponential, power: "outages:5:2"'))  # fmt: skip
    done = _jaxnigt("run", str(cfg), "--out", str(tmp_path / "run"), "--no-progress")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "half_nigt" in json.dumps(summary)
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    assert {r["algorithm"] for r in rows} == {"half_nigt"} and len(rows) > 4


def test_a_sweep_over_n_of_the_plugins_algorithm_is_one_padded_program(tmp_path):
    cfg = tmp_path / "half.yaml"
    cfg.write_text(CONFIG)
    done = _jaxnigt(
        "--plugin", str(EXAMPLE), "sweep", str(cfg), "--over", "cluster.n=4,8",
        "--out", str(tmp_path / "sweep"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 points in 1 program (half_nigt 1)" in done.stdout + done.stderr
    assert (tmp_path / "sweep" / "sweep.csv").is_file()


def test_a_run_trains_on_the_plugins_environment(tmp_path):
    """examples/my_env.py registers `line_goal` (reward −|g − x| a step, 20 steps); Sync NIGT
    on it moves the evaluation return up from its start."""
    cfg = tmp_path / "line.yaml"
    cfg.write_text(
        CONFIG.replace("point_mass", "line_goal").replace("[half_nigt]", "[sync_nigt]")
        .replace("budget: 30.0", "budget: 60.0")
    )  # fmt: skip
    done = _jaxnigt("--plugin", str(ENV_EXAMPLE), "run", str(cfg), "--out", str(tmp_path / "r"),
                    "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [r for r in csv.DictReader((tmp_path / "r" / "metrics.csv").open()) if r["eval_return"]]
    for seed in ("0", "1"):
        ret = [float(r["eval_return"]) for r in rows if r["seed"] == seed]
        assert all(-40.0 <= v <= 0.0 for v in ret), ret  # within the task's bounds
        assert ret[-1] > ret[0], ret
    missing = _jaxnigt("run", str(cfg), "--out", str(tmp_path / "never"))
    assert missing.returncode == 2 and "line_goal" in missing.stderr


def test_a_plugin_that_is_missing_or_fails_is_one_line(tmp_path, monkeypatch):
    with pytest.raises(plugins.PluginError, match="not found: no such file"):
        plugins.load([str(tmp_path / "nosuch.py")])
    with pytest.raises(plugins.PluginError, match="'no_such_module_here' not found"):
        plugins.load(["no_such_module_here"])
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(plugins.PluginError, match="failed while loading: RuntimeError: boom"):
        plugins.load([str(bad)])
    monkeypatch.delenv(plugins.ENV, raising=False)
    good = tmp_path / "good.py"
    good.write_text("LOADED = True\n")
    (mod,) = plugins.load([str(good)])
    assert mod.LOADED and plugins.load([str(good)])[0] is mod  # once a process
    assert str(good.resolve()) in os.environ[plugins.ENV]  # children load it too
