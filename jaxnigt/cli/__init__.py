"""The ``jaxnigt`` command: ``run``, ``sweep``, ``tune``, ``compare``, ``plan``, ``plot``,
``list`` and ``clock``.

Errors in user input (bad config values, bad flags, an existing run directory) print one
line naming the problem and exit with status 2, before anything is written.  ``--plugin
MODULE`` (repeatable, anywhere on the line) loads a user's module that registers rules,
algorithms or environments before the command is read (:mod:`jaxnigt.plugins`; so do a
config's ``plugins:`` key and ``$JAXNIGT_PLUGINS``).  The commands
live by concept: :mod:`~jaxnigt.cli.run` (``run``), :mod:`~jaxnigt.cli.grids` (``sweep``,
``tune``), :mod:`~jaxnigt.cli.reports` (``plan``, ``plot``, ``compare``, ``list``) and
:mod:`jaxnigt.cli.clock`; :mod:`~jaxnigt.cli.common` turns library errors into the command
line's words.  A config argument is a file or the name of a bundled config
(:mod:`jaxnigt.config.bundled`).  ``jaxnigt --version`` prints ``jaxnigt.__version__``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import jaxnigt
from jaxnigt.cli import common, grids, reports, run
from jaxnigt.cli.common import EXIT_USAGE, error

__all__ = ["EXIT_USAGE", "build_parser", "main", "missing_rl_module"]

#: What the experiment commands import beyond the core (the ``rl`` extra).
RL_MODULES = ("yaml", "flax", "mujoco", "brax", "matplotlib", "tqdm", "orbax.checkpoint")
RL_INSTALL = "pip install 'jaxnigt[rl]'"
#: The commands that need the ``rl`` extra; those that compile (the GPU flags, the cache).
EXPERIMENT_COMMANDS = ("run", "sweep", "plot", "list", "plan", "tune", "compare")
COMPILING_COMMANDS = ("run", "sweep", "plan", "tune")


def missing_rl_module() -> str | None:
    """The first module of the ``rl`` extra that cannot be imported (None if all can)."""
    import importlib.util

    for name in RL_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except ModuleNotFoundError:
            return name
    return None


#: Flags whose value may begin with a minus sign (``--lr-exp -6:-5``, ``--lr-exp -8,-6``).
NEGATIVE_VALUE_FLAGS = ("--lr-exp",)
_NEGATIVE = re.compile(r"-[0-9.]")


def join_negative_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``FLAG VALUE`` written ``FLAG=VALUE`` where FLAG is one of
    :data:`NEGATIVE_VALUE_FLAGS` and VALUE begins with a minus sign and a digit: argparse
    takes such a VALUE (``-6:-5``, unlike a plain ``-6``) for an option and fails with
    "expected one argument", so both spellings the help shows work."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in NEGATIVE_VALUE_FLAGS and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that also reads ``--lr-exp -6:-5``
    (:func:`join_negative_values`), takes no abbreviated flag (``--seed 3`` is an error,
    never ``--seeds 3``) and says a usage error in one line (``-h`` shows the usage).
    Subcommands' parsers are of this class too (argparse's ``add_subparsers`` makes its
    parsers of the parent's class), so none abbreviates."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else args
        return super().parse_known_args(join_negative_values(args), namespace)


def build_parser() -> argparse.ArgumentParser:
    from jaxnigt.cli import clock

    parser = Parser(
        prog="jaxnigt",
        description="Asynchronous distributed policy-gradient RL on a simulated cluster.",
    )
    parser.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="load a module (a name or a .py path) that registers rules, algorithms or "
        "environments; repeatable, anywhere on the line (also: a config's plugins: key, "
        "$JAXNIGT_PLUGINS)",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"jaxnigt {jaxnigt.__version__}",
        help="print the version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run.add_parser(sub)
    grids.add_sweep_parser(sub)
    grids.add_tune_parser(sub)
    reports.add_parsers(sub)
    clock.add_parser(sub)
    return parser


def enable_compilation_cache() -> None:
    """Persistent XLA cache (``$JAXNIGT_CACHE_DIR``, default ``~/.cache/jaxnigt/xla``).

    MJX programs take tens of seconds to compile on a CPU; the cache makes a second run of
    the same shapes start in about a second. Set ``JAXNIGT_CACHE_DIR=`` (empty) to disable.
    """
    import os

    import jax

    path = os.environ.get("JAXNIGT_CACHE_DIR", str(Path.home() / ".cache" / "jaxnigt" / "xla"))
    if path and jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def _quiet_closed_loops(unraisable) -> None:
    """sys.unraisablehook: orbax's background event loops may report 'Event loop is closed'
    after a failed checkpoint write, which the run already reported in one line."""
    if isinstance(unraisable.exc_value, RuntimeError) and "Event loop is closed" in str(
        unraisable.exc_value
    ):
        return
    sys.__unraisablehook__(unraisable)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """warnings.showwarning: a config's warning (``config.ConfigWarning``) is one line."""
    if category.__name__ == "ConfigWarning":
        print(f"[jaxnigt] warning: {message}", file=sys.stderr, flush=True)
        return
    _DEFAULT_SHOWWARNING(message, category, filename, lineno, file, line)


_DEFAULT_SHOWWARNING = warnings.showwarning


def flag_problem(args: argparse.Namespace) -> str | None:
    """Flags that contradict each other or that JAX would fail on deep inside: one line
    naming them, before anything starts (None when there is none)."""
    if getattr(args, "resume", None) and getattr(args, "overwrite", False):
        return (
            "--resume and --overwrite contradict each other: --resume continues the work in "
            "the directory, --overwrite discards it and starts afresh; give one"
        )
    coordinator = getattr(args, "coordinator", None)
    from_env = os.environ.get("JAX_COORDINATOR_ADDRESS")
    if coordinator is None and getattr(args, "distributed", False) and from_env:
        coordinator, flag = from_env, "JAX_COORDINATOR_ADDRESS"
    else:
        flag = "--coordinator"
    if coordinator is not None:
        from jaxnigt.run import distributed

        if problem := distributed.coordinator_problem(coordinator):
            return f"{flag}: {problem}"
    return None


def take_plugins(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(plugins, rest)``: the values of every ``--plugin MODULE`` / ``--plugin=MODULE`` of
    ``argv`` and the other arguments."""
    plugins, rest, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--plugin" and i + 1 < len(argv):
            plugins.append(argv[i + 1])
            i += 2
            continue
        if argv[i].startswith("--plugin="):
            plugins.append(argv[i].split("=", 1)[1])
        else:
            rest.append(argv[i])
        i += 1
    return plugins, rest


def main(argv: list[str] | None = None) -> int:
    sys.unraisablehook = _quiet_closed_loops
    warnings.showwarning = _show_warning
    if hasattr(signal, "SIGXFSZ"):  # a file-size limit then fails a write instead of killing
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    from jaxnigt import plugins

    given, argv = take_plugins(list(sys.argv[1:] if argv is None else argv))
    try:  # before the parser: a plugin's rules are --rule choices
        plugins.load_environment()
        plugins.load(given)
    except plugins.PluginError as e:
        return error(str(e))
    parser = build_parser()
    args = parser.parse_args(argv)
    # the command as given (a sweep records it to be run again), its plugins first
    args.argv = [*(f"--plugin={m}" for m in given), *join_negative_values(argv)]
    if problem := flag_problem(args):
        return error(problem)
    if args.command in EXPERIMENT_COMMANDS:
        missing = missing_rl_module()
        if missing:
            return error(
                f"`jaxnigt {args.command}` needs the experiment extra (module {missing!r} is "
                f"missing); install it with: {RL_INSTALL}"
            )
    if args.command in COMPILING_COMMANDS:
        from jaxnigt.run import devices

        args.xla_flags = devices.apply_gpu_flags()  # before any JAX backend starts
    if args.command in (*COMPILING_COMMANDS, "clock"):
        enable_compilation_cache()
    with contextlib.ExitStack() as stack:
        if isinstance(getattr(args, "config", None), str):
            args.config_given = args.config
            args.config = common.resolve_config(args.config, stack)
        return int(args.func(args) or 0)
