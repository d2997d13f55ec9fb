"""Tests for jaxnigt.run.executors: the local pool and the Ray backend behind one interface;
a sweep on a real two-node Ray cluster (on 127.0.0.1) gives the local run's files, also when a
worker running one of its programs is killed; without Ray, ``--ray`` is one line."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxnigt import cli
from jaxnigt.run import executors, processes

HERE = Path(__file__).resolve().parent
CONFIG = {
    "name": "ex",
    "env": {"name": "lqr1d"},
    "cluster": {"n": 2},
    "algorithms": ["rennala_nigt", "sync_nigt"],
    "budget": 60.0,
    "seeds": 2,
    "hparams": {"M": 2, "M_init": 2},
    "eval": {"every": 5, "episodes": 2},
    "checkpoint_every": 1,
}
OVER = ["--over", "cluster.n=2,3,4,5"]
TIMING = ("wall_seconds", "compile_seconds")


def _config(tmp_path) -> str:
    import yaml

    path = tmp_path / "ex.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return str(path)


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(f)]


def test_the_local_executor_is_the_process_pool():
    pool = executors.make(print, jobs=2)
    assert isinstance(pool, processes.Pool) and pool.workers == 2
    pool.close()


def test_ray_without_the_extra_is_one_line(tmp_path, capsys, monkeypatch):
    def missing():
        raise executors.MissingRay()

    monkeypatch.setattr(executors, "_import_ray", missing)
    argv = ["sweep", _config(tmp_path), *OVER, "--out", str(tmp_path / "s"), "--ray", "auto"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'jaxnigt[ray]'" in err[0], err
    assert cli.main(["sweep", _config(tmp_path), *OVER, "--jobs", "0"]) == 2
    capsys.readouterr()
    # Checked before anything is written: no sweep.json or tune.json that the next plain
    # command would have to --resume.
    argv = ["tune", _config(tmp_path), "--out", str(tmp_path / "t"), "--ray", "auto"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["jaxnigt: error: --ray: Ray is not installed: pip install 'jaxnigt[ray]'"]
    assert not (tmp_path / "s").exists() and not (tmp_path / "t").exists()


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None, reason="needs the ray extra"
)
def test_a_sweep_on_ray_survives_a_killed_worker_with_the_local_files(tmp_path):
    config = _config(tmp_path)
    local = tmp_path / "local"
    assert (
        cli.main(["sweep", config, *OVER, "--out", str(local), "--jobs", "2", "--no-progress"]) == 0
    )
    on_ray = tmp_path / "ray"
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "ray_cluster.py"),
            "sweep",
            config,
            *OVER,
            "--out",
            str(on_ray),
            "--no-progress",
            "--kill",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith('{"status"')]
    result = json.loads(line)
    assert result["killed"], proc.stdout[-3000:]  # a worker of the second node was killed
    assert _rows(on_ray / "sweep.csv") == _rows(local / "sweep.csv")
    for point in ("cluster.n=2", "cluster.n=3", "cluster.n=4", "cluster.n=5"):
        for f in ("metrics.csv", "worker_counts.csv"):
            assert (on_ray / point / f).read_bytes() == (local / point / f).read_bytes(), (point, f)
    state = json.loads((on_ray / result["killed"]["point"] / executors.TASK_FILE).read_text())
    assert state["pid"] != result["killed"]["pid"]  # the retry ran in another worker


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None, reason="needs the ray extra"
)
def test_a_tuning_on_ray_chooses_what_the_local_one_does(tmp_path):
    config = _config(tmp_path)
    flags = [
        "--algorithms",
        "rennala_nigt,sync_nigt",
        "--lr-exp=-6,-4",
        "--eta",
        "0.1",
        "--max-extensions",
        "0",
        "--no-progress",
    ]
    local = tmp_path / "local"
    assert cli.main(["tune", config, "--out", str(local), *flags, "--jobs", "2"]) == 0
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "JAX_PLATFORMS": "cpu"}
    on_ray = tmp_path / "ray"
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "ray_cluster.py"),
            "tune",
            config,
            "--out",
            str(on_ray),
            *flags,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    tuned = lambda d: (d / "tuned.yaml").read_text().split("\n", 2)[2]  # past the header
    assert tuned(on_ray) == tuned(local)
    for run in (local / "runs").iterdir():
        theirs = on_ray / "runs" / run.name / "metrics.csv"
        assert theirs.read_bytes() == (run / "metrics.csv").read_bytes(), run.name


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None, reason="needs the ray extra"
)
def test_sigterm_cancels_the_ray_tasks_which_checkpoint_and_resume(tmp_path):
    config = _config(tmp_path)
    local = tmp_path / "local"
    # Point by point, as the Ray tasks run them (a grouped sweep's returns agree to float32
    # rounding, not byte for byte).
    argv = ["sweep", config, *OVER, "--out", str(local), "--no-progress", "--per-point"]
    assert cli.main(argv) == 0
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "JAX_PLATFORMS": "cpu"}
    on_ray = tmp_path / "ray"
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "ray_cluster.py"),
            "sweep",
            config,
            *OVER,
            "--out",
            str(on_ray),
            "--no-progress",
            "--term",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith('{"status"')]
    result = json.loads(line)
    assert result["first"] != 0 and result["status"] == 0, proc.stderr[-3000:]  # stopped, resumed
    assert "continue with" in proc.stderr and "--resume" in proc.stderr
    assert _rows(on_ray / "sweep.csv") == _rows(local / "sweep.csv")
    for point in ("cluster.n=2", "cluster.n=3", "cluster.n=4", "cluster.n=5"):
        assert (on_ray / point / "metrics.csv").read_bytes() == (
            local / point / "metrics.csv"
        ).read_bytes()
