"""Tests for jaxnigt.run.experiment and jaxnigt.run.signals without running an algorithm: what a
fresh run does to a reused directory, and the stop flag (whole runs: tests/test_cli.py)."""

import os
import signal

import pytest

from jaxnigt import config as config_lib
from jaxnigt.run import experiment, metrics, run_dir, signals


def test_fresh_run_replaces_an_earlier_runs_outputs(tmp_path):
    """A reused directory (``--overwrite``, a failed sweep point run again) keeps no stale
    checkpoint a resume would pick up, nor a count file of another n."""
    cfg = config_lib.from_dict({"env": {"name": "point_mass"}, "budget": 10.0})
    stale = tmp_path / "checkpoints" / "afedpg" / "chunk_000099"
    stale.mkdir(parents=True)
    (tmp_path / "checkpoints" / "done.json").write_text('["afedpg"]\n')
    (tmp_path / "tensorboard").mkdir()
    for name in (metrics.COUNTS_FILE, "counts.png", "metrics.csv", "compare.md", run_dir.LOCK):
        (tmp_path / name).write_text("old")
    assert experiment._begin(cfg, tmp_path, resume=False) == ([], [], [])
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([run_dir.LOCK, "compare.md", "config.yaml"])  # not a run's output
    assert config_lib.from_dict(config_lib.read_yaml(tmp_path / "config.yaml")) == cfg


def test_a_fresh_run_records_its_trace_files_content(tmp_path):
    """``trace.sha256`` beside ``config.yaml``: what the trace file held when the run began
    (a resume and ``jaxnigt compare`` check it)."""
    trace = tmp_path / "down.csv"
    trace.write_text("2,1.5,0\n2,6,1\n")
    raw = {"env": {"name": "point_mass"}, "budget": 10.0, "cluster": {"n": 4}}
    cfg = config_lib.from_dict({**raw, "cluster": {"n": 4, "power": f"trace:{trace}"}})
    out = tmp_path / "run"
    out.mkdir()
    experiment._begin(cfg, out, resume=False)
    assert run_dir.recorded_trace(out) == run_dir.trace_digest(cfg)[1]
    experiment._begin(config_lib.from_dict(raw), out, resume=False)  # no trace: none kept
    assert not (out / run_dir.TRACE_RECORD).exists()


def test_a_resumed_run_keeps_the_seconds_of_its_earlier_sessions(tmp_path):
    """``run --resume`` of a finished run rewrote ``summary.json`` without ``wall_seconds``
    and ``compile_seconds``.  They are kept, and an algorithm continued from a checkpoint sums
    this session's seconds with those the summary recorded when the earlier one stopped."""
    import json

    raw = {"env": {"name": "point_mass"}, "budget": 10.0, "cluster": {"n": 2}}
    cfg = config_lib.from_dict({**raw, "algorithms": ["rennala_nigt", "afedpg"]})
    experiment._begin(cfg, tmp_path, resume=False)
    ids = {"algorithm": "rennala_nigt", "grid": 0, "learning_rate": 0.1, "eta": 0.5, "seed": 0}
    rows = [{**ids, "round": r, "sim_time": t, "eval_return": -t} for r, t in enumerate((0, 11))]
    metrics.write_csv(tmp_path / "metrics.csv", rows)
    earlier = {
        "rennala_nigt": {"wall_seconds": 12.5, "compile_seconds": 3.25, "finished": True},
        "afedpg": {"wall_seconds": 4.0, "compile_seconds": 2.0, "finished": False},
    }
    (tmp_path / "summary.json").write_text(json.dumps(earlier))
    experiment.checkpoint.mark_done(tmp_path, "rennala_nigt")
    outputs = experiment._Results(cfg, tmp_path, rows, [])
    experiment._restore(outputs, tmp_path, ["rennala_nigt"], ["afedpg"])
    assert outputs.timings == {"rennala_nigt": (12.5, 3.25, -1)}
    assert outputs.earlier == {"afedpg": (4.0, 2.0)}
    session = {"wall_seconds": 6.0, "compile_seconds": 0.5}
    assert outputs._seconds("afedpg", session, -1) == (10.0, 2.5, -1)
    experiment.checkpoint.mark_done(tmp_path, "afedpg")  # both done: the resume runs nothing
    summary = experiment.run_experiment(cfg, tmp_path, resume=True, progress=False, plot=False)
    assert summary["rennala_nigt"]["wall_seconds"] == 12.5
    assert summary["rennala_nigt"]["compile_seconds"] == 3.25
    assert json.loads((tmp_path / "summary.json").read_text()) == summary


def test_resume_needs_a_run_of_the_same_config(tmp_path):
    cfg = config_lib.from_dict({"env": {"name": "point_mass"}, "budget": 10.0})
    with pytest.raises(run_dir.NotResumableError, match="not a run directory"):
        experiment.run_experiment(cfg, tmp_path, resume=True, progress=False)
    with pytest.raises(run_dir.UnusableDirError, match="no such directory"):
        experiment.run_experiment(cfg, tmp_path / "none", resume=True, progress=False)
    assert not (tmp_path / "none").exists()


def test_first_signal_sets_the_flag_and_handlers_are_restored(capsys):
    before = signal.getsignal(signal.SIGTERM)
    with signals.stop_on_signals() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert "SIGTERM: finishing the current chunk" in capsys.readouterr().err
    stopped = signals.Interrupted(signal.SIGTERM, "afedpg", 3)
    assert stopped.exit_status == 143 and "afedpg stopped after chunk 3" in str(stopped)
