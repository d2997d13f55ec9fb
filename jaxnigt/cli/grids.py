"""``jaxnigt sweep`` and ``jaxnigt tune``: grids of runs, one directory of run directories."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxnigt.analysis import stats
from jaxnigt.cli.common import add_set, announce, error, flagged, stopped
from jaxnigt.studies import tuning

#: The flag of each shape hyperparameter of ``tuning.SHAPES``.
SHAPE_FLAGS = {"M": "--M", "msync_m": "--msync-m", "ringmaster_R": "--ringmaster-R"}

#: The tune flag of each parameter a ``tuning.TuningError`` names (``Grid`` fields, the
#: shape hyperparameters of ``tuning.SHAPES`` and ``tuning.tune``'s parameters; ``budget``,
#: a config field, has none).
TUNE_FLAGS = {
    "lr_exp": "--lr-exp",
    "eta": "--eta",
    "max_extensions": "--max-extensions",
    **SHAPE_FLAGS,
    "seeds": "--tune-seeds",
    "algorithms": "--algorithms",
    "statistic": "--statistic",
    "resume": "--resume",
    "jobs": "--jobs",
    "gpus_per_program": "--gpus-per-program",
}


def add_sweep_parser(sub) -> None:
    sw = sub.add_parser("sweep", help="run a config over a grid of values and compare the points")
    sw.add_argument("config", help="YAML config (its sweep: section lists values to sweep)")
    sw.add_argument(
        "--over",
        action="append",
        metavar="KEY=V1,V2,...",
        help="sweep a config key over values (repeatable: the Cartesian product); each value "
        "is YAML as for --set (1e-3 is a number), split on the commas outside brackets, "
        "braces and quotes, so a list is one value: --over 'cluster.h=[1,2],[2,2]'",
    )
    sw.add_argument("--seeds", type=int, help="number of seeds (overrides the config)")
    sw.add_argument("--out", help="sweep directory (default runs/<config name>_sweep)")
    add_set(sw)
    sw.add_argument("--resume", action="store_true", help="skip finished points, continue")
    sw.add_argument("--overwrite", action="store_true", help="reuse an existing directory")
    sw.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_padding_flags(sw)
    add_executor_flags(sw, "points")
    sw.set_defaults(func=sweep_command)


def add_padding_flags(parser) -> None:
    """``--max-padding`` and ``--per-point``: how a sweep's points share programs."""
    parser.add_argument(
        "--max-padding",
        type=float,
        metavar="X",
        help="points that differ only in n and M share one program padded to the largest; "
        "X >= 1 caps n_max / n and M_max / M of a point in it (default: no cap)",
    )
    parser.add_argument(
        "--per-point",
        action="store_true",
        help="run each point as its own programs, one after another (no padding)",
    )


def add_executor_flags(parser, what: str) -> None:
    """``--jobs``, ``--ray`` and ``--gpus-per-program``: where the programs run."""
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help=f"run {what} in N local processes at once (default 1; on a CPU host: one per core)",
    )
    parser.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help=f"run {what} as tasks of a Ray cluster (needs jaxnigt[ray]; "
        "--out on a filesystem every node sees)",
    )
    parser.add_argument(
        "--gpus-per-program",
        type=float,
        default=0.0,
        metavar="G",
        help="with --ray: GPUs per program (default 0: one CPU each)",
    )


def add_tune_parser(sub) -> None:
    tu = sub.add_parser(
        "tune",
        help="choose step sizes (and M, msync_m, ringmaster_R) on held-out seeds; write a "
        "tuned config",
    )
    tu.add_argument("config", help="YAML config to tune (its budget and cluster)")
    tu.add_argument("--out", required=True, help="tuning directory (tuned.yaml, tuning.json)")
    tu.add_argument("--algorithms", metavar="A,B", help="algorithms to tune (default: all)")
    tu.add_argument(
        "--lr-exp",
        metavar="A:B",
        help="α = 2^e grid: A:B, A:B:STEP or e1,e2, e.g. --lr-exp -8:-2 (default -10:-1; "
        "extended while the winner sits at an edge)",
    )
    tu.add_argument("--eta", metavar="V1,V2", help="η values in (0, 1] (default 0.001,0.01,0.1)")
    for name, shape in tuning.SHAPES.items():
        tu.add_argument(
            SHAPE_FLAGS[name],
            dest=name,
            metavar=f"{name.split('_')[-1]}1,...",
            help=f"{shape.what}, integers >= 1 (default: the config's)",
        )
    tu.add_argument(
        "--tune-seeds",
        default="100,101",
        metavar="A,A+1",
        help="consecutive seeds, not the config's (default 100,101)",
    )
    tu.add_argument(
        "--statistic",
        default="average",
        choices=stats.STATISTICS,
        help="the score's per-seed statistic (default average)",
    )
    tu.add_argument(
        "--max-extensions",
        type=int,
        default=tuning.MAX_EXTENSIONS,
        help=f"grid extensions at most (default {tuning.MAX_EXTENSIONS})",
    )
    add_set(tu)
    add_executor_flags(tu, "each round's programs")
    tu.add_argument("--resume", action="store_true", help="keep finished programs, continue")
    tu.add_argument("--overwrite", action="store_true", help="reuse an existing directory")
    tu.add_argument("--no-progress", action="store_true", help="no progress bars")
    tu.set_defaults(func=tune_command)


def split_values(text: str) -> list[str]:
    """The values of ``V1,V2,...``: split on the commas outside brackets, braces and quotes,
    so that a list or a mapping is one value (``[1,2],[2,2]``: two lists)."""
    parts, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote is not None:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    return [*parts, "".join(current)]


def parse_over(texts: Sequence[str]) -> dict[str, list[Any]]:
    """``{key: [values]}`` from ``--over KEY=V1,V2,...``: each value YAML as ``--set`` reads
    it (``1e-3`` a number), the values split on the commas outside brackets, braces and
    quotes (:func:`split_values`)."""
    import yaml

    from jaxnigt import config as config_lib
    from jaxnigt.studies.sweep import SweepError

    axes: dict[str, list[Any]] = {}
    for text in texts:
        if "=" not in text:
            raise SweepError(f"--over: got {text!r}; expected KEY=V1,V2,... e.g. cluster.n=10,100")
        key, raw = text.split("=", 1)
        key = key.strip()
        if not key or key in axes:
            raise SweepError(f"--over: got {text!r}; expected a new dotted key")
        values = []
        for value in split_values(raw):
            try:
                values.append(config_lib.text.load_text(value))
            except yaml.YAMLError:
                raise SweepError(f"--over {key}: value {value!r} is not valid YAML") from None
        if any(v is None for v in values):
            raise SweepError(f"--over {key}: got {raw!r}; expected comma-separated values")
        try:
            config_lib.check_distinct(f"--over {key}", values)
        except config_lib.ConfigError as e:
            raise SweepError(str(e)) from None
        axes[key] = values
    return axes


def _sweep_request(args: argparse.Namespace):
    """``(raw config, axes, sets, out)`` from the flags (raises on a bad value)."""
    from jaxnigt import config as config_lib
    from jaxnigt.studies import sweep

    raw = config_lib.read(args.config)
    sets = list(args.set or []) + ([f"seeds={args.seeds}"] if args.seeds is not None else [])
    config_lib.apply_overrides(raw, sets)  # a malformed --set, named as such (OverrideError)
    axes = sweep.grid_axes(raw, parse_over(args.over or []))
    name = str(raw.get("name", Path(args.config).stem))
    out = Path(args.out) if args.out else Path("runs") / f"{name}_sweep"
    return raw, axes, sets, out


def sweep_command(args: argparse.Namespace) -> int:
    from jaxnigt import config as config_lib
    from jaxnigt.run import checkpoint, executors, signals
    from jaxnigt.run.run_dir import NotResumableError, RunDirError
    from jaxnigt.studies import sweep

    announce(args)
    if args.jobs < 1:
        return error(f"--jobs: got {args.jobs}; expected >= 1")
    if args.max_padding is not None and not args.max_padding >= 1:
        return error(f"--max-padding: got {args.max_padding:g}; expected a number >= 1")
    try:
        raw, axes, sets, out = _sweep_request(args)
        with signals.stop_on_signals() as stop:
            rows = sweep.run_sweep(
                raw,
                axes,
                out,
                sets=sets,
                resume=args.resume,
                overwrite=args.overwrite,
                progress=not args.no_progress,
                stop=stop,
                jobs=args.jobs,
                ray=args.ray,
                gpus_per_program=args.gpus_per_program,
                per_point=args.per_point,
                max_padding=args.max_padding,
            )
    except signals.Interrupted as e:
        again = ["jaxnigt", "sweep", args.config_given, "--out", str(out), "--resume"]
        again += [x for o in args.over or [] for x in ("--over", o)]
        again += [x for o in sets for x in ("--set", o)]
        print(f"jaxnigt: {e}; continue with: {shlex.join(again)}", file=sys.stderr)
        return e.exit_status
    except (sweep.SweepError, config_lib.ConfigError) as e:
        return error(flagged(e))
    except executors.ExecutorError as e:
        return error(f"--ray: {e}")
    except (NotResumableError, RunDirError, checkpoint.CheckpointError) as e:
        return stopped("sweep", e, "--out", out, resume="--resume")
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

    # a --set trace path is the working directory's, as for jaxnigt run (recorded absolute)
    raw = config_lib.apply_overrides(config_lib.read(args.config), args.set or [])
    raw = config_lib.trace_paths_in(raw, Path.cwd())
    grid = tuning.Grid(
        lr_exp=tuning.DEFAULT_LR_EXP if args.lr_exp is None else tuning.parse_lr_exp(args.lr_exp),
        eta=tuning.DEFAULT_ETA
        if args.eta is None
        else tuning.parse_numbers(args.eta, "eta", float, 0.0, 1.0),
        shapes={
            name: tuning.parse_numbers(getattr(args, name), name, int, 0, math.inf)
            for name in tuning.SHAPES
            if getattr(args, name) is not None
        },
        max_extensions=args.max_extensions,
    )
    seeds = tuning.parse_seeds(args.tune_seeds)
    algorithms = [a.strip() for a in (args.algorithms or "").split(",") if a.strip()]
    if args.algorithms is not None and not algorithms:
        raise tuning.TuningError("got an empty list; expected names a,b,...", param="algorithms")
    tuning.check_tuned(tuning.check_request(raw, algorithms, grid, seeds, args.statistic), grid)
    if args.jobs < 1:
        raise tuning.TuningError(f"got {args.jobs}; expected >= 1", param="jobs")
    return raw, grid, seeds, algorithms


def tune_command(args: argparse.Namespace) -> int:
    from jaxnigt import config as config_lib
    from jaxnigt.run import checkpoint, executors, signals
    from jaxnigt.run.loop import RunError
    from jaxnigt.run.run_dir import NotResumableError, RunDirError

    try:
        raw, grid, seeds, algorithms = _tune_request(args)
    except (tuning.TuningError, config_lib.ConfigError) as e:
        return error(flagged(e, TUNE_FLAGS))
    announce(args)
    command = shlex.join(["jaxnigt", *(args.argv or [])])
    try:
        with signals.stop_on_signals() as stop:
            report = tuning.tune(
                raw,
                args.out,
                algorithms=algorithms,
                grid=grid,
                seeds=seeds,
                statistic=args.statistic,
                resume=args.resume,
                overwrite=args.overwrite,
                progress=not args.no_progress,
                source=args.config_given,
                command=command,
                stop=stop,
                jobs=args.jobs,
                ray=args.ray,
                gpus_per_program=args.gpus_per_program,
            )
    except signals.Interrupted as e:
        again = shlex.join(["jaxnigt", *(a for a in args.argv or [] if a != "--resume")])
        print(f"jaxnigt: {e}; continue with: {again} --resume", file=sys.stderr)
        return e.exit_status
    except (tuning.TuningError, config_lib.ConfigError) as e:
        return error(flagged(e, TUNE_FLAGS))
    except (NotResumableError, RunDirError, checkpoint.CheckpointError) as e:
        return stopped("tuning", e, "--out", args.out, resume="--resume")
    except RunError as e:
        print(f"jaxnigt: tuning stopped: {e}", file=sys.stderr)
        return 1
    except executors.ExecutorError as e:
        return error(f"--ray: {e}")
    print(tuning.table(report))
    print(f"[jaxnigt] wrote {args.out}/{tuning.TUNED} and {args.out}/{tuning.TABLE}")
    return 0
