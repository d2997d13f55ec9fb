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

import pytest

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


def test_gpu_benchmark_measures_each_study_program_against_the_rollout(tmp_path):
    """``bench.py gpu --cpu-tiny``'s study rows (scripts/gpu/run.sh --cpu-tiny runs every row
    of it, scripts/test_site_jax.sh checks them; here the reference and the padded programs):
    each study program's row carries its `jaxnigt sweep` command, its sizes and its ratio to
    the rollout reference, in the JSON and in the Markdown."""
    out, md, log = tmp_path / "bench.json", tmp_path / "bench.md", tmp_path / "bench.log"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONWARNINGS": "ignore"}
    env["JAX_COMPILATION_CACHE_DIR"] = os.environ["JAXNIGT_TEST_CACHE"]  # the suite's
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    argv = [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--json", str(out)]
    argv += ["--markdown", str(md), "gpu", "--cpu-tiny", "--rows", "reference,study"]
    with open(log, "w") as f:
        rc = subprocess.run(argv, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=600)
    assert rc.returncode == 0, log.read_text()[-3000:]
    result = json.loads(out.read_text())
    assert "--cpu-tiny" in result["command"]
    reference, *studies = result["results"]["gpu"]["rows"]
    assert reference["reference"] and (reference["rollout_batch"], reference["lanes"]) == (8, 1.0)
    assert reference["env"] == "point_mass" and reference["horizon"] == 10
    assert [r["algorithm"] for r in studies] == ["rennala_nigt", "sync_nigt"]
    for r, axis in zip(studies, ("--over hparams.M=2,3", "--over cluster.n=2,3"), strict=True):
        assert r["study"] == "padded" and "skipped" not in r, r
        assert r["command"].startswith("jaxnigt sweep configs/reacher_n10.yaml --seeds 2")
        assert axis in r["command"]
        assert (r["points"], r["runs"], r["n_max"]) == (2, 4, 3)
        # every run rolls out the program's bounds: M_max (Rennala) or n_max (Sync) a step
        assert r["trajectories_per_step"] == 4 * 3
        assert r["alive_steps"] > 0 and r["chunk_steps"] > 0 and r["reps"] == 1
        assert {"prepare_s", "lower_s", "compile_s", "first_chunk_s", "wall_s"} <= set(r)
        ratio = r["alive_steps_per_s"] / reference["alive_steps_per_s"]
        assert r["over_rollout"] == pytest.approx(ratio)
        assert r["rollout"] == "rollout+pg point_mass batch 8"
    text = md.read_text()
    (table,) = [t for t in text.split("\n\n") if "trajectories/step" in t]
    lines = table.splitlines()
    assert "/ rollout" in lines[0] and len(lines) == 4  # header, rule, one row a program
    assert lines[2].startswith("| padded | rennala_nigt | point_mass | 2 | 4 | 3 | 12 |")
    for r in studies:
        assert text.count(f"Study: `{r['command']}`") == 1
        assert f"| {r['over_rollout']:.3f} |" in table


def test_study_rows_skip_what_would_run_past_the_deadline(monkeypatch):
    """The deadline logic, without compiling: a study program starts only when the last one's
    time fits in what is left, and the points one at a time only when the padded program's
    time for each of them does; what does not fit is a row saying so."""
    from benchmarks import gpu, gpu_args, gpu_study

    texts = [gpu_args.TINY[i + 1] for i, a in enumerate(gpu_args.TINY) if a == "--study"]
    studies = [gpu_study.load(t) for t in texts]
    measured = []

    def fake_row(study, prog, reps):
        measured.append(prog.algorithm)
        return {
            "study": "padded", "algorithm": prog.algorithm, "env": "point_mass", "runs": 4,
            "prepare_s": 1.0, "first_chunk_s": 5.0, "reps": reps, "wall_s": 1.0,
            "alive_steps": 10.0, "alive_steps_per_s": 10.0, "command": study.command,
        }  # fmt: skip

    monkeypatch.setattr(gpu_study, "padded_row", fake_row)
    # left(): Rennala's program starts, Sync's (7 s, as long as Rennala's took) does not, nor
    # do Rennala's two points one at a time (7 s each)
    clock = iter([30.0, 6.5, 10.0])
    rows = []
    gpu._studies(studies, 8, 1, rows, lambda: next(clock), ("study", "per-point"))
    assert measured == ["rennala_nigt"]
    rennala, sync, rennala_points, sync_points = rows
    assert sync["skipped"] == "deadline (about 7 s, 6 s left)"
    assert sync["command"] == studies[1].command
    assert rennala_points["study"] == sync_points["study"] == "point by point"
    assert rennala_points["skipped"] == "deadline: about 14 s for 2 programs, 10 s left"
    assert sync_points["skipped"] == "deadline (no padded row to compare)"
    assert not any("over_rollout" in r for r in rows)  # no reference measured
    # the sum of the points, and the padded program's ratios to it
    points = [rennala | {"alive_steps": 4.0, "wall_s": 1.0, "lower_s": 1.0, "compile_s": 2.0,
                         "n_max": 3, "M_max": m, "trajectories_per_step": 3.0 * m}
              for m in (2, 3)]  # fmt: skip
    padded = rennala | {"alive_steps": 8.0, "alive_steps_per_s": 8.0, "lower_s": 1.0,
                        "compile_s": 2.0}  # fmt: skip
    total = gpu_study.summary(points, padded)
    assert total["alive_steps_per_s"] == 4.0 and total["same_alive_steps"]
    assert total["padded_rate_over_point_by_point"] == 2.0
    assert total["padded_compile_over_point_by_point"] == 0.5
    assert total["padded_first_chunk_over_point_by_point"] == 0.5
