"""The offline GPU node's scripts (scripts/gpu/): the wheel list and run.sh's refusals.

Cheap checks only: scripts/test_site_jax.sh (in .ci/run) runs the whole path, with a fresh
Python 3.12 venv, the fetched wheels and run.sh's tiny CPU mode.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "scripts" / "gpu"


def _names(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines()]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_wheel_list_pins_one_version_of_each_and_nothing_the_node_has():
    specs = [s for s in _names(GPU / "wheels.txt") if s]
    assert specs
    pinned = dict(re.fullmatch(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9.]+)", s).groups() for s in specs)
    assert len(pinned) == len(specs), "a distribution is listed twice"
    names = {_norm(n) for n in pinned}
    node = {_norm(n) for n in _names(GPU / "node_site.txt") if n}
    assert not names & node, names & node
    assert {"mujoco", "mujoco-core", "mujoco-mjx", "brax", "rlax"} <= names
    assert pinned["mujoco"] == pinned["mujoco-core"]  # mujoco 4 requires the same core
    assert not names & {"mujoco-studio", "glfw", "pyopengl"}  # not imported by any run


def _run_sh(*args, **env):
    return subprocess.run(
        ["bash", str(GPU / "run.sh"), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_sh_needs_an_out_dir_and_the_wheels(tmp_path):
    proc = _run_sh()
    assert proc.returncode == 2 and "usage" in proc.stderr
    assert _run_sh("--bogus", str(tmp_path)).returncode == 2
    empty = tmp_path / "whl"
    empty.mkdir()
    proc = _run_sh(str(tmp_path / "out"), JAXNIGT_WHEELS=str(empty))
    assert proc.returncode == 1 and "fetch_wheels.sh" in proc.stdout
    assert (tmp_path / "out" / "run.log").read_text().count("no wheels") == 1


def _results_sh(out, seconds, *args):
    env = {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    env.pop("JAXNIGT_BENCH_JSON", None)
    return subprocess.run(
        ["bash", str(GPU / "results.sh"), str(out), str(seconds), *args],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_results_sh_tiny_runs_the_third_edition_pipeline_sized_by_the_time(tmp_path):
    """The paper-size results hook in its tiny CPU mode: sizes the budget from the time by its
    documented rule, tunes, runs and compares, and says so in its manifest."""
    assert _results_sh(tmp_path, 90, "--bogus").returncode == 2
    proc = _results_sh(tmp_path / "r", 90, "--cpu-tiny")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    ((name, sc),) = manifest["scenarios"].items()
    dev = sc["device"]
    # the rule: at most the paper's budget; what is left of the share after compiling every
    # program, at the assumed rate, for the scenario's env steps per unit of simulated time
    share = 90 - 30  # one scenario; 30 s kept for the analysis
    free = (share - sc["programs"] * dev["compile_s"]) * dev["steps_per_s"]
    assert sc["budget"] <= min(sc["paper_budget"], free / sc["env_steps_per_time"]) + 1e-9
    assert sc["budget"] >= min(sc["paper_budget"], free / sc["env_steps_per_time"]) / 2
    assert sc["programs"] == 4  # two tuning programs (one M, one α grid each), two reports
    assert sc["enough"] and "analyze_s" in sc
    a = json.loads((tmp_path / "r" / "docs" / f"{name}.json").read_text())
    assert a["statistic"] == "time_to_80" and a["reference"] == "rennala_nigt"
    assert set(a["comparisons"]) == {"sync_nigt"} and a["budget"] == sc["budget"]
    assert a["sizing"]["budget"] == sc["budget"]
    assert (tmp_path / "r" / "docs" / f"{name}.png").stat().st_size > 0
    tuned = json.loads((tmp_path / "r" / "runs" / name / "tune" / "tuning.json").read_text())
    assert tuned["budget"] == sc["budget"] and tuned["tune_seeds"] == [100]
    # too little time: skipped, not shrunk further, and said so
    proc = _results_sh(tmp_path / "s", 40, "--cpu-tiny")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sc,) = json.loads((tmp_path / "s" / "manifest.json").read_text())["scenarios"].values()
    assert "skipped" in sc and not (tmp_path / "s" / "runs" / name / "tune").exists()
