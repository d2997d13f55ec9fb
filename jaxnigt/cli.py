"""The ``jaxnigt`` command: ``run``, ``sweep``, ``tune``, ``compare``, ``plan``, ``plot``,
``list`` and ``clock``.

Errors in user input (bad config values, bad flags, an existing run directory) print one
line naming the problem and exit with status 2, before anything is written.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import shlex
import signal
import sys
from pathlib import Path

EXIT_USAGE = 2
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def _error(message: str) -> int:
    print(f"jaxnigt: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _stopped(command: str, e: Exception) -> int:
    """A run-directory or checkpoint failure: a usage error (exit 2) before any work started,
    else one line saying the command stopped with its last checkpoint kept (exit 1)."""
    if not getattr(e, "started", False):
        return _error(str(e))
    print(f"jaxnigt: {command} stopped: {e} (the last checkpoint is kept)", file=sys.stderr)
    return 1


#: What the experiment commands import beyond the core (the ``rl`` extra).
RL_MODULES = ("yaml", "flax", "mujoco", "brax", "matplotlib", "tqdm", "orbax.checkpoint")
RL_INSTALL = "pip install 'jaxnigt[rl]'"


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


def _resume_command(args: argparse.Namespace, out: Path) -> str:
    """The exact command that continues this run (same config and overrides)."""
    parts = ["jaxnigt", "run", args.config, "--resume", str(out)]
    for item in args.set or []:
        parts += ["--set", item]
    if args.seeds is not None:
        parts += ["--seeds", str(args.seeds)]
    if getattr(args, "tensorboard", False):
        parts.append("--tensorboard")
    return shlex.join(parts)


def _load_run_config(args: argparse.Namespace):
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


def _run_dir(args: argparse.Namespace, cfg) -> Path:
    """The run directory; a fresh one is prepared (created, checked writable) here."""
    from jaxnigt import config as config_lib
    from jaxnigt import files
    from jaxnigt.distributed import is_writer

    if args.resume:
        if args.out and Path(args.out) != Path(args.resume):
            raise config_lib.ConfigError("--out and --resume name different directories; give one")
        out = Path(args.resume)
        files.check_resumable(cfg, out)
        return out
    out = Path(args.out) if args.out else Path("runs") / cfg.name
    if is_writer():
        files.prepare_run_dir(out, args.overwrite)
    return out


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


def _announce(args: argparse.Namespace) -> None:
    """The backend line, and a warning when a GPU-sized config runs on a CPU."""
    import jax

    from jaxnigt import parallel

    print(parallel.backend_line(getattr(args, "xla_flags", "none")), flush=True)
    note = gpu_sized_note(args.config)
    if note and jax.default_backend() == "cpu":
        print(f"[jaxnigt] warning: {args.config} is sized for a GPU; {note}", flush=True)


def _cmd_run(args: argparse.Namespace) -> int:
    from jaxnigt import checkpoint, files, runner
    from jaxnigt import config as config_lib
    from jaxnigt.distributed import is_writer

    problem = _init_distributed(args)
    if problem:
        return _error(problem)
    try:
        cfg = _load_run_config(args)
        out = _run_dir(args, cfg)
    except (config_lib.ConfigError, FileExistsError, files.RunDirError) as e:
        return _error(str(e))
    if is_writer():
        _announce(args)
    try:
        with runner.stop_on_signals() as stop:
            summary = runner.run_experiment(
                cfg, out, overwrite=True, resume=bool(args.resume),
                progress=not args.no_progress, plot=True, stop=stop,
            )  # fmt: skip
    except runner.Interrupted as e:
        print(f"jaxnigt: {e}; checkpoint and partial results written to {out}.", file=sys.stderr)
        print(f"jaxnigt: continue with: {_resume_command(args, out)}", file=sys.stderr)
        return e.exit_status
    except (config_lib.ConfigError, checkpoint.CheckpointError) as e:
        return _error(str(e))
    except files.RunDirError as e:
        return _stopped("run", e)
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


def _cmd_sweep(args: argparse.Namespace) -> int:
    from jaxnigt import checkpoint, files, runner, sweep
    from jaxnigt import config as config_lib

    _announce(args)
    try:
        raw = config_lib.read_yaml(args.config)
        axes = {**sweep.sweep_section(raw), **sweep.parse_over(args.over or [])}
        sets = list(args.set or []) + ([f"seeds={args.seeds}"] if args.seeds is not None else [])
        name = str(raw.get("name", Path(args.config).stem))
        out = Path(args.out) if args.out else Path("runs") / f"{name}_sweep"
        with runner.stop_on_signals() as stop:
            rows = sweep.run_sweep(
                raw, axes, out, sets=sets, resume=args.resume, overwrite=args.overwrite,
                progress=not args.no_progress, stop=stop,
            )  # fmt: skip
    except runner.Interrupted as e:
        again = ["jaxnigt", "sweep", args.config, "--out", str(out), "--resume"]
        again += [x for o in args.over or [] for x in ("--over", o)]
        again += [x for o in sets for x in ("--set", o)]
        print(f"jaxnigt: {e}; continue with: {shlex.join(again)}", file=sys.stderr)
        return e.exit_status
    except (sweep.SweepError, config_lib.ConfigError, FileExistsError) as e:
        return _error(str(e))
    except (files.RunDirError, checkpoint.CheckpointError) as e:
        return _stopped("sweep", e)
    failed = sorted({r["point"] for r in rows if r["status"] == "failed"})
    print(
        f"[jaxnigt] wrote {out}/{sweep.TABLE} and {out}/sweep.png ({len(failed)} failed point(s))"
    )
    for point in failed:
        print(f"  failed: {point}")
    return 0


def _tune_request(args: argparse.Namespace):
    """``(raw config, Grid, seeds, algorithms)`` from the flags (raises on a bad value)."""
    from jaxnigt import config as config_lib
    from jaxnigt import tuning

    raw = config_lib.apply_overrides(config_lib.read_yaml(args.config), args.set or [])
    grid = tuning.Grid(
        lr_exp=tuning.DEFAULT_LR_EXP if args.lr_exp is None else tuning.parse_lr_exp(args.lr_exp),
        eta=tuning.DEFAULT_ETA
        if args.eta is None
        else tuning.parse_numbers(args.eta, "--eta", float, 0.0, 1.0),
        M=None if args.M is None else tuning.parse_numbers(args.M, "--M", int, 0, math.inf),
        max_extensions=args.max_extensions,
    )
    seeds = tuning.parse_seeds(args.tune_seeds)
    algorithms = [a.strip() for a in (args.algorithms or "").split(",") if a.strip()]
    if args.algorithms is not None and not algorithms:
        raise tuning.TuningError("--algorithms: got an empty list; expected names a,b,...")
    tuning.check_request(raw, algorithms, grid, seeds, args.statistic)
    return raw, grid, seeds, algorithms


def _cmd_tune(args: argparse.Namespace) -> int:
    from jaxnigt import checkpoint, files, runner, tuning
    from jaxnigt import config as config_lib

    try:
        raw, grid, seeds, algorithms = _tune_request(args)
    except (tuning.TuningError, config_lib.ConfigError) as e:
        return _error(str(e))
    _announce(args)
    command = shlex.join(["jaxnigt", *(args.argv or [])])
    try:
        with runner.stop_on_signals() as stop:
            report = tuning.tune(
                raw, args.out, algorithms=algorithms, grid=grid, seeds=seeds,
                statistic=args.statistic, resume=args.resume, overwrite=args.overwrite,
                progress=not args.no_progress, source=args.config, command=command, stop=stop,
            )  # fmt: skip
    except runner.Interrupted as e:
        again = shlex.join(["jaxnigt", *(a for a in args.argv or [] if a != "--resume")])
        print(f"jaxnigt: {e}; continue with: {again} --resume", file=sys.stderr)
        return e.exit_status
    except (tuning.TuningError, config_lib.ConfigError, FileExistsError) as e:
        return _error(str(e))
    except (files.RunDirError, checkpoint.CheckpointError) as e:
        return _stopped("tuning", e)
    except runner.RunError as e:
        print(f"jaxnigt: tuning stopped: {e}", file=sys.stderr)
        return 1
    print(tuning.table(report))
    print(f"[jaxnigt] wrote {args.out}/{tuning.TUNED} and {args.out}/{tuning.TABLE}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import json

    from jaxnigt import analysis, files

    baselines = None
    if args.baselines is not None:
        baselines = [b.strip() for b in args.baselines.split(",") if b.strip()]
    try:
        run = analysis.load_run(args.run_dir)
        result = analysis.compare(
            run, args.reference, statistic=args.statistic, baselines=baselines, claim=args.claim
        )
    except analysis.AnalysisError as e:
        return _error(str(e))
    text = analysis.compare_markdown(result)
    out = Path(args.run_dir)
    try:
        files.atomic_write_text(out / "compare.json", json.dumps(result, indent=2) + "\n")
        files.atomic_write_text(out / "compare.md", text + "\n")
    except OSError as e:
        return _error(f"cannot write the comparison: {files.describe(e)}")
    print(text)
    print(f"[jaxnigt] wrote {out}/compare.json and {out}/compare.md")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from jaxnigt import config as config_lib
    from jaxnigt import plan

    overrides = list(args.set or []) + ([f"seeds={args.seeds}"] if args.seeds is not None else [])
    try:
        cfg = config_lib.load(args.config, overrides)
    except config_lib.ConfigError as e:
        return _error(str(e))
    _announce(args)
    print(plan.table(plan.plan(cfg, memory=not args.no_memory), cfg))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from jaxnigt.plotting import X_AXES, plot_counts, plot_runs, plot_sweep
    from jaxnigt.results import COUNTS_FILE

    if len(args.dirs) == 1 and (Path(args.dirs[0]) / "sweep.json").is_file():
        try:
            path = plot_sweep(args.dirs[0], x=args.x, out=args.out)
        except ValueError as e:
            return _error(str(e))
        print(f"[jaxnigt] wrote {path}")
        return 0
    args.x = args.x or "time"

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


def _add_run(sub) -> None:
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
    run.add_argument(
        "--tensorboard",
        action="store_true",
        help="also log every chunk's scalars for TensorBoard (needs jaxnigt[tb])",
    )
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


def _add_plot_and_sweep(sub) -> None:
    plot = sub.add_parser("plot", help="plot return against time/steps/comms")
    plot.add_argument("dirs", nargs="+", help="run directories")
    plot.add_argument(
        "--x", default=None, help="x-axis: time (default), steps or comms; a sweep: the swept key"
    )
    plot.add_argument("--y", default="eval_return", help="metrics column (default eval_return)")
    plot.add_argument("--out", help="PNG path (default <dir>/curves_<x>.png)")
    plot.add_argument(
        "--counts",
        action="store_true",
        help="instead: each worker's share of the gradients, a stacked bar per algorithm",
    )
    plot.set_defaults(func=_cmd_plot)

    sw = sub.add_parser("sweep", help="run a config over a grid of values and compare the points")
    sw.add_argument("config", help="YAML config (its sweep: section lists values to sweep)")
    sw.add_argument(
        "--over",
        action="append",
        metavar="KEY=V1,V2,...",
        help="sweep a config key over values (repeatable: the Cartesian product)",
    )
    sw.add_argument("--seeds", type=int, help="number of seeds (overrides the config)")
    sw.add_argument("--out", help="sweep directory (default runs/<config name>_sweep)")
    sw.add_argument("--set", action="append", metavar="KEY=VALUE", help="as for run")
    sw.add_argument("--resume", action="store_true", help="skip finished points, continue")
    sw.add_argument("--overwrite", action="store_true", help="reuse an existing directory")
    sw.add_argument("--no-progress", action="store_true", help="no progress bars")
    sw.set_defaults(func=_cmd_sweep)


def _add_tune_and_compare(sub) -> None:
    from jaxnigt import analysis, tuning

    tu = sub.add_parser(
        "tune", help="choose step sizes (and M) on held-out seeds; write a tuned config"
    )
    tu.add_argument("config", help="YAML config to tune (its budget and cluster)")
    tu.add_argument("--out", required=True, help="tuning directory (tuned.yaml, tuning.json)")
    tu.add_argument("--algorithms", metavar="A,B", help="algorithms to tune (default: all)")
    tu.add_argument("--lr-exp", metavar="A:B", help="α = 2^e grid: A:B, A:B:STEP or e1,e2 "
                    "(default -10:-1; extended while the winner sits at an edge)")  # fmt: skip
    tu.add_argument("--eta", metavar="V1,V2", help="η values in (0, 1] (default 0.001,0.01,0.1)")
    tu.add_argument(
        "--M", metavar="M1,M2", help="M = M_init values for Rennala/Malenia (default: the config's)"
    )
    tu.add_argument("--tune-seeds", default="100,101", metavar="A,A+1",
                    help="consecutive seeds, not the config's (default 100,101)")  # fmt: skip
    tu.add_argument("--statistic", default="average", choices=tuning.STATISTICS,
                    help="the score's per-seed statistic (default average)")  # fmt: skip
    tu.add_argument("--max-extensions", type=int, default=tuning.MAX_EXTENSIONS,
                    help=f"grid extensions at most (default {tuning.MAX_EXTENSIONS})")  # fmt: skip
    tu.add_argument("--set", action="append", metavar="KEY=VALUE", help="as for run")
    tu.add_argument("--resume", action="store_true", help="keep finished programs, continue")
    tu.add_argument("--overwrite", action="store_true", help="reuse an existing directory")
    tu.add_argument("--no-progress", action="store_true", help="no progress bars")
    tu.set_defaults(func=_cmd_tune)

    co = sub.add_parser(
        "compare", help="a reference against every baseline of a run: effects, intervals, verdict"
    )
    co.add_argument("run_dir", help="a finished run directory")
    co.add_argument("--reference", default="rennala_nigt", help="default rennala_nigt")
    co.add_argument("--baselines", metavar="A,B", help="default: every other algorithm")
    co.add_argument("--statistic", default="average", choices=analysis.STATISTICS,
                    help="the effect the verdict uses (default average)")  # fmt: skip
    co.add_argument(
        "--claim",
        default="ahead",
        choices=analysis.CLAIMS,
        help="ahead: the reference beats every baseline; tie: they equal it",
    )
    co.set_defaults(func=_cmd_compare)


def build_parser() -> argparse.ArgumentParser:
    from jaxnigt import clock

    parser = argparse.ArgumentParser(
        prog="jaxnigt",
        description="Asynchronous distributed policy-gradient RL on a simulated cluster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_plot_and_sweep(sub)
    _add_tune_and_compare(sub)
    lst = sub.add_parser("list", help="environments, algorithms and bundled configs")
    lst.set_defaults(func=_cmd_list)
    pl = sub.add_parser("plan", help="trajectories, steps, memory and time of a config, not run")
    pl.add_argument("config", help="YAML config")
    pl.add_argument("--set", action="append", metavar="KEY=VALUE", help="as for run")
    pl.add_argument("--seeds", type=int, help="number of seeds (overrides the config)")
    pl.add_argument("--no-memory", action="store_true", help="skip compiling a step for memory")
    pl.set_defaults(func=_cmd_plan)
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


def main(argv: list[str] | None = None) -> int:
    sys.unraisablehook = _quiet_closed_loops
    if hasattr(signal, "SIGXFSZ"):  # a file-size limit then fails a write instead of killing
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.command in ("run", "sweep", "plot", "list", "plan", "tune", "compare"):
        missing = missing_rl_module()
        if missing:
            return _error(
                f"`jaxnigt {args.command}` needs the experiment extra (module {missing!r} is "
                f"missing); install it with: {RL_INSTALL}"
            )
    if args.command in ("run", "sweep", "plan", "tune"):
        from jaxnigt import parallel

        args.xla_flags = parallel.apply_gpu_flags()  # before any JAX backend starts
    if args.command in ("run", "clock", "sweep", "plan", "tune"):
        enable_compilation_cache()
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
