"""Tests for jaxnigt.run.run_dir: atomic writes, run-directory preparation, resumability checks."""

import os
import stat

import pytest

from jaxnigt import config as config_lib
from jaxnigt.run import run_dir


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "x.txt"
    run_dir.atomic_write_text(p, "one")
    run_dir.atomic_write_text(p, "two")
    assert p.read_text() == "two"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    assert [f.name for f in tmp_path.iterdir()] == ["x.txt"]


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    with pytest.raises(TypeError):
        run_dir.atomic_write_text(tmp_path / "y.txt", object())  # not text: write fails
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError) as caught:  # the error names the target
        run_dir.atomic_write_text(tmp_path / "no" / "y.txt", "x")
    assert caught.value.filename == str(tmp_path / "no" / "y.txt")


def test_a_failed_write_names_its_file(tmp_path):
    """A write that fails without naming a file (a full disk, here a file-size limit: the
    same write(2) failure) names the target, never '?' or the temporary file."""
    import subprocess
    import sys

    code = (
        "import resource, signal, sys\n"
        "from jaxnigt.run import run_dir\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))\n"
        "try:\n"
        "    run_dir.atomic_write_text(sys.argv[1], 'x' * 100_000)\n"
        "except OSError as e:\n"
        "    print(run_dir.describe(e))\n"
    )
    target = tmp_path / "metrics.csv"
    said = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert said.strip() == f"{str(target)!r}: File too large"
    assert list(tmp_path.iterdir()) == []


def test_a_run_directory_being_written_is_refused_even_with_overwrite(tmp_path):
    """Another process writes there (it holds the lock): neither to continue nor to discard;
    a sweep or tuning directory holding such a run directory is refused as well."""
    out = tmp_path / "sweep" / "point"
    out.mkdir(parents=True)
    (out / "config.yaml").write_text("name: x\n")
    with run_dir.run_lock(out):  # another open file of the lock: flock tells them apart
        for where, overwrite in ((out, False), (out, True), (tmp_path / "sweep", True)):
            with pytest.raises(run_dir.InUseError) as caught:
                run_dir.prepare_run_dir(where, overwrite)
            assert str(caught.value) == (
                f"{str(where)!r} is being written by another jaxnigt process (pid {os.getpid()}; "
                f"lock {str(out / run_dir.LOCK)!r}); wait for it to end or stop it first"
            )
            assert caught.value.path == where and caught.value.pid == str(os.getpid())
    assert run_dir.prepare_run_dir(out, overwrite=True) == out  # the lock is free again


def test_prepare_run_dir(tmp_path):
    out = tmp_path / "run"
    assert run_dir.prepare_run_dir(out) == out and out.is_dir()
    (out / "metrics.csv").write_text("x")
    with pytest.raises(run_dir.NotEmptyError, match="exists and is not empty") as caught:
        run_dir.prepare_run_dir(out)
    assert caught.value.path == out and not caught.value.started
    assert isinstance(caught.value, FileExistsError)
    run_dir.prepare_run_dir(out, overwrite=True)


def test_writable_dir(tmp_path, monkeypatch):
    missing = tmp_path / "a" / "b"
    with pytest.raises(run_dir.UnusableDirError, match="no such directory") as caught:
        run_dir.writable_dir(missing, create=False)
    assert caught.value.path == missing and not missing.exists()
    assert run_dir.writable_dir(missing) == missing and missing.is_dir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if p == missing else real(p, m))
    with pytest.raises(run_dir.UnusableDirError, match="not writable"):
        run_dir.writable_dir(missing)


def test_check_resumable(tmp_path):
    cfg = config_lib.from_dict({"env": {"name": "point_mass"}, "budget": 10.0})
    with pytest.raises(run_dir.NotResumableError, match="not a run directory") as caught:
        run_dir.check_resumable(cfg, tmp_path)
    assert caught.value.path == tmp_path
    run_dir.atomic_write_text(tmp_path / "config.yaml", config_lib.dump(cfg))
    run_dir.check_resumable(cfg, tmp_path)
    other = config_lib.from_dict({"env": {"name": "point_mass"}, "budget": 20.0, "seeds": 2})
    with pytest.raises(run_dir.NotResumableError, match="differs in: budget, seeds"):
        run_dir.check_resumable(other, tmp_path)


def test_a_trace_file_changed_since_the_run_began_is_not_resumed(tmp_path, capsys):
    """``config.yaml`` names the trace file only: one edited between an interrupt and
    ``--resume`` was used without a word.  ``trace.sha256`` records its content; a resume
    that finds other content is refused in one line, exit 2, nothing written."""
    import yaml

    from jaxnigt import cli

    trace = tmp_path / "down.csv"
    trace.write_text("worker,start,speed\n2,1.5,0\n2,6,1\n")
    raw = {"env": {"name": "point_mass"}, "budget": 10.0, "cluster": {"n": 4}}
    raw["cluster"]["power"] = f"trace:{trace}"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    cfg = config_lib.load(tmp_path / "c.yaml")
    out = tmp_path / "run"
    out.mkdir()
    run_dir.atomic_write_text(out / "config.yaml", config_lib.dump(cfg))
    run_dir.write_trace_record(cfg, out)
    digest = run_dir.trace_digest(cfg)[1]
    assert (out / run_dir.TRACE_RECORD).read_text() == f"{digest}  {trace}\n"
    run_dir.check_resumable(cfg, out)
    trace.write_text("worker,start,speed\n2,1.5,0\n2,9,1\n")
    with pytest.raises(run_dir.NotResumableError, match="changed since the run"):
        run_dir.check_resumable(cfg, out)
    before = sorted(p.name for p in out.iterdir())
    assert cli.main(["run", str(tmp_path / "c.yaml"), "--resume", str(out)]) == 2
    now = run_dir.trace_digest(cfg)[1]
    assert capsys.readouterr().err.strip().splitlines() == [
        f"jaxnigt: error: --resume: the power trace {str(trace)!r} changed since the run in "
        f"{str(out)!r} began (sha256 {digest[:16]} then, as its trace.sha256 records; "
        f"{now[:16]} now): restore the file it began with, or start the run afresh"
    ]
    assert sorted(p.name for p in out.iterdir()) == before
    # a config without a trace file: a fresh run removes a stale record
    plain = config_lib.from_dict({"env": {"name": "point_mass"}, "budget": 10.0})
    run_dir.write_trace_record(plain, out)
    assert not (out / run_dir.TRACE_RECORD).exists() and run_dir.recorded_trace(out) is None


def test_an_atomic_write_renames_over_nothing_but_a_regular_file(tmp_path):
    """The write-then-rename replaced a symlink (not its target), a named pipe and, as root,
    a device node (``--out /dev/full``) with a regular file.  A symlink is written through,
    the link kept; a device, a pipe or a folder is refused, left as it was."""
    target = tmp_path / "target.csv"
    link = tmp_path / "link.csv"
    link.symlink_to(target.name)
    run_dir.atomic_write_text(link, "one")  # a dangling link: its target is created
    run_dir.atomic_write_text(link, "two")
    assert link.is_symlink() and os.readlink(link) == "target.csv"
    assert target.read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "target.csv"]
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    device = tmp_path / "null"
    device.symlink_to("/dev/null")  # through a link: a failing test never touches /dev
    for path, kind in ((pipe, "a named pipe"), (device, "a character device")):
        assert run_dir.not_replaceable(path) == f"{str(path)!r} is {kind}, not a regular file"
        with pytest.raises(OSError) as caught:
            run_dir.atomic_write_text(path, "x")
        assert caught.value.filename == str(path)
        assert caught.value.strerror == f"it is {kind}, not a regular file"
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and device.is_symlink()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert run_dir.not_replaceable(target) is None
    assert run_dir.not_replaceable(tmp_path / "new.csv") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "link.csv",
        "null",
        "pipe",
        "target.csv",
    ]


def test_a_run_directorys_own_files_are_known(tmp_path):
    from jaxnigt.run import experiment

    assert set(experiment.RUN_OUTPUTS) <= set(run_dir.RUN_FILES)
    assert not run_dir.run_file(tmp_path / "summary.json")  # no run directory here
    (tmp_path / "config.yaml").write_text("name: x\n")
    assert run_dir.run_file(tmp_path / "summary.json")
    assert not run_dir.run_file(tmp_path / "compare.json")
    (tmp_path / "elsewhere.json").symlink_to("summary.json")
    assert run_dir.run_file(tmp_path / "elsewhere.json")
