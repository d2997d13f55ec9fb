"""End-to-end tests of the ``jaxnigt`` command on a tiny toy config (in-process)."""

import csv
import json

import pytest

from jaxnigt import cli

TINY = """
name: tiny
algorithms: [rennala_nigt, afedpg]
seeds: 2
budget: 40.0
env: {name: point_mass}
cluster: {n: 3, h: sqrt, kappa: 1.0}
hparams: {M: 6, learning_rate: 0.05, eta: 0.3}
per_algorithm: {afedpg: {learning_rate: 0.02}}
eval: {every: 4, episodes: 4}
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    cfg = root / "tiny.yaml"
    cfg.write_text(TINY)
    out = root / "run"
    code = cli.main(["run", str(cfg), "--out", str(out), "--no-progress"])
    return code, cfg, out


def test_run_writes_run_directory(tiny_run):
    code, _, out = tiny_run
    assert code == 0
    for name in ("config.yaml", "metrics.csv", "summary.json", "curves.png"):
        assert (out / name).is_file(), name
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    for col in (
        "algorithm",
        "seed",
        "round",
        "sim_time",
        "env_steps",
        "comms",
        "train_return",
        "eval_return",
    ):
        assert col in rows[0]
    assert {r["algorithm"] for r in rows} == {"rennala_nigt", "afedpg"}
    assert {r["seed"] for r in rows} == {"0", "1"}
    for algo in ("rennala_nigt", "afedpg"):
        for seed in ("0", "1"):
            mine = [r for r in rows if r["algorithm"] == algo and r["seed"] == seed]
            times = [float(r["sim_time"]) for r in mine]
            assert times == sorted(times) and times[0] == 0.0
            assert times[-2] < 40.0 <= times[-1]  # stops at the first round past the budget
            assert mine[-1]["eval_return"] != ""  # the final state is evaluated
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"rennala_nigt", "afedpg"}
    assert isinstance(summary["rennala_nigt"]["final_median_return"], float)
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_worker_counts_file_and_plot(tiny_run, tmp_path):
    """n = 3 <= 64: per seed and evaluation interval, the gradients each worker gave."""
    _, _, out = tiny_run
    counts = list(csv.DictReader((out / "worker_counts.csv").open()))
    assert list(counts[0])[-3:] == ["w0", "w1", "w2"]
    metrics = list(csv.DictReader((out / "metrics.csv").open()))
    for algo in ("rennala_nigt", "afedpg"):
        for seed in ("0", "1"):
            mine = [r for r in metrics if r["algorithm"] == algo and r["seed"] == seed]
            intervals = [r for r in counts if r["algorithm"] == algo and r["seed"] == seed]
            # one row per evaluation after time 0, at the evaluated step
            evaluated = [r["round"] for r in mine[1:] if r["eval_return"] != ""]
            assert [r["round"] for r in intervals] == evaluated
            total = sum(int(r[w]) for r in intervals for w in ("w0", "w1", "w2"))
            assert total == sum(float(r["grads"]) for r in mine[1:])
    assert (out / "counts.png").read_bytes()[:4] == b"\x89PNG"
    png = tmp_path / "c.png"
    assert cli.main(["plot", str(out), "--counts", "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_plot_counts_needs_the_file(tmp_path, capsys):
    (tmp_path / "metrics.csv").write_text("algorithm\n")
    assert cli.main(["plot", str(tmp_path), "--counts"]) == 2
    assert "worker_counts.csv" in capsys.readouterr().err


def test_run_refuses_existing_directory(tiny_run, capsys):
    _, cfg, out = tiny_run
    before = (out / "metrics.csv").read_bytes()
    assert cli.main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--overwrite" in err[0]
    assert (out / "metrics.csv").read_bytes() == before


@pytest.mark.parametrize("x", ["time", "steps", "comms"])
def test_plot(tiny_run, tmp_path, x):
    _, _, out = tiny_run
    png = tmp_path / f"p_{x}.png"
    assert cli.main(["plot", str(out), "--x", x, "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_plot_errors(tiny_run, tmp_path, capsys):
    _, _, out = tiny_run
    assert cli.main(["plot", str(out), "--x", "wall"]) == 2
    assert "--x" in capsys.readouterr().err
    assert cli.main(["plot", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_bad_config_exits_2_and_writes_nothing(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(TINY.replace("n: 3", "n: 0"))
    out = tmp_path / "never"
    assert cli.main(["run", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cluster.n" in err[0]
    assert not out.exists()
    assert cli.main(["run", str(cfg), "--out", str(out), "--set", "nokey"]) == 2
    assert not out.exists()


def test_list(capsys):
    assert cli.main(["list"]) == 0
    text = capsys.readouterr().out
    assert "reacher" in text and "rennala_nigt" in text and "demo.yaml" in text


# --- reliability: resume after SIGKILL, non-finite values, resume from another config ---

LONG = """
name: long
algorithms: [rennala_nigt, afedpg]
seeds: 2
budget: 150.0
checkpoint_every: 1
env: {name: point_mass}
cluster: {n: 3, h: sqrt, kappa: 1.0, noise: exponential}
hparams: {M: 6, learning_rate: 0.05, eta: 0.3}
per_algorithm: {afedpg: {learning_rate: 0.02}}
eval: {every: 2, episodes: 2}
"""


def test_sigkill_then_resume_gives_identical_metrics(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    cfg = tmp_path / "long.yaml"
    cfg.write_text(LONG)
    reference = tmp_path / "reference"
    assert cli.main(["run", str(cfg), "--out", str(reference), "--no-progress"]) == 0

    killed = tmp_path / "killed"
    env = {**os.environ, "JAXNIGT_CACHE_DIR": os.environ.get("JAXNIGT_TEST_CACHE", "")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxnigt.cli",
            "run",
            str(cfg),
            "--out",
            str(killed),
            "--no-progress",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # Kill once the second algorithm has checkpointed a few chunks (the first is then done).
    deadline = time.time() + 240
    ckpts = killed / "checkpoints" / "afedpg"
    while time.time() < deadline and proc.poll() is None:
        if ckpts.is_dir() and len(list(ckpts.glob("chunk_*"))) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "summary.json").exists()

    assert cli.main(["run", str(cfg), "--resume", str(killed), "--no-progress"]) == 0
    for name in ("metrics.csv", "worker_counts.csv"):
        assert (killed / name).read_text() == (reference / name).read_text(), name


def test_resume_from_a_different_config_is_refused(tiny_run, capsys):
    _, cfg, out = tiny_run
    code = cli.main(["run", str(cfg), "--resume", str(out), "--set", "seeds=3"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "different config" in err[0] and "seeds" in err[0]


def test_nonfinite_stops_with_message_or_marks_seed(tmp_path, capsys):
    cfg = tmp_path / "nan.yaml"
    # Plain single-trajectory SGD with a huge step overflows within a few arrivals.
    cfg.write_text(
        TINY.replace("algorithms: [rennala_nigt, afedpg]", "algorithms: [asgd]")
        .replace("learning_rate: 0.05", "learning_rate: 1.0e+6")
        .replace("budget: 40.0", "budget: 400.0")
    )
    out = tmp_path / "stop"
    assert cli.main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "asgd: non-finite" in err and "seed" in err and "round" in err
    assert not (out / "summary.json").exists()

    marked = tmp_path / "mark"
    code = cli.main(
        ["run", str(cfg), "--out", str(marked), "--no-progress", "--set", "on_nonfinite=mark"]
    )
    assert code == 0
    assert "diverged" in capsys.readouterr().out
    assert (marked / "summary.json").is_file()


@pytest.mark.parametrize(
    "sets, field",
    [
        (["bogus=1"], "config.bogus"),  # unknown key
        (["cluster.n=three"], "cluster.n"),  # wrong type
        (["cluster.n=0"], "cluster.n"),
        (["hparams.M=0"], "hparams.M"),
        (["hparams.M_init=0"], "hparams.M_init"),
        (["hparams.eta=1.5"], "hparams.eta"),
        (["cluster.h=-1"], "cluster.h"),  # negative time scale
        (["cluster.h=0"], "cluster.h"),  # zero time scale
        (["cluster.kappa=[1, 2]"], "cluster.kappa"),  # list length != n
        (["env.name=atari"], "env.name"),
        (["algorithms=[ppo]"], "algorithms[0]"),
        (["cluster.h=fastest"], "cluster.h"),  # unknown profile
        (["cluster.noise=gaussian"], "cluster.noise"),
        (["env.heterogeneous=sign_flip", "cluster.n=1"], "env.heterogeneous"),  # types > n
        (["env.horizon=0"], "env.horizon"),
        (["budget=0"], "budget"),
        (["budget"], "--set"),  # malformed --set
        (["seeds=0"], "seeds"),
    ],
)
def test_each_bad_input_exits_2_with_one_line(tmp_path, capsys, sets, field):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "out"
    argv = ["run", str(cfg), "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"jaxnigt: error: {field}"), err[0]
    assert not out.exists()


def test_unreadable_yaml_exits_2(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["run", str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("env: {name: [\n")
    assert cli.main(["run", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "cannot read" in err[0] and "not valid YAML" in err[1]
    assert not out.exists()
