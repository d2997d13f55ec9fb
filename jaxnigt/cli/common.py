"""What the commands share: one-line errors and exit statuses, the flag names added to library
errors, config names, and the lines a command prints before it starts.

Library errors name paths, fields and reasons, never flags: a command knows which flag named
the directory or value at fault and adds it here (:func:`dir_problem` for run directories,
:func:`flagged` for ``--set`` overrides and the parameters a typed error names).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

EXIT_USAGE = 2


def error(message: str) -> int:
    """Prints ``jaxnigt: error: MESSAGE`` (one line) and returns the usage exit status."""
    print(f"jaxnigt: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def dir_problem(
    e: Exception, flag: str, named: str | Path | None = None, resume: str = "--resume DIR"
) -> str:
    """The message of a run-directory error with the command line's words: the flag that
    named the directory (when the error is about that directory, ``named``; any directory
    when None), and what to pass to reuse a directory that holds files: to continue work
    that stopped there (``resume``, the command's flag; ``DIR`` stands for the directory),
    or to discard it."""
    from jaxnigt.run.run_dir import NotEmptyError, NotResumableError, UnusableDirError

    text = str(e)
    if isinstance(e, NotResumableError):
        return f"--resume: {text}"
    if isinstance(e, UnusableDirError) and (named is None or e.path == Path(named)):
        text = f"{flag} {text}"
    if isinstance(e, NotEmptyError):
        if unfinished(e.path):
            again = resume.replace("DIR", str(e.path))
            text += (
                f"; it holds work that stopped before the end: continue it with {again}, or "
                "pass --overwrite to discard it and start afresh"
            )
        else:
            text += "; pass --overwrite to reuse it"
    return text


def unfinished(path: Path) -> bool:
    """Whether ``path`` holds a run, sweep or tuning that began but did not finish (its
    record is there, its results are not all)."""
    from jaxnigt.run import checkpoint

    if (path / "config.yaml").is_file():  # a run directory
        try:
            return not checkpoint.finished(path)
        except Exception:  # an unreadable config: not a run to continue
            return False
    for record, result in (("sweep.json", "sweep.csv"), ("tune.json", "tuned.yaml")):
        if (path / record).is_file():
            return not (path / result).is_file()
    return False


def flagged(e: Exception, flags: Mapping[str, str] | None = None) -> str:
    """The message of a library error with the flag that gave the value at fault.

    A malformed override (``config.OverrideError``, which names the override) gets ``--set``
    in front: ``--set: got ...`` when it names no key, ``--set KEY: ...`` when it does.  An
    error naming a parameter (``param`` and ``reason``, as ``tuning.TuningError``,
    ``analysis.AnalysisError`` and ``plotting.PlotError`` carry them) that ``flags`` maps to a
    flag reads ``FLAG: reason``.  Any other error's message is kept.
    """
    from jaxnigt import config as config_lib

    text = str(e)
    if isinstance(e, config_lib.OverrideError):
        return f"--set: {text}" if text.startswith("got ") else f"--set {text}"
    param = getattr(e, "param", None)
    if param is not None and param in (flags or {}):
        return f"{flags[param]}: {e.reason}"
    return text


def stopped(
    command: str, e: Exception, flag: str = "--out", named=None, resume: str = "--resume DIR"
) -> int:
    """A run-directory or checkpoint failure: a usage error (exit 2) before any work started,
    else one line saying the command stopped with its last checkpoint kept (exit 1)."""
    if not getattr(e, "started", False):
        return error(dir_problem(e, flag, named, resume))
    print(f"jaxnigt: {command} stopped: {e} (the last checkpoint is kept)", file=sys.stderr)
    return 1


def resolve_config(name: str, stack) -> str:
    """The path of the config ``name``: a file, or else a bundled config of that name
    (:mod:`jaxnigt.config.bundled`; kept readable while ``stack`` is open); unchanged if neither
    (the loader then says it cannot read it)."""
    from importlib import resources

    from jaxnigt.config import bundled

    if Path(name).is_file():
        return name
    found = bundled.find(name)
    return str(stack.enter_context(resources.as_file(found))) if found is not None else name


def gpu_sized_note(config_path: str) -> str | None:
    """The CPU alternative named by a config's ``# gpu-sized: ...`` header line, if any."""
    try:
        lines = Path(config_path).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("# gpu-sized:"):
            return line.removeprefix("# gpu-sized:").strip()
    return None


def announce(args: argparse.Namespace) -> None:
    """The backend line, and a warning when a GPU-sized config runs on a CPU."""
    import jax

    from jaxnigt.run import devices

    print(devices.backend_line(getattr(args, "xla_flags", "none")), flush=True)
    note = gpu_sized_note(args.config)
    if note and jax.default_backend() == "cpu":
        print(f"[jaxnigt] warning: {args.config} is sized for a GPU; {note}", flush=True)


def add_set(parser: argparse.ArgumentParser, help: str = "as for run") -> None:
    """The repeatable ``--set KEY=VALUE`` config override."""
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help=help)
