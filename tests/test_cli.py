"""End-to-end tests of the ``jaxnigt`` command on a tiny toy config (in-process)."""

import contextlib
import csv
import io
import json
import re

import numpy as np
import pytest
from children import TIMEOUT, Child, child_env
from tasks import assert_plot

from jaxnigt import cli

TINY = """
name: tiny
algorithms: [rennala_nigt, afedpg]
seeds: 2
budget: 40.0
env: {name: point_mass}
cluster: {n: 3, h: sqrt, kappa: 1.0, noise: exponential}
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
    finals = {}
    for algo in ("rennala_nigt", "afedpg"):
        for seed in ("0", "1"):
            mine = [r for r in rows if r["algorithm"] == algo and r["seed"] == seed]
            times = [float(r["sim_time"]) for r in mine]
            assert times == sorted(times) and times[0] == 0.0
            assert times[-2] < 40.0 <= times[-1]  # stops at the first round past the budget
            assert mine[-1]["eval_return"] != ""  # the final state is evaluated
            # the total worker time: 0 at time 0, growing, at most n = 3 workers all the time
            worker = np.array([float(r["worker_time"]) for r in mine])
            assert worker[0] == 0.0 and np.all(np.diff(worker) > 0)
            assert np.all(worker <= 3 * np.array(times) * (1 + 1e-6))
            finals.setdefault(algo, []).append(worker[-1])
    summary = json.loads((out / "summary.json").read_text())
    for algo, last in finals.items():  # the median over seeds of the final total worker time
        assert summary[algo]["final_worker_time"] == pytest.approx(np.median(last), rel=1e-5)
    assert set(summary) == {"rennala_nigt", "afedpg"}
    for algo in ("rennala_nigt", "afedpg"):  # the median over seeds of the last evaluation
        last = [
            float([r for r in rows if r["algorithm"] == algo and r["seed"] == s][-1]["eval_return"])
            for s in ("0", "1")
        ]
        assert summary[algo]["final_median_return"] == pytest.approx(np.median(last), rel=1e-5)
    assert_plot(out / "curves.png")


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
    assert_plot(out / "counts.png")
    png = tmp_path / "c.png"
    assert cli.main(["plot", str(out), "--counts", "--out", str(png)]) == 0
    assert_plot(png)


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
    assert_plot(png)


def test_plot_errors(tiny_run, tmp_path, capsys):
    _, _, out = tiny_run
    assert cli.main(["plot", str(out), "--x", "wall"]) == 2
    assert "jaxnigt: error: --x: got 'wall'; expected one of" in capsys.readouterr().err
    assert cli.main(["plot", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    png = tmp_path / "foo.png"
    assert cli.main(["plot", str(out), "--y", "foo", "--out", str(png)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: --y: got 'foo';"), err
    assert "eval_return" in err[0] and "train_return" in err[0]  # the columns there are
    assert not png.exists()
    assert cli.main(["plot", str(out), "--y", "train_return", "--out", str(png)]) == 0
    assert_plot(png)


def test_an_empty_config_exits_2_and_writes_nothing(tmp_path, capsys):
    cfg = tmp_path / "empty.yaml"
    cfg.write_text("# a config to fill in later\n")
    out = tmp_path / "never"
    for command in (
        ["run", str(cfg), "--out", str(out)],
        ["plan", str(cfg)],
        ["sweep", str(cfg), "--over", "seeds=1,2", "--out", str(out)],
    ):
        assert cli.main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "sets nothing" in err[0] and "jaxnigt list" in err[0], err
        assert not out.exists()


def test_run_of_a_huge_n_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from jaxnigt.run import sizing

    monkeypatch.setattr(sizing, "device_limit", lambda: (8 * 2**30, "the test's limit"))
    out = tmp_path / "never"
    argv = ["run", "demo", "--set", "cluster.n=1000000000", "--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: cluster.n = 1,000,000,000:")
    assert "the largest n that fits is about" in err[0] and not out.exists()


def test_plan_of_an_unknown_name_points_to_list(capsys):
    assert cli.main(["plan", "nosuch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'nosuch'" in err[0] and "`jaxnigt list`" in err[0], err


def test_a_dead_hparams_override_is_one_warning_line(tiny_run, tmp_path, capsys):
    _, cfg, _ = tiny_run
    text = cfg.read_text().replace(
        "per_algorithm: {afedpg: {learning_rate: 0.02}}",
        "per_algorithm: {afedpg: {learning_rate: 0.02}, rennala_nigt: {learning_rate: 0.05}}",
    )
    both = tmp_path / "both.yaml"
    both.write_text(text)
    assert cli.main(["plan", str(both), "--no-memory", "--set", "hparams.learning_rate=0"]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert err == [
        "[jaxnigt] warning: hparams.learning_rate = 0 has no effect: per_algorithm sets "
        "learning_rate for every listed algorithm (rennala_nigt 0.05, afedpg 0.02); set "
        "per_algorithm.<name>.learning_rate"
    ]


def test_the_progress_bar_names_what_it_shows(tiny_run, tmp_path, capsys):
    _, cfg, _ = tiny_run
    assert cli.main(["run", str(cfg), "--out", str(tmp_path / "bar")]) == 0
    err = capsys.readouterr().err
    assert "rennala_nigt (1 of 2)" in err and "afedpg (2 of 2)" in err
    assert "eval_median=" in err and "median_return" not in err
    assert "sim-t/s" in err  # the rate: simulated time per second
    summary = json.loads((tmp_path / "bar" / "summary.json").read_text())
    final = re.findall(r"afedpg \(2 of 2\).*eval_median=(-?[0-9.]+)", err)[-1]
    assert float(final) == pytest.approx(summary["afedpg"]["final_median_return"], abs=0.006)


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
    assert "sweeps/n_scaling_cpu.yaml" in text


def test_bundled_config_by_name_from_any_directory(tmp_path, monkeypatch, capsys):
    """A config argument that is no file names a bundled config (jaxnigt.config.bundled)."""
    monkeypatch.chdir(tmp_path)
    argv = ["plan", "demo", "--no-memory", "--set", "algorithms=[afedpg]"]
    assert cli.main(argv) == 0
    assert "afedpg" in capsys.readouterr().out
    assert cli.main(["run", "no_such_config", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read" in err[0] and "no_such_config" in err[0], err


def test_resume_of_a_directory_without_a_run(tmp_path, capsys):
    """The library says what is wrong with the directory; the command names the flag."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    assert cli.main(["run", str(cfg), "--resume", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: --resume: "), err
    assert "not a run directory" in err[0] and not (tmp_path / "none").exists()


def test_version(capsys):
    import jaxnigt

    with pytest.raises(SystemExit) as caught:
        cli.main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out == f"jaxnigt {jaxnigt.__version__}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "demo", "--resume", "DIR", "--overwrite"],
        ["sweep", "demo", "--over", "seeds=1,2", "--out", "DIR", "--resume", "--overwrite"],
        ["tune", "demo", "--out", "DIR", "--overwrite", "--resume"],
    ],
)
def test_resume_and_overwrite_together_are_refused(tmp_path, capsys, argv):
    out = tmp_path / "d"
    argv = [str(out) if a == "DIR" else a for a in argv]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "jaxnigt: error: --resume and --overwrite contradict each other: --resume continues "
        "the work in the directory, --overwrite discards it and starts afresh; give one"
    ]
    assert not out.exists()


def _parsers(parser):
    """``parser`` and every parser under it (subcommands)."""
    yield parser
    for action in parser._actions:
        for sub in getattr(action, "choices", None) or {}:
            if isinstance(action.choices, dict):
                yield from _parsers(action.choices[sub])


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "demo", "--seed", "3", "--out", "DIR"],  # was --seeds 3: three seeds
        ["tune", "demo", "--out", "DIR", "--et", "0.1"],
        ["clock", "--round", "3", "--out", "DIR"],
    ],
)
def test_a_flag_is_never_abbreviated(tmp_path, capsys, argv):
    """argparse's prefix matching read ``run --seed 3`` as ``--seeds 3``: every parser of the
    command refuses an abbreviation, in one line, exit 2, nothing written."""
    from jaxnigt.cli import clock

    assert all(not p.allow_abbrev for p in _parsers(cli.build_parser()))  # before any run
    out = tmp_path / "d"
    argv = [str(out) if a == "DIR" else a for a in argv]
    with pytest.raises(SystemExit) as caught:
        cli.main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    short = next(a for a in argv if a in ("--seed", "--et", "--round"))
    assert len(err) == 1 and "unrecognized arguments: " in err[0] and short in err[0], err
    assert not out.exists()
    with pytest.raises(SystemExit):
        clock.main(["--round", "3", "--out", str(out)])
    assert "unrecognized arguments: --round 3" in capsys.readouterr().err
    assert not out.exists()


def test_lr_exp_takes_a_negative_value_after_a_space_as_its_help_shows(capsys):
    """argparse reads '-6:-5' (unlike a plain negative number) as an option: ``--lr-exp
    -6:-5`` failed with "expected one argument" while ``--lr-exp=-6:-5`` worked."""
    from jaxnigt.studies import tuning

    with pytest.raises(SystemExit):
        cli.main(["tune", "--help"])
    shown = re.search(r"e\.g\. --lr-exp (\S+)", " ".join(capsys.readouterr().out.split()))
    assert shown, "the help shows an example"
    parser = cli.build_parser()
    for value in (shown.group(1), "-6:-5", "-8,-6", "-9:-3:2"):
        for argv in (["--lr-exp", value], [f"--lr-exp={value}"]):
            args = parser.parse_args(["tune", "demo", "--out", "t", *argv, "--eta", "0.1"])
            assert args.lr_exp == value and args.eta == "0.1" and args.out == "t"
        assert tuning.parse_lr_exp(value)  # a grid the tuning reads
    assert cli.join_negative_values(["--lr-exp", "--out", "t"]) == ["--lr-exp", "--out", "t"]


def test_a_run_directory_being_written_is_not_offered_to_resume(tmp_path, capsys):
    """A second writer on a directory that a process is writing (it holds the lock) is told
    so, not pointed to --resume or --overwrite (which would discard the other's work)."""
    import os

    from jaxnigt.run import run_dir

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "busy"
    out.mkdir()
    (out / "config.yaml").write_text(TINY)  # a run that has begun, as far as files tell
    with run_dir.run_lock(out):
        for extra in ([], ["--overwrite"]):
            assert cli.main(["run", str(cfg), "--out", str(out), "--no-progress", *extra]) == 2
            assert capsys.readouterr().err.strip().splitlines() == [
                f"jaxnigt: error: --out {str(out)!r} is being written by another jaxnigt "
                f"process (pid {os.getpid()}; lock {str(out / run_dir.LOCK)!r}); wait for it to "
                "end or stop it first"
            ]
    assert sorted(p.name for p in out.iterdir()) == [run_dir.LOCK, "config.yaml"]


# --- reliability: resume after SIGKILL, non-finite values, resume from another config ---
# LONG is TINY with a longer budget and a checkpoint every chunk: the same compiled programs
# (the budget is an argument), so its runs and their child processes reuse TINY's compiles.

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
eval: {every: 4, episodes: 4}
"""


def _popen(cfg, out, *extra, env_extra=None, file_limit=None):
    """``jaxnigt run CFG --out OUT`` in a child process (optionally under RLIMIT_FSIZE, set
    by the child itself before it imports anything); its output goes to files beside OUT."""
    import sys

    start = "import runpy, sys; sys.argv[0] = 'jaxnigt'; "
    if file_limit is not None:
        start += (
            f"import resource; resource.setrlimit(resource.RLIMIT_FSIZE, ({file_limit},) * 2); "
        )
    start += "runpy.run_module('jaxnigt.cli', run_name='__main__')"
    argv = [sys.executable, "-c", start, "run", str(cfg), "--out", str(out)]
    logs = out.parent / f"{out.name}.logs"
    return Child([*argv, "--no-progress", *extra], logs, env=child_env(**(env_extra or {})))


def _chunk_dirs(path):
    """Complete checkpoints (``chunk_<k>`` directories) of one algorithm."""
    if not path.is_dir():
        return []
    return sorted(
        p for p in path.iterdir() if p.is_dir() and p.name.removeprefix("chunk_").isdigit()
    )


def _wait_for(proc, path, count=1, timeout=TIMEOUT):
    """Waits until ``proc`` has written ``count`` complete checkpoints in ``path``."""
    import time

    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if len(_chunk_dirs(path)) >= count:
            return
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no {count} checkpoints in {path} (exit {proc.poll()})\n{proc.tail()}")


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """An uninterrupted reference run of LONG."""
    root = tmp_path_factory.mktemp("long")
    cfg = root / "long.yaml"
    cfg.write_text(LONG)
    reference = root / "reference"
    assert cli.main(["run", str(cfg), "--out", str(reference), "--no-progress"]) == 0
    return cfg, reference


@pytest.fixture(scope="module")
def killed(long_run, tmp_path_factory):
    """The run directory of LONG killed (SIGKILL) once its second algorithm has two
    checkpoints (the first is then done). One child serves every test below: each resumes
    or corrupts its own copy (:func:`_copy_killed`)."""
    import signal

    cfg, _ = long_run
    out = tmp_path_factory.mktemp("killed") / "run"
    proc = _popen(cfg, out)
    _wait_for(proc, out / "checkpoints" / "afedpg", count=2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return out


def _copy_killed(killed, where):
    import shutil

    return shutil.copytree(killed, where, symlinks=True)


def test_sigkill_then_resume_gives_identical_metrics(long_run, killed, tmp_path):
    cfg, reference = long_run
    killed = _copy_killed(killed, tmp_path / "killed")
    assert cli.main(["run", str(cfg), "--resume", str(killed), "--no-progress"]) == 0
    for name in ("metrics.csv", "worker_counts.csv"):
        assert (killed / name).read_text() == (reference / name).read_text(), name


@pytest.fixture(scope="module")
def terminated(long_run, tmp_path_factory):
    """LONG stopped by SIGTERM during its second algorithm: (exit code, stderr, dir, exit
    code of a second process on the same directory).

    The child is frozen (SIGSTOP) as soon as it has two afedpg checkpoints, about 10 chunks
    before its end, and only continued (SIGCONT) after the SIGTERM is queued: however slow
    the machine, the second process meets a child that holds the directory, and the signal
    arrives mid-run, never after the last chunk."""
    import signal

    cfg, _ = long_run
    out = tmp_path_factory.mktemp("term") / "run"
    proc = _popen(cfg, out)
    _wait_for(proc, out / "checkpoints" / "afedpg", count=2)
    proc.send_signal(signal.SIGSTOP)
    # a second process on the same directory is refused while the first holds it
    with contextlib.redirect_stderr(io.StringIO()) as said:
        second = cli.main(["run", str(cfg), "--resume", str(out), "--no-progress"])
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)
    code = proc.wait()
    return code, proc.stderr, out, (second, said.getvalue())


def test_sigterm_checkpoints_writes_partial_results_and_resumes(long_run, terminated, capsys):
    cfg, reference = long_run
    code, stderr, out, _ = terminated
    assert code == 143, stderr
    lines = [x for x in stderr.strip().splitlines() if x.startswith("jaxnigt:")]
    assert any(f"--resume {out}" in x and "jaxnigt run" in x for x in lines), stderr
    assert _chunk_dirs(out / "checkpoints" / "afedpg")
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert {r["algorithm"] for r in rows} == {"rennala_nigt", "afedpg"}  # partial afedpg rows
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rennala_nigt"]["finished"] is True
    assert summary["afedpg"]["finished"] is False  # its return is the latest evaluation so far
    reached = min(
        max(float(r["sim_time"]) for r in rows if r["algorithm"] == "afedpg" and r["seed"] == s)
        for s in ("0", "1")
    )
    assert summary["afedpg"]["sim_time_reached"] == pytest.approx(reached)
    assert 0 < reached < 150.0
    first, partial = summary["rennala_nigt"]["wall_seconds"], summary["afedpg"]["wall_seconds"]
    assert first > 0 and partial > 0  # the interrupted algorithm's seconds so far too
    assert cli.main(["plot", str(out), "--out", str(out / "mid.png")]) == 0
    capsys.readouterr()
    # A fresh run into it is refused, pointing to --resume (--overwrite would discard it).
    assert cli.main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"continue it with --resume {out}" in err[0], err
    assert "--overwrite to discard it" in err[0]
    assert cli.main(["run", str(cfg), "--resume", str(out), "--no-progress"]) == 0
    for name in ("metrics.csv", "worker_counts.csv"):
        assert (out / name).read_text() == (reference / name).read_text(), name
    summary = json.loads((out / "summary.json").read_text())
    assert all(entry["finished"] for entry in summary.values())
    assert "sim_time_reached" not in summary["afedpg"]
    # the seconds of both sessions: the finished algorithm's kept, the continued one's summed
    assert summary["rennala_nigt"]["wall_seconds"] == first
    assert summary["afedpg"]["wall_seconds"] > partial


def test_a_chunk_still_running_after_the_grace_is_dropped_and_runs_again(long_run, tmp_path):
    """``JAXNIGT_STOP_GRACE=0``: the chunk in flight when the SIGTERM arrives is dropped at
    once (a chunk of a huge run may take minutes); the run stops at the state before it,
    checkpointed, exit 143, and a resume runs the chunk again to the uninterrupted metrics."""
    import signal

    cfg, reference = long_run
    out = tmp_path / "run"
    proc = _popen(cfg, out, env_extra={"JAXNIGT_STOP_GRACE": "0"})
    _wait_for(proc, out / "checkpoints" / "afedpg", count=2)
    proc.send_signal(signal.SIGSTOP)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)
    assert proc.wait() == 143, proc.stderr
    assert "is dropped and runs again when the run is resumed" in proc.stderr
    # between two chunks the run stops as before; inside one, the chunk is dropped
    assert "dropped (a resume runs it again)" in proc.stderr or "stopped after" in proc.stderr
    assert cli.main(["run", str(cfg), "--resume", str(out), "--no-progress"]) == 0
    for name in ("metrics.csv", "worker_counts.csv"):
        assert (out / name).read_text() == (reference / name).read_text(), name


def test_second_process_on_a_run_directory_is_refused(terminated):
    *_, out, (second, said) = terminated
    assert second == 2
    err = said.strip().splitlines()
    assert len(err) == 1 and "is being written by another jaxnigt process" in err[0], err
    assert str(out) in err[0]


def _corrupt(chunk, how):
    """Truncates the checkpoint's largest file, or flips one byte in the middle of *every*
    file: which file holds the arrays depends on orbax's layout and on how many chunks the
    killed run wrote, and a flipped byte in unused metadata would go unnoticed."""
    files = [p for p in chunk.rglob("*") if p.is_file() and p.stat().st_size]
    if how == "truncate":
        data = max(files, key=lambda p: p.stat().st_size)
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        return
    for data in files:
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))


@pytest.mark.parametrize("how", ["truncate", "bitflip"])
def test_corrupt_newest_checkpoint_falls_back_to_the_previous(
    long_run, killed, tmp_path, how, capsys
):
    import shutil

    cfg, reference = long_run
    out = _copy_killed(killed, tmp_path / "run")
    newest = _chunk_dirs(out / "checkpoints" / "afedpg")[-1]
    _corrupt(newest, how)
    before = shutil.copytree(out, tmp_path / "copy")
    assert cli.main(["run", str(cfg), "--resume", str(out), "--no-progress"]) == 0
    captured = capsys.readouterr().out
    assert f"checkpoint {newest} is unreadable" in captured and ".corrupt" in captured
    assert (out / "metrics.csv").read_text() == (reference / "metrics.csv").read_text()
    # every checkpoint unreadable: one line, exit 2, nothing moved or deleted
    for chunk in _chunk_dirs(before / "checkpoints" / "afedpg"):
        _corrupt(chunk, "truncate")  # (a second bit flip could undo the first)
    listing = sorted(p.name for p in (before / "checkpoints" / "afedpg").iterdir())
    assert cli.main(["run", str(cfg), "--resume", str(before), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no readable checkpoint" in err[0], err
    assert sorted(p.name for p in (before / "checkpoints" / "afedpg").iterdir()) == listing


def test_unwritable_out_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    assert cli.main(["run", str(cfg), "--out", "/proc/jaxnigt_cannot_be_here/run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/proc/jaxnigt_cannot_be_here" in err[0], err


def test_read_only_run_dir_on_resume_is_one_line(tiny_run, monkeypatch, capsys):
    import os

    _, cfg, out = tiny_run
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(out) else real(p, m))
    assert cli.main(["run", str(cfg), "--resume", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not writable" in err[0] and str(out) in err[0], err


def test_disk_full_mid_run_is_one_line_and_leaves_no_partial_files(long_run, tmp_path):
    cfg, _ = long_run
    out = tmp_path / "run"
    # 6,000 bytes per file: config.yaml fits, checkpoints and metrics.csv do not
    proc = _popen(cfg, out, env_extra={"JAXNIGT_CACHE_DIR": ""}, file_limit=6000)
    assert proc.wait() == 1, proc.tail()
    stderr = proc.stderr
    lines = [x for x in stderr.strip().splitlines() if x.startswith("jaxnigt:")]
    assert len(lines) == 1 and "run stopped" in lines[0], stderr
    assert str(out) in lines[0] and "'?'" not in lines[0], lines  # the file that did not fit
    leftovers = [
        p for p in out.rglob("*") if p.name.endswith(".tmp") or "orbax-checkpoint-tmp" in p.name
    ]
    assert not leftovers, leftovers


def test_resume_from_a_different_config_is_refused(tiny_run, capsys):
    _, cfg, out = tiny_run
    code = cli.main(["run", str(cfg), "--resume", str(out), "--set", "seeds=3"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "different config" in err[0] and "seeds" in err[0]


NAN = """
name: nan
algorithms: [asgd]
seeds: 2
budget: 200.0
env: {name: nan_point_mass}
cluster: {n: 3, h: sqrt, kappa: 1.0}
hparams: {M: 6, learning_rate: 1.0e-4, eta: 0.3}
eval: {every: 4, episodes: 4}
checkpoint_every: 2
live_every_s: 1.0e+9
"""


def test_nonfinite_stops_with_message_or_marks_seed(tmp_path, capsys, monkeypatch):
    """A NaN gradient injected deterministically: ``nan_point_mass`` poisons 1 % of episodes,
    chosen by integer key bits (tests/tasks.py), so seed 0 meets one a few chunks in and seed
    1 never, on every machine. (Live writes are off: a stopped run writes no summary.)"""
    from tasks import register_test_envs

    from jaxnigt.run import checkpoint

    register_test_envs(monkeypatch)
    cfg = tmp_path / "nan.yaml"
    cfg.write_text(NAN)
    out = tmp_path / "stop"
    assert cli.main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    found = re.search(r"asgd: non-finite .* at round (\d+), seed 0 \(learning_rate=", err[0])
    assert found, err[0]
    assert not (out / "summary.json").exists()
    # The last good checkpoint is kept: written before the round that diverged.
    kept = checkpoint.latest(out, "asgd")
    assert kept is not None
    chunk = int(kept.name.rsplit("_", 1)[1])
    assert 0 < chunk * 4 < int(found.group(1)), (kept, err[0])

    marked = tmp_path / "mark"
    argv = ["run", str(cfg), "--out", str(marked), "--no-progress", "--set", "on_nonfinite=mark"]
    assert cli.main(argv) == 0
    said = capsys.readouterr().out
    assert "asgd: seed 0 diverged (marked, others go on)" in said
    assert "asgd: diverged seeds [0]" in said
    summary = json.loads((marked / "summary.json").read_text())
    assert summary["asgd"]["diverged_seeds"] == [0]
    rows = list(csv.DictReader((marked / "metrics.csv").open()))
    end = {s: max(float(r["sim_time"]) for r in rows if r["seed"] == s) for s in ("0", "1")}
    assert end["1"] >= 200.0 > end["0"], end  # seed 1 finished its budget, seed 0 froze
    # The diverged seed's evaluation after divergence is NaN, not the 0 of ended episodes.
    last0 = [r for r in rows if r["seed"] == "0"][-1]
    assert last0["eval_return"] in ("", "nan"), last0


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


def test_an_option_no_algorithm_reads_exits_2_before_anything_runs(tmp_path, capsys, monkeypatch):
    """``hparams.impala_batch`` without ``impala`` is a config error (the config's option
    check): one line naming the key and its reader, exit 2, nothing compiled or written."""
    from jaxnigt.run import experiment

    monkeypatch.setattr(experiment, "run_experiment", lambda *a, **k: pytest.fail("it ran"))
    cfg = tmp_path / "one.yaml"
    cfg.write_text(
        TINY.replace("[rennala_nigt, afedpg]", "[rennala_nigt]").replace(
            "per_algorithm: {afedpg: {learning_rate: 0.02}}\n", ""
        )
    )
    out = tmp_path / "out"
    argv = ["run", str(cfg), "--out", str(out), "--set", "hparams.impala_batch=4", "--no-progress"]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: hparams.impala_batch"), err
    assert "impala" in err[0].removeprefix("jaxnigt: error: hparams.impala_batch"), err
    assert captured.out == "" and not out.exists()  # not even the backend line


@pytest.mark.parametrize(
    "trace, message",
    [
        (None, "trace file {path!r} does not exist; a relative trace path is read from the "
         "folder of the config file that gives it, and from the working directory when the "
         "command line gives it"),
        ("2,1,-1\n", "trace {path!r} line 1: speed must be >= 0, got -1.0"),
        ("1,1,0\n2,2,0\n3,5,0\n", "trace {path!r}: every worker is at speed 0 from t = 5 on, "
         "before the budget 40: no gradient could ever finish after it"),
        # was inf in the float32 trace: a run with env_steps_wasted NaN from round 2, exit 0
        ("2,1.5,1e308\n", "trace {path!r} line 1: start and speed must be at most "
         "3.40282e+38 (the trace is float32), got '2,1.5,1e308'"),
    ],
)  # fmt: skip
def test_a_bad_power_trace_stops_the_run_before_anything_runs(
    tmp_path, capsys, monkeypatch, trace, message
):
    """``cluster.power: trace:FILE`` is read when the config is: a bad file is one line
    naming cluster.power, the file and its line, exit 2, nothing run or written."""
    from jaxnigt.run import experiment

    monkeypatch.setattr(experiment, "run_experiment", lambda *a, **k: pytest.fail("it ran"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(TINY)
    path = tmp_path / "trace.csv"
    if trace is not None:
        path.write_text(trace)
    out = tmp_path / "out"
    argv = ["run", str(cfg), "--out", str(out), "--set", f"cluster.power=trace:{path}"]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    expected = f"jaxnigt: error: cluster.power: {message.format(path=str(path))}"
    assert captured.err.strip().splitlines() == [expected]
    assert captured.out == "" and not out.exists()


@pytest.mark.parametrize("command", ["run", "plan", "sweep", "tune"])
@pytest.mark.parametrize(
    "item, message",
    [
        ("budget", "--set: got 'budget'; expected KEY=VALUE, e.g. hparams.eta=0.1"),
        (
            "hparams.eta=[1",
            "--set hparams.eta: value '[1' is not valid YAML (column 3: "
            "expected ',' or ']', but got '<stream end>', while parsing a flow sequence)",
        ),
        ("budget.x=1", "--set budget.x: 'budget' is not a section"),
    ],
)
def test_a_malformed_set_is_named_by_its_flag(tmp_path, capsys, command, item, message):
    """The library names the override; every command that takes ``--set`` puts the flag in
    front."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "out"
    argv = [command, str(cfg), "--set", item]
    argv += [] if command == "plan" else ["--out", str(out)]
    argv += ["--over", "cluster.n=2,3"] if command == "sweep" else []
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"jaxnigt: error: {message}"]
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


@pytest.mark.parametrize("command", [["run", "configs/demo.yaml"], ["list"], ["plot", "x"]])
def test_experiment_commands_without_the_rl_extra(monkeypatch, capsys, command):
    monkeypatch.setattr(cli, "missing_rl_module", lambda: "brax")
    assert cli.main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'brax'" in err[0] and "pip install 'jaxnigt[rl]'" in err[0]


def test_tensorboard_logging(tmp_path):
    pytest.importorskip("tensorboardX")
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY.replace("[rennala_nigt, afedpg]", "[rennala_nigt]"))
    out = tmp_path / "run"
    argv = ["run", str(cfg), "--out", str(out), "--no-progress", "--tensorboard"]
    assert cli.main(argv) == 0
    events = list((out / "tensorboard" / "rennala_nigt").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    assert "tensorboard: true" in (out / "config.yaml").read_text()


#: What a new user tried on a fresh clone: the config file's text (bytes, or a change of
#: TINY), the --set items and how the one line on stderr begins ({cfg}: the file's path).
FRESH_CLONE = {
    "latin-1": (
        "budget: 10\nname: caf\xe9\n".encode("latin-1"),
        [],
        "config: {cfg!r} is not UTF-8 text (byte 0xe9 at offset 20)",
    ),
    "binary": (
        b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
        [],
        "config: {cfg!r} is not UTF-8 text (byte 0x80 at offset 136)",
    ),
    "env: alone": (
        ("env: {name: point_mass}", "env:"),
        [],
        "env: got null (a section with nothing under it)",
    ),
    "--set env=": (None, ["env="], "env: got null (a section with nothing under it)"),
    "--set cluster=null": (None, ["cluster=null"], "cluster: got null"),
    "a repeated key": (
        ("budget: 40.0", "budget: 40.0\nbudget: 20.0"),
        [],
        "config: {cfg!r} is not valid YAML: line 6: duplicate key 'budget' (first set on line 5)",
    ),
    "a negative grid step": (
        None,
        ["grid={learning_rate: [0.1, -1]}"],
        "grid.learning_rate[1]: got -1.0; expected a finite number >= 0",
    ),
    "a misspelt key": (None, ["budgte=3"], "config.budgte: unknown key; did you mean 'budget'?"),
    "a syntax error": (
        ("[rennala_nigt, afedpg]", "[rennala_nigt, afedpg"),
        [],
        "config: {cfg!r} is not valid YAML: line 4, column 6: expected ',' or "
        "']', but got ':', while parsing a flow sequence from line 3",
    ),
}


@pytest.mark.parametrize("case", list(FRESH_CLONE))
def test_a_fresh_clones_bad_input_is_one_line_exit_2_and_nothing_written(
    tmp_path, capsys, monkeypatch, case
):
    text, sets, start = FRESH_CLONE[case]
    cfg = tmp_path / "c.yaml"
    if isinstance(text, bytes):
        cfg.write_bytes(text)
    else:
        cfg.write_text(TINY if text is None else TINY.replace(*text))
    work = tmp_path / "work"  # the run directory would be work/runs/tiny
    work.mkdir()
    monkeypatch.chdir(work)
    argv = ["run", str(cfg), "--no-progress"]
    for item in sets:
        argv += ["--set", item]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("jaxnigt: error: " + start.format(cfg=str(cfg))), err[0]
    assert list(work.iterdir()) == []


def test_a_run_too_large_for_the_device_in_M_is_refused_as_plan_refuses_it(
    tmp_path, capsys, monkeypatch
):
    """n = 3 fits; M = M_init = 10⁶ trajectories a round do not: ``run`` says so in one line
    before anything is written (it was a RESOURCE_EXHAUSTED traceback, and a config.yaml and
    .lock that refused the rerun), and ``plan`` names the same problem."""
    from jaxnigt.run import sizing

    monkeypatch.setattr(sizing, "device_limit", lambda: (8 * 2**30, "the test's limit"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "never"
    sets = ["--set", "hparams.M=1000000", "--set", "hparams.M_init=1e6"]
    assert cli.main(["run", str(cfg), "--out", str(out), *sets]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and not out.exists(), err
    assert err[0].startswith(
        "jaxnigt: error: hparams.M = hparams.M_init = 1,000,000: one step of rennala_nigt "
        "(2 runs; its largest array float32[2,1000000,30,64]) needs at least "
    ), err[0]
    assert re.search(
        r"GiB of the test's limit; the largest hparams.M = hparams.M_init that "
        r"fits is about [1-9][0-9]{2},[0-9]{3}$",
        err[0],
    ), err[0]
    assert cli.main(["plan", str(cfg), "--no-memory", *sets]) == 2
    assert capsys.readouterr().err.strip().splitlines() == err


@pytest.mark.parametrize(
    "error, status",
    [
        (RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 31.7GB."), 2),
        (ValueError("a bug"), None),
    ],
)
@pytest.mark.parametrize("existing", [False, True])
def test_a_run_that_fails_before_its_first_result_leaves_nothing(
    tmp_path, capsys, monkeypatch, error, status, existing
):
    """Its config.yaml and .lock go (and its directory, if the run made it): the same command
    runs again instead of being refused for a directory that is not empty."""
    from jaxnigt.run import experiment

    def fail(*args, **kwargs):
        assert (out / "config.yaml").is_file() and (out / ".lock").is_file()
        raise error

    monkeypatch.setattr(experiment, "_run_one", fail)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "runs" / "tiny"
    if existing:
        out.mkdir(parents=True)
    argv = ["run", str(cfg), "--out", str(out), "--no-progress"]
    if status is None:
        with pytest.raises(ValueError, match="a bug"):
            cli.main(argv)
    else:
        assert cli.main(argv) == status
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert err[0].startswith(
            "jaxnigt: error: out of memory before the first result (RESOURCE_EXHAUSTED: Out "
            "of memory while trying to allocate 31.7GB.): "
        ), err[0]
    if existing:
        assert list(out.iterdir()) == []
    else:
        assert list(tmp_path.iterdir()) == [cfg]


def test_over_values_are_read_as_set_reads_them_and_a_list_is_one_value(tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY.replace("[rennala_nigt, afedpg]", "[rennala_nigt]"))
    over = ["--over", "hparams.learning_rate=1e-3,2.5e-4", "--over", "cluster.n=1e1"]
    assert cli.main(["plan", str(cfg), *over]) == 0
    out = capsys.readouterr().out
    assert "2 points;" in out and "n <= 10," in out, out
    assert "hparams.learning_rate=0.001,cluster.n=10.0;" in out, out
    lists = ["--over", "cluster.h=[1,2,3], [2, 2,2]"]
    assert cli.main(["plan", str(cfg), *lists]) == 0
    out = capsys.readouterr().out
    assert "2 points;" in out and "[cluster.h=[1, 2, 3]]" in out and "[cluster.h=[2, 2, 2]]" in out
    assert cli.main(["plan", str(cfg), "--over", "cluster.h=[1,2,3],[2,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--over cluster.h: value '[2,2' is not valid YAML" in err[0], err
