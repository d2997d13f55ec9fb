"""The run directory on disk: atomic writes, preparing a directory, one writer, resumes.

Result files are never half-written: :func:`atomic_write_text` writes a temporary file in the
same directory and renames it over the target.  :func:`run_lock` keeps a second process off a
run directory.  Errors name paths and reasons, never command-line flags: a command adds the
flag that named the directory (:class:`UnusableDirError` carries the directory).  This module
imports nothing heavier than the config loader, so the checkpoint code and the ``clock``
command can use it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

LOCK = ".lock"
#: The content hash of a run's power trace file (``cluster.power: trace:FILE``), in
#: ``sha256sum``'s format: ``config.yaml`` names the file, this what it held when the run began.
TRACE_RECORD = "trace.sha256"


class RunDirError(OSError):
    """A run directory cannot be used (unwritable, full, in use); the message names the path
    and the reason.  ``started`` tells whether work had begun (a checkpoint may exist)."""

    def __init__(self, message: str, *, started: bool = False):
        super().__init__(message)
        self.message = message
        self.started = started

    def __str__(self) -> str:
        return self.message


class UnusableDirError(RunDirError):
    """The directory itself cannot be used (it cannot be created or written); ``path`` is it,
    so that a caller can say where the directory came from."""

    def __init__(self, path: str | Path, message: str):
        super().__init__(message)
        self.path = Path(path)


class InUseError(UnusableDirError):
    """Another process holds the directory's lock (it is writing there now); ``pid`` is the
    holder's process id as its lock file records it (``?`` when it records none)."""

    def __init__(self, path: str | Path, pid: str, lock: str | Path):
        super().__init__(
            path,
            f"{str(path)!r} is being written by another jaxnigt process (pid {pid}; lock "
            f"{str(lock)!r}); wait for it to end or stop it first",
        )
        self.pid = pid


class NotEmptyError(UnusableDirError, FileExistsError):
    """A fresh run, sweep or tuning was given a directory that holds files."""

    def __init__(self, path: str | Path):
        super().__init__(path, f"{str(path)!r} exists and is not empty")


class NotResumableError(ValueError):
    """A directory to continue does not hold the same work (no run there, or another config);
    ``path`` is the directory."""

    def __init__(self, path: str | Path, message: str):
        super().__init__(message)
        self.path = Path(path)


def describe(error: OSError, path: str | Path | None = None) -> str:
    """``'PATH: reason'`` of a file-system error (one line).  Without ``path``, the file the
    error names (:func:`atomic_write_text` names its target in every error it raises)."""
    where = path if path is not None else (error.filename or "?")
    return f"{str(where)!r}: {error.strerror or error}"


def _holder(fd: int) -> str | None:
    """The pid recorded in the lock file ``fd`` if another open file holds its lock, else
    None (the lock is then left free)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None


def check_not_in_use(out: str | Path) -> None:
    """Raises :class:`InUseError` when a process holds the lock of ``out`` or of a run
    directory inside it (a sweep's point, a tuning's program): it is writing there now, so
    the directory is neither to continue nor to discard."""
    out = Path(out)
    if not out.is_dir():
        return
    for lock in sorted(out.rglob(LOCK)):
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            continue
        try:
            pid = _holder(fd)
        finally:
            os.close(fd)
        if pid is not None:
            raise InUseError(out, pid, lock)


@contextlib.contextmanager
def run_lock(run_dir: str | Path) -> Iterator[None]:
    """Holds an exclusive lock on ``run_dir`` (``fcntl.flock`` of ``run_dir/.lock``, which
    records the holder's pid); a second holder gets :class:`InUseError` naming that pid."""
    path = Path(run_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise RunDirError(f"cannot lock the run directory: {describe(e, path)}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise InUseError(run_dir, holder, path) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


#: The files a run writes in its directory (``jaxnigt.run.experiment``): no other command
#: replaces them (:func:`run_file`).
RUN_FILES = (
    "config.yaml",
    "metrics.csv",
    "worker_counts.csv",
    "summary.json",
    "curves.png",
    "counts.png",
    "checkpoints",
    "tensorboard",
    TRACE_RECORD,
    LOCK,
)


def run_file(path: str | Path) -> bool:
    """Whether ``path`` (a symlink followed) is one of :data:`RUN_FILES` of a run directory
    (a folder that holds a ``config.yaml``)."""
    real = Path(os.path.realpath(path))
    return real.name in RUN_FILES and (real.parent / "config.yaml").is_file()


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(path: str | Path) -> str | None:
    """What ``path``'s target (a symlink followed) is when it exists and is no regular file
    (``a character device``, ...); None when it is one or does not exist."""
    try:
        mode = os.stat(os.path.realpath(path)).st_mode
    except OSError:
        return None  # missing (created), or an error the write itself reports
    return next((words for kind, words in _KINDS if kind(mode)), None)


def not_replaceable(path: str | Path) -> str | None:
    """Why :func:`atomic_write` would refuse ``path`` (None: it would write it), e.g.
    ``'/dev/full' is a character device, not a regular file``."""
    kind = _kind(path)
    return None if kind is None else f"{str(path)!r} is {kind}, not a regular file"


def atomic_write(path: str | Path, write: Callable[[str], None]) -> None:
    """Calls ``write(tmp)`` to write a temporary file in the directory of ``path``'s target,
    then renames it over the target (``os.replace``): it is never half-written, and a failed
    write leaves no temporary file.  The result gets the permissions a plain ``open()``
    would give it.  The target is ``path``, or for a symlink the file it points to (written
    through the link, which stays); one that exists and is no regular file (a device, a
    pipe, a directory) is refused, never replaced (:func:`not_replaceable`).

    Raises:
      OSError: naming ``path`` as its ``filename`` (not the temporary file; also when the
        failing call names no file, as a write to a full disk does).
    """
    path = Path(path)
    try:
        _atomic_write(path, write)
    except OSError as e:
        e.filename, e.filename2 = str(path), None
        raise


def _atomic_write(path: Path, write: Callable[[str], None]) -> None:
    kind = _kind(path)
    if kind is not None:  # renaming over it would replace the device, pipe or folder itself
        raise OSError(errno.EINVAL, f"it is {kind}, not a regular file")
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        # mkstemp creates 0600; give the result the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Writes ``text`` to ``path`` through :func:`atomic_write` (never half-written; an
    ``OSError`` names ``path``)."""

    def write(tmp: str) -> None:
        with open(tmp, "w", newline="") as f:
            f.write(text)

    atomic_write(path, write)


def writable_dir(out: str | Path, *, create: bool = True) -> Path:
    """Creates ``out`` (and its parents) if needed and checks that it can be written;
    ``create=False``: ``out`` must exist already (a directory to continue).

    Raises:
      UnusableDirError: ``out`` cannot be created or written (one line: path and reason).
    """
    out = Path(out)
    if not create and not out.is_dir():
        raise UnusableDirError(out, f"{str(out)!r}: no such directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UnusableDirError(out, describe(e, out)) from None
    if not os.access(out, os.W_OK):
        raise UnusableDirError(out, f"{str(out)!r}: not writable")
    return out


def prepare_run_dir(out: str | Path, overwrite: bool = False) -> Path:
    """Creates ``out`` for fresh work; refuses a directory that holds files (other than a
    lock) unless ``overwrite``.

    Raises:
      InUseError: another process is writing in ``out`` (with ``overwrite`` too).
      NotEmptyError: ``out`` holds files and ``overwrite`` is False.
      UnusableDirError: ``out`` cannot be created or written.
    """
    out = Path(out)
    check_not_in_use(out)
    if not overwrite and out.is_dir() and any(p.name != LOCK for p in out.iterdir()):
        raise NotEmptyError(out)
    return writable_dir(out)


def trace_digest(config) -> tuple[str, str] | None:
    """``(path, sha256)`` of the power trace file ``config`` reads (None: no trace file).

    Raises:
      OSError: the file cannot be read."""
    import hashlib

    from jaxnigt.cluster import power_sources

    path = power_sources.trace_file(config.cluster.power)
    if path is None:
        return None
    return path, hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_trace_record(config, run_dir: str | Path) -> None:
    """Writes ``run_dir/trace.sha256`` (:data:`TRACE_RECORD`) for a config with a trace
    file; removes a stale one otherwise."""
    digest = trace_digest(config)
    record = Path(run_dir) / TRACE_RECORD
    if digest is None:
        record.unlink(missing_ok=True)
    else:
        atomic_write_text(record, f"{digest[1]}  {digest[0]}\n")


def recorded_trace(run_dir: str | Path) -> str | None:
    """The sha256 that ``run_dir/trace.sha256`` records (None: no record, a run without a
    trace file or from before the record)."""
    record = Path(run_dir) / TRACE_RECORD
    try:
        return record.read_text().split()[0]
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def check_resumable(config, run_dir: str | Path) -> None:
    """Raises :class:`NotResumableError` unless ``run_dir`` holds a run of exactly this
    config (``ConfigError`` if its ``config.yaml`` is not a valid config) whose power trace
    file, if it has one, holds what it held when the run began (:data:`TRACE_RECORD`)."""
    from jaxnigt import config as config_lib

    run_dir = Path(run_dir)
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise NotResumableError(
            run_dir, f"{str(run_dir)!r} is not a run directory (no config.yaml)"
        )
    previous = config_lib.from_dict(config_lib.read_yaml(path))
    if previous != config:
        old, new = previous.to_dict(), config.to_dict()
        differs = sorted(k for k in new if old.get(k) != new.get(k))
        raise NotResumableError(
            run_dir,
            f"{str(run_dir)!r} was written by a different config "
            f"(differs in: {', '.join(differs)})",
        )
    recorded, digest = recorded_trace(run_dir), trace_digest(config)
    if recorded is not None and digest is not None and recorded != digest[1]:
        raise NotResumableError(
            run_dir,
            f"the power trace {digest[0]!r} changed since the run in {str(run_dir)!r} began "
            f"(sha256 {recorded[:16]} then, as its {TRACE_RECORD} records; {digest[1][:16]} "
            "now): restore the file it began with, or start the run afresh",
        )
