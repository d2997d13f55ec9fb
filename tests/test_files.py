"""Tests for jaxnigt.run.run_dir: atomic writes, run-directory preparation, resumability checks."""

import os
import stat

import pytest

from jaxnigt import config as config_lib
from jaxnigt.run import run_dir as files


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "x.txt"
    files.atomic_write_text(p, "one")
    files.atomic_write_text(p, "two")
    assert p.read_text() == "two"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    assert [f.name for f in tmp_path.iterdir()] == ["x.txt"]


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    with pytest.raises(TypeError):
        files.atomic_write_text(tmp_path / "y.txt", object())  # not text: write fails
    assert list(tmp_path.iterdir()) == []


def test_prepare_run_dir(tmp_path):
    out = tmp_path / "run"
    assert files.prepare_run_dir(out) == out and out.is_dir()
    (out / "metrics.csv").write_text("x")
    with pytest.raises(files.NotEmptyError, match="exists and is not empty") as caught:
        files.prepare_run_dir(out)
    assert caught.value.path == out and not caught.value.started
    assert isinstance(caught.value, FileExistsError)
    files.prepare_run_dir(out, overwrite=True)


def test_writable_dir(tmp_path, monkeypatch):
    missing = tmp_path / "a" / "b"
    with pytest.raises(files.UnusableDirError, match="no such directory") as caught:
        files.writable_dir(missing, create=False)
    assert caught.value.path == missing and not missing.exists()
    assert files.writable_dir(missing) == missing and missing.is_dir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if p == missing else real(p, m))
    with pytest.raises(files.UnusableDirError, match="not writable"):
        files.writable_dir(missing)


def test_check_resumable(tmp_path):
    cfg = config_lib.from_dict({"env": {"name": "point_mass"}, "budget": 10.0})
    with pytest.raises(files.NotResumableError, match="not a run directory") as caught:
        files.check_resumable(cfg, tmp_path)
    assert caught.value.path == tmp_path
    files.atomic_write_text(tmp_path / "config.yaml", config_lib.dump(cfg))
    files.check_resumable(cfg, tmp_path)
    other = config_lib.from_dict({"env": {"name": "point_mass"}, "budget": 20.0, "seeds": 2})
    with pytest.raises(files.NotResumableError, match="differs in: budget, seeds"):
        files.check_resumable(other, tmp_path)
