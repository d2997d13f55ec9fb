"""``jaxnigt run``: one experiment config into a run directory (or continue one)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from jaxnigt.cli.common import add_set, announce, dir_problem, error, flagged, stopped


def add_parser(sub) -> None:
    run = sub.add_parser("run", help="run an experiment config and write a run directory")
    run.add_argument("config", help="YAML config: a file, or a bundled one's name (jaxnigt list)")
    run.add_argument("--seeds", type=int, help="number of seeds (overrides the config)")
    run.add_argument("--out", help="run directory (default runs/<config name>)")
    add_set(
        run,
        "override a config value, e.g. --set budget=500 --set hparams.eta=0.1 "
        "--set algorithms=[rennala_nigt,afedpg] (repeatable; VALUE is YAML)",
    )
    run.add_argument("--overwrite", action="store_true", help="reuse an existing run directory")
    run.add_argument(
        "--resume",
        metavar="DIR",
        help="continue an interrupted run in DIR (same config and overrides) from its checkpoints",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--tensorboard",
        action="store_true",
        help="also log every chunk's scalars for TensorBoard (needs jaxnigt[tb])",
    )
    dist = run.add_argument_group(
        "multiple processes (one per host; see docs/howto/devices_and_hosts.md)"
    )
    dist.add_argument("--coordinator", metavar="HOST:PORT", help="jax.distributed coordinator")
    dist.add_argument("--num-processes", type=int, metavar="N", help="number of processes")
    dist.add_argument("--process-id", type=int, metavar="I", help="this process's index")
    dist.add_argument(
        "--distributed",
        action="store_true",
        help="initialize jax.distributed from the environment (SLURM, JAX_COORDINATOR_ADDRESS)",
    )
    run.set_defaults(func=command)


def init_distributed(args: argparse.Namespace) -> str | None:
    """Starts jax.distributed when asked to; returns an error message for bad flags."""
    given = [args.coordinator, args.num_processes, args.process_id]
    if not args.distributed and all(v is None for v in given):
        return None
    if not args.distributed and any(v is None for v in given):
        return "--coordinator, --num-processes and --process-id go together"
    if args.num_processes is not None and args.num_processes < 1:
        return f"--num-processes: got {args.num_processes}; expected an integer >= 1"
    if args.process_id is not None and not 0 <= args.process_id < (args.num_processes or 1):
        return f"--process-id: got {args.process_id}; expected 0 <= I < --num-processes"
    from jaxnigt.run import distributed

    distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    return None


def resume_command(args: argparse.Namespace, out: Path) -> str:
    """The exact command that continues this run (same config and overrides)."""
    parts = ["jaxnigt", "run", getattr(args, "config_given", args.config), "--resume", str(out)]
    for item in args.set or []:
        parts += ["--set", item]
    if args.seeds is not None:
        parts += ["--seeds", str(args.seeds)]
    if getattr(args, "tensorboard", False):
        parts.append("--tensorboard")
    return shlex.join(parts)


def load_config(args: argparse.Namespace):
    """The config with the command line's overrides (raises ConfigError)."""
    from jaxnigt import config as config_lib

    overrides = list(args.set or [])
    if args.seeds is not None:
        overrides.append(f"seeds={args.seeds}")
    if args.tensorboard:
        overrides.append("tensorboard=true")
    cfg = config_lib.load(args.config, overrides)
    if cfg.tensorboard and importlib.util.find_spec("tensorboardX") is None:
        raise config_lib.ConfigError(
            "tensorboard: needs tensorboardX; install it with: pip install 'jaxnigt[tb]'"
        )
    return cfg


def run_dir(args: argparse.Namespace, cfg) -> Path:
    """The run directory: one to continue is checked to hold a run of ``cfg``; a fresh one
    is prepared (created, checked writable, refused if it holds files without --overwrite)."""
    from jaxnigt import config as config_lib
    from jaxnigt.run.distributed import is_writer
    from jaxnigt.run.run_dir import check_resumable, prepare_run_dir

    if args.resume:
        if args.out and Path(args.out) != Path(args.resume):
            raise config_lib.ConfigError("--out and --resume name different directories; give one")
        out = Path(args.resume)
        check_resumable(cfg, out)
        return out
    out = fresh_dir(args, cfg)
    if is_writer():
        prepare_run_dir(out, args.overwrite)
    return out


def fresh_dir(args: argparse.Namespace, cfg) -> Path:
    """The directory of a fresh run: ``--out``, else ``runs/<config name>``."""
    return Path(args.out) if args.out else Path("runs") / cfg.name


class Leftovers:
    """What a fresh run adds to ``out`` before its first result: the directory (and the
    parents it creates), ``config.yaml`` and the lock. :meth:`remove` takes them away again
    when the run stopped before writing any result (``experiment.RUN_OUTPUTS``), so that a
    rerun of the same command is not refused for a directory that holds nothing but them.
    Made before the directory is prepared."""

    def __init__(self, out: Path):
        self.out = out
        self.top = None  # the highest directory that does not exist yet
        for p in (out, *out.parents):
            if p.exists():
                break
            self.top = p
        self.before = {p.name for p in out.iterdir()} if out.is_dir() else set()
        self.removed = False

    def remove(self) -> bool:
        """Removes them unless a result was written; returns (and keeps in ``removed``)
        whether it did."""
        from jaxnigt.run.experiment import RUN_OUTPUTS

        if any((self.out / name).exists() for name in RUN_OUTPUTS):
            return False
        self.removed = True
        if not self.out.is_dir():
            return True
        for p in list(self.out.iterdir()):
            if p.name == "config.yaml" or p.name not in self.before:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
        if self.top is not None:
            for p in (self.out, *self.out.parents):
                with contextlib.suppress(OSError):
                    p.rmdir()
                if p == self.top:
                    break
        return True


@contextlib.contextmanager
def removed_unless_started(leftovers: Leftovers | None) -> Iterator[None]:
    """An exception out of the block first removes ``leftovers`` (:meth:`Leftovers.remove`:
    only if no result was written), but for a run-directory error: the directory may be
    another process's (its lock refused this one), or this one could not write it."""
    from jaxnigt.run.run_dir import RunDirError

    try:
        yield
    except RunDirError:
        raise
    except BaseException:
        if leftovers is not None:
            with contextlib.suppress(OSError):
                leftovers.remove()
        raise


def out_of_memory(e: BaseException) -> str | None:
    """The line of an XLA out-of-memory error (``RESOURCE_EXHAUSTED``), else None."""
    for line in str(e).splitlines():
        if "RESOURCE_EXHAUSTED" in line:
            return " ".join(line.split())[:300]
    return None


def _print_summary(out: Path, summary: dict) -> None:
    print(f"[jaxnigt] wrote {out}/metrics.csv, summary.json, curves.png")
    for name, entry in summary.items():
        final = entry["final_median_return"]
        line = f"  {name:<14} final median eval return {final:10.3f}" if final is not None else name
        if entry.get("time_to_target") is not None:
            line += f"   time to target {entry['time_to_target']:.1f}"
        print(line)


def command(args: argparse.Namespace) -> int:
    from jaxnigt import config as config_lib
    from jaxnigt.run import checkpoint, experiment, plan, signals, sizing
    from jaxnigt.run.distributed import is_writer
    from jaxnigt.run.loop import RunError
    from jaxnigt.run.run_dir import NotResumableError, RunDirError

    problem = init_distributed(args)
    if problem:
        return error(problem)
    flag = "--resume" if args.resume else "--out"
    leftovers = None
    try:
        cfg = load_config(args)
        notes = plan.preflight(cfg)  # before anything of size n is built or written
        if not args.resume and is_writer():
            leftovers = Leftovers(fresh_dir(args, cfg))
        out = run_dir(args, cfg)
    except config_lib.ConfigError as e:
        return error(flagged(e))
    except sizing.SizeError as e:
        return error(str(e))
    except (NotResumableError, RunDirError) as e:
        return error(dir_problem(e, flag))
    for note in notes:
        print(f"[jaxnigt] warning: {note}", file=sys.stderr, flush=True)
    if is_writer():
        announce(args)
    try:
        # A run that stops before its first result leaves nothing behind (a rerun would be
        # refused for a directory holding only its config.yaml).
        with signals.stop_on_signals() as stop, removed_unless_started(leftovers):
            summary = experiment.run_experiment(
                cfg, out, resume=bool(args.resume), progress=not args.no_progress, stop=stop
            )
    except signals.Interrupted as e:
        print(f"jaxnigt: {e}; checkpoint and partial results written to {out}.", file=sys.stderr)
        print(f"jaxnigt: continue with: {resume_command(args, out)}", file=sys.stderr)
        return e.exit_status
    except config_lib.ConfigError as e:
        return error(str(e))
    except checkpoint.CheckpointError as e:
        return error(f"{e}; rerun without --resume to start afresh")
    except (NotResumableError, RunDirError) as e:
        return stopped("run", e, flag, out)
    except RunError as e:
        print(f"jaxnigt: run stopped: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if out_of_memory(e) is None:
            raise
        return _out_of_memory(out_of_memory(e), leftovers)
    if is_writer():
        _print_summary(out, summary)
    return 0


def _out_of_memory(memory: str, leftovers) -> int:
    """The exit status of a run that ran out of device memory (2, one line, when it stopped
    before its first result and nothing was kept)."""
    if leftovers is not None and leftovers.removed:
        return error(
            f"out of memory before the first result ({memory}): the size check's "
            "estimate is a lower bound; `jaxnigt plan` shows each algorithm's compiled "
            "memory per step (lower hparams.M, seeds or cluster.n); nothing was kept"
        )
    print(f"jaxnigt: run stopped: out of memory ({memory})", file=sys.stderr)
    return 1
