"""The ``jaxnigt`` command: ``run``, ``plot``, ``list`` and ``clock``.

Errors in user input (bad config values, bad flags, an existing run directory) print one
line naming the problem and exit with status 2, before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_USAGE = 2
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def _error(message: str) -> int:
    print(f"jaxnigt: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _init_distributed(args: argparse.Namespace) -> str | None:
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
    from jaxnigt import distributed

    distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    return None


def _cmd_run(args: argparse.Namespace) -> int:
    from jaxnigt import config as config_lib

    problem = _init_distributed(args)
    if problem:
        return _error(problem)

    overrides = list(args.set or [])
    if args.seeds is not None:
        overrides.append(f"seeds={args.seeds}")
    try:
        cfg = config_lib.load(args.config, overrides)
    except config_lib.ConfigError as e:
        return _error(str(e))
    from jaxnigt import files, runner
    from jaxnigt.distributed import is_writer

    if args.resume:
        if args.out and Path(args.out) != Path(args.resume):
            return _error("--out and --resume name different directories; give one")
        out = Path(args.resume)
        try:
            files.check_resumable(cfg, out)
        except config_lib.ConfigError as e:
            return _error(str(e))
    else:
        out = Path(args.out) if args.out else Path("runs") / cfg.name
        try:
            if is_writer():
                files.prepare_run_dir(out, args.overwrite)
        except FileExistsError as e:
            return _error(str(e))
    try:
        summary = runner.run_experiment(
            cfg,
            out,
            overwrite=True,
            resume=bool(args.resume),
            progress=not args.no_progress,
            plot=True,
        )
    except runner.RunError as e:
        print(f"jaxnigt: run stopped: {e}", file=sys.stderr)
        return 1
    if not is_writer():
        return 0
    print(f"[jaxnigt] wrote {out}/metrics.csv, summary.json, curves.png")
    for name, entry in summary.items():
        final = entry["final_median_return"]
        line = f"  {name:<14} final median eval return {final:10.3f}" if final is not None else name
        if entry.get("time_to_target") is not None:
            line += f"   time to target {entry['time_to_target']:.1f}"
        print(line)
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from jaxnigt.plotting import X_AXES, plot_counts, plot_runs
    from jaxnigt.results import COUNTS_FILE

    if args.counts:
        for d in args.dirs:
            if not (Path(d) / COUNTS_FILE).is_file():
                return _error(f"{d!r} has no {COUNTS_FILE} (written by runs with n <= 64)")
        for d in args.dirs:
            out = args.out if args.out and len(args.dirs) == 1 else Path(d) / "counts.png"
            print(f"[jaxnigt] wrote {plot_counts(d, out=out)}")
        return 0
    if args.x not in X_AXES:
        return _error(f"--x: got {args.x!r}; expected one of {sorted(X_AXES)}")
    for d in args.dirs:
        if not (Path(d) / "metrics.csv").is_file():
            return _error(f"{d!r} is not a run directory (no metrics.csv)")
    out = args.out or str(Path(args.dirs[0]) / f"curves_{args.x}.png")
    path = plot_runs(args.dirs, x=args.x, y=args.y, out=out)
    print(f"[jaxnigt] wrote {path}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    del args
    from jaxnigt import envs
    from jaxnigt.algorithms import NAMES

    print("environments:", ", ".join(envs.list_envs()))
    print("algorithms:  ", ", ".join(NAMES))
    configs = sorted(p.name for p in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.is_dir() else []
    print("configs:     ", ", ".join(configs) if configs else "(none found)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from jaxnigt import clock

    parser = argparse.ArgumentParser(
        prog="jaxnigt",
        description="Asynchronous distributed policy-gradient RL on a simulated cluster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run an experiment config and write a run directory")
    run.add_argument("config", help="YAML config (see configs/)")
    run.add_argument("--seeds", type=int, help="number of seeds (overrides the config)")
    run.add_argument("--out", help="run directory (default runs/<config name>)")
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set budget=500 --set hparams.eta=0.1 "
        "--set algorithms=[rennala_nigt,afedpg] (repeatable; VALUE is YAML)",
    )
    run.add_argument("--overwrite", action="store_true", help="reuse an existing run directory")
    run.add_argument(
        "--resume",
        metavar="DIR",
        help="continue an interrupted run in DIR (same config and overrides) from its checkpoints",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    dist = run.add_argument_group(
        "multiple processes (one per host; see README 'Multiple devices and hosts')"
    )
    dist.add_argument("--coordinator", metavar="HOST:PORT", help="jax.distributed coordinator")
    dist.add_argument("--num-processes", type=int, metavar="N", help="number of processes")
    dist.add_argument("--process-id", type=int, metavar="I", help="this process's index")
    dist.add_argument(
        "--distributed",
        action="store_true",
        help="initialize jax.distributed from the environment (SLURM, JAX_COORDINATOR_ADDRESS)",
    )
    run.set_defaults(func=_cmd_run)

    plot = sub.add_parser("plot", help="plot return against time/steps/comms")
    plot.add_argument("dirs", nargs="+", help="run directories")
    plot.add_argument("--x", default="time", help="x-axis: time, steps or comms")
    plot.add_argument("--y", default="eval_return", help="metrics column (default eval_return)")
    plot.add_argument("--out", help="PNG path (default <dir>/curves_<x>.png)")
    plot.add_argument(
        "--counts",
        action="store_true",
        help="instead: each worker's share of the gradients, a stacked bar per algorithm",
    )
    plot.set_defaults(func=_cmd_plot)

    lst = sub.add_parser("list", help="environments, algorithms and bundled configs")
    lst.set_defaults(func=_cmd_list)

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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in ("run", "clock"):
        enable_compilation_cache()
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
