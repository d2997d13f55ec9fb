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


def _results_sh(*args):
    env = {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    env.pop("JAXNIGT_BENCH_JSON", None)
    return subprocess.run(
        ["bash", str(GPU / "results.sh"), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_results_sh_sizes_the_budget_from_the_time_and_skips_what_does_not_fit(tmp_path):
    """The paper-size results hook: its budget rule (the whole run of its tiny mode is
    scripts/test_site_jax.sh's, through run.sh), its refusals and its skip rule."""
    assert _results_sh(tmp_path, 90, "--bogus").returncode == 2
    assert _results_sh(tmp_path).returncode == 2  # no SECONDS_LEFT
    from paper import gpu as g

    (sc,) = g.scenarios(tiny=True)
    pipe = g.third.Pipeline(sc, tmp_path / "runs", tmp_path / "docs", grid=g.TINY_GRID)
    pipe.seeds = (100,)
    figures = {"steps_per_s": 1000.0, "compile_s": 2.0}
    # two tuning programs (Rennala at one M, Sync NIGT), then the two report runs
    assert [a for a, _ in g.programs(pipe)] == ["rennala_nigt", "sync_nigt"] * 2
    assert [runs for _, runs in g.programs(pipe)] == [2, 2, sc.seeds, sc.seeds]
    small = g.size(pipe, 20.0, figures)
    # (20 s - 4 programs x 2 s) x 1000 steps/s over the env steps per unit of time, rounded
    exact = (20.0 - 4 * 2.0) * 1000.0 / small["env_steps_per_time"]
    assert small["budget"] == g.sizing.round_down(exact) and small["budget"] < sc.look
    assert g.size(pipe, 1e6, figures)["budget"] == sc.look  # at most the paper's
    assert not g.size(pipe, 8.5, figures)["enough"]  # below 20 Rennala rounds
    # an algorithm's own measured rate: Sync NIGT's programs at a quarter of the rate
    slow = g.size(pipe, 20.0, {**figures, "per_algorithm": {"sync_nigt": 250.0}})
    assert slow["device_seconds_per_time"] > small["device_seconds_per_time"]
    assert slow["budget"] < small["budget"]
    # too little time: skipped, not shrunk further, and said so
    proc = _results_sh(tmp_path / "s", 40, "--cpu-tiny")
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    ((name, entry),) = manifest["scenarios"].items()
    assert "skipped" in entry and not entry["enough"], entry
    assert not (tmp_path / "s" / "runs" / name / "tune").exists()


def test_the_sizing_reads_each_algorithms_rate_from_the_benchmark(tmp_path, monkeypatch):
    from paper import gpu as g

    rows = [
        {"algorithm": "rollout+pg", "env": "humanoid", "rollout_batch": 4096,
         "alive_steps_per_s": 285126.0, "compile_s": 28.3, "lower_s": 9.6},
        {"algorithm": "rennala_nigt", "env": "humanoid", "seeds": 1, "rounds_per_s": 5.7,
         "alive_steps_per_s": 7403.0, "compile_s": 33.6, "lower_s": 5.0},
        {"algorithm": "rennala_nigt", "env": "humanoid", "seeds": 5, "rounds_per_s": 4.1,
         "alive_steps_per_s": 27758.0, "compile_s": 39.3, "lower_s": 5.0},
        {"algorithm": "afedpg", "env": "humanoid", "seeds": 5, "rounds_per_s": 2.3,
         "alive_steps_per_s": 3029.0, "compile_s": 36.5, "lower_s": 4.0},
        {"rollout_batch": 16384, "lanes": 1.0, "skipped": "deadline"},
    ]  # fmt: skip
    bench = tmp_path / "bench_gpu.json"
    bench.write_text(json.dumps({"results": {"gpu": {"rows": rows}}}))
    monkeypatch.setenv("JAXNIGT_BENCH_JSON", str(bench))
    f = g.device_figures("humanoid", None, None)
    assert f["steps_per_s"] == 285126.0 and f["compile_s"] == 2.0 * (39.3 + 5.0)
    assert f["per_algorithm"] == {"rennala_nigt": 27758.0, "afedpg": 3029.0}  # 5 seeds only
    assert g.device_figures("point_mass", None, None)["per_algorithm"] == {}


def test_gpu_benchmark_markdown_keeps_the_waves_table_with_its_own_columns():
    """bench_gpu.md is what docs/benchmarks.md quotes: the waves' ms per arrival must survive
    (the first H200 run's markdown had dropped them into the rounds table's columns)."""
    from benchmarks import gpu
    from benchmarks.common import to_markdown

    rows = [
        {"algorithm": "rennala_nigt", "env": "humanoid", "n": 100, "M": 50, "seeds": 5,
         "rounds": 2, "rounds_per_s": 4.077, "alive_steps_per_s": 27758.0, "compile_s": 39.3},
        {"algorithm": "afedpg (waves)", "env": "humanoid", "n": 100, "block": 100, "wave": 16,
         "ms_per_arrival": 16.355, "one_at_a_time_over_waves": 4.0995, "compile_s": 46.1,
         "met": True},
        {"algorithm": "afedpg waves", "n": 1000, "skipped": "deadline"},
    ]  # fmt: skip
    md = to_markdown(gpu.format_rows(rows))
    tables = md.split("\n\n")
    assert len(tables) == 2, md
    rounds, waves = (t.splitlines() for t in tables)
    assert rounds[1].startswith("|---|") and waves[1].startswith("|---|")
    assert "rounds/s" in rounds[0] and "4.077" in rounds[2] and "deadline" in rounds[3]
    assert "ms/arrival" in waves[0] and "16.36" in waves[2] and "4.10" in waves[2]
    assert len(rounds) == 4 and len(waves) == 3
    assert all(line.count("|") == rounds[0].count("|") for line in rounds)
    assert all(line.count("|") == waves[0].count("|") for line in waves)
