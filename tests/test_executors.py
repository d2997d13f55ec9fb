"""Tests for jaxnigt.run.executors: the local pool and the Ray backend behind one interface;
a sweep on a real two-node Ray cluster (on 127.0.0.1) gives the local run's files, also when a
worker running one of its programs is killed; without Ray, ``--ray`` is one line."""

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from children import child_env

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


NEEDS_RAY = pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None, reason="needs the ray extra"
)


@pytest.fixture(scope="module")
def on_ray(tmp_path_factory):
    """``on_ray(argv, kill=False, term=False) -> (result, stderr)``: ``jaxnigt ARGV --ray``
    in one driver process on one two-node Ray cluster that the module's tests share
    (tests/ray_cluster.py: starting a cluster and a driver that imports JAX costs seconds a
    test). ``result`` is the driver's answer, ``stderr`` what the driver wrote meanwhile."""
    root = tmp_path_factory.mktemp("ray_driver")
    out, err = root / "driver.out", root / "driver.err"
    # The suite's compilation cache (children.child_env): the driver and its Ray workers load
    # the programs that the local reference runs compiled.
    env = child_env(PYTHONPATH=str(HERE.parent), JAX_PLATFORMS="cpu")
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "ray_cluster.py")],
            stdin=subprocess.PIPE, stdout=o, stderr=e, env=env, text=True,
        )  # fmt: skip

    def wait_for(done, what: str, timeout: float = 420.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"the Ray driver: no {what} ({proc.poll()}):\n{err.read_text()[-4000:]}"
                )
            time.sleep(0.2)

    wait_for(lambda: '"ready"' in out.read_text(), "cluster")
    served = iter(range(1000))

    def run(argv: list[str], kill: bool = False, term: bool = False):
        answer = root / f"answer_{next(served)}.json"
        start = err.stat().st_size
        proc.stdin.write(json.dumps({"argv": argv, "kill": kill, "term": term,
                                     "result": str(answer)}) + "\n")  # fmt: skip
        proc.stdin.flush()
        wait_for(answer.exists, "answer")
        with err.open() as f:
            f.seek(start)
            stderr = f.read()
        result = json.loads(answer.read_text())
        assert "error" not in result, result["error"][-4000:]
        return result, stderr

    try:
        yield run
    finally:
        proc.stdin.close()  # the driver shuts its cluster down
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """The sweep of CONFIG over OVER in two local processes: point by point, as the Ray tasks
    run them (a grouped sweep's returns agree to float32 rounding, not byte for byte); the
    reference of both Ray sweeps below."""
    root = tmp_path_factory.mktemp("local_sweep")
    config, local = _config(root), root / "local"
    argv = ["sweep", config, *OVER, "--out", str(local), "--jobs", "2", "--no-progress"]
    assert cli.main(argv) == 0
    return config, local


@NEEDS_RAY
def test_a_sweep_on_ray_survives_a_killed_worker_with_the_local_files(on_ray, local_sweep):
    config, local = local_sweep
    ray_out = local.parent / "ray_killed"
    argv = ["sweep", config, *OVER, "--out", str(ray_out), "--no-progress"]
    result, _ = on_ray(argv, kill=True)
    assert result["status"] == 0, result
    assert result["killed"], result  # a worker of the second node was killed
    assert _rows(ray_out / "sweep.csv") == _rows(local / "sweep.csv")
    for point in ("cluster.n=2", "cluster.n=3", "cluster.n=4", "cluster.n=5"):
        for f in ("metrics.csv", "worker_counts.csv"):
            assert (ray_out / point / f).read_bytes() == (local / point / f).read_bytes(), (
                point,
                f,
            )
    state = json.loads((ray_out / result["killed"]["point"] / executors.TASK_FILE).read_text())
    assert state["pid"] != result["killed"]["pid"]  # the retry ran in another worker


@NEEDS_RAY
def test_a_tuning_on_ray_chooses_what_the_local_one_does(on_ray, tmp_path):
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
    ray_out = tmp_path / "ray"
    result, _ = on_ray(["tune", config, "--out", str(ray_out), *flags])
    assert result["status"] == 0, result
    tuned = lambda d: (d / "tuned.yaml").read_text().split("\n", 2)[2]  # past the header
    assert tuned(ray_out) == tuned(local)
    for run in (local / "runs").iterdir():
        theirs = ray_out / "runs" / run.name / "metrics.csv"
        assert theirs.read_bytes() == (run / "metrics.csv").read_bytes(), run.name


@NEEDS_RAY
def test_sigterm_cancels_the_ray_tasks_which_checkpoint_and_resume(on_ray, local_sweep):
    config, local = local_sweep
    ray_out = local.parent / "ray_term"
    argv = ["sweep", config, *OVER, "--out", str(ray_out), "--no-progress"]
    result, stderr = on_ray(argv, term=True)
    assert result["first"] != 0 and result["status"] == 0, stderr[-3000:]  # stopped, resumed
    assert "continue with" in stderr and "--resume" in stderr
    assert _rows(ray_out / "sweep.csv") == _rows(local / "sweep.csv")
    for point in ("cluster.n=2", "cluster.n=3", "cluster.n=4", "cluster.n=5"):
        assert (ray_out / point / "metrics.csv").read_bytes() == (
            local / point / "metrics.csv"
        ).read_bytes()
