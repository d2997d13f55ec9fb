"""Commands that run no experiment: ``plan`` (a config's cost), ``plot``, ``compare`` (a run
directory's curves and statistics) and ``list`` (what is available)."""

from __future__ import annotations

import argparse
from pathlib import Path

from jaxnigt.cli.common import EXIT_USAGE, add_set, announce, error, flagged
from jaxnigt.cli.grids import add_padding_flags

#: The flags of the parameters that ``analysis.AnalysisError`` and ``plotting.PlotError`` name.
COMPARE_FLAGS = {
    "statistic": "--statistic",
    "reference": "--reference",
    "baselines": "--baselines",
    "sequential": "--sequential",
}
PLOT_FLAGS = {"x": "--x", "y": "--y", "out": "--out"}


def add_parsers(sub) -> None:
    """The ``plot``, ``compare``, ``plan`` and ``list`` subcommands, in this order."""
    _add_plot_parser(sub)
    _add_compare_parser(sub)
    pl = sub.add_parser("plan", help="trajectories, steps, memory and time of a config, not run")
    pl.add_argument("config", help="YAML config: a file, or a bundled one's name")
    add_set(pl)
    pl.add_argument("--seeds", type=int, help="number of seeds (overrides the config)")
    pl.add_argument("--no-memory", action="store_true", help="skip compiling a step for memory")
    pl.add_argument(
        "--over",
        action="append",
        metavar="KEY=V1,V2,...",
        help="plan the sweep over these values (as jaxnigt sweep, with the config's sweep: "
        "section, which alone makes plan plan a sweep): its programs, their runs, "
        "trajectories per step and memory",
    )
    add_padding_flags(pl)
    pl.set_defaults(func=plan_command)
    lst = sub.add_parser("list", help="environments, algorithms and bundled configs")
    lst.set_defaults(func=list_command)


def _add_plot_parser(sub) -> None:
    plot = sub.add_parser("plot", help="plot return against time/steps/comms")
    plot.add_argument("dirs", nargs="+", help="run directories")
    plot.add_argument(
        "--x", default=None, help="x-axis: time (default), steps or comms; a sweep: the swept key"
    )
    plot.add_argument("--y", default="eval_return", help="metrics column (default eval_return)")
    plot.add_argument(
        "--out",
        metavar="FILE",
        help="image path, its extension the format: .png, .pdf, .svg, ... (no "
        "extension: .png is added; default <dir>/curves_<x>.png)",
    )
    plot.add_argument(
        "--counts",
        action="store_true",
        help="instead: each worker's share of the gradients, a stacked bar per algorithm",
    )
    plot.add_argument(
        "--timeline",
        action="store_true",
        help="instead: the timeline of seed 0's first rounds of a round method, replayed "
        "exactly from the run directory (default <dir>/timeline.png)",
    )
    plot.add_argument("--rounds", type=int, default=5, help="--timeline: rounds (default 5)")
    plot.add_argument("--algorithm", help="--timeline: the round method (default its first)")
    plot.set_defaults(func=plot_command)


def _add_compare_parser(sub) -> None:
    from jaxnigt.analysis import stats, verdicts

    co = sub.add_parser(
        "compare",
        help="a reference against every baseline of a run: effects, exact tests, verdict",
        description="Decides each comparison with an exact randomization test of a tie: methods "
        "that ran the same seeds are paired (seed s gives every method the same initial "
        "policy and evaluation keys) and tested by flipping the sign of each seed's "
        "difference (all 2^n patterns, exact up to 40 seeds); methods of other seeds by "
        "a permutation test (exact or Monte Carlo with its standard error); the output "
        "says which. A time statistic compares each seed's restricted time min(T, B): a "
        "seed that never reaches the target within the budget B counts as B (the "
        "restricted mean survival time), so it is never dropped; the test and the "
        "effect (the ratio of geometric-mean restricted times) are on the log scale. "
        "worker_time_to_50 / worker_time_to_80 compare the total worker time (the workers' "
        "summed computing time, metrics.csv's worker_time) at that first evaluation at the "
        "target in the same way, a seed that never reaches it counting at its final total "
        "worker time. A side is ahead when p <= 1 - level; the interval is the test "
        "inverted, so it excludes the tie exactly then. The smallest p the test can give "
        "at the seeds run is printed beside p (paired: 2/2^n, 1/16 at 5 seeds): no p below it is "
        "ever printed. --sequential splits 0.10 over the looks whose smallest p can "
        "reach their share. Writes the JSON, the Markdown (with each method's seeds at "
        "the target and restricted mean time) and a Kaplan-Meier plot "
        "(<out>_kaplan_meier.png: the share of seeds at the target against simulated "
        "time). Over many comparisons, adjust (Holm: jaxnigt.analysis.verdicts.holm). A "
        "method evaluated more than 10 % of the statistic's scale apart is warned "
        "about.",
    )
    co.add_argument("run_dir", nargs="+", help="a finished run; several: seed blocks of one config")
    co.add_argument("--reference", default="rennala_nigt", help="default rennala_nigt")
    co.add_argument("--baselines", metavar="A,B", help="default: every other algorithm")
    co.add_argument(
        "--statistic",
        default="average",
        choices=stats.COMPARE_STATISTICS,
        help="the effect the verdict uses (default average)",
    )
    co.add_argument(
        "--claim",
        default="ahead",
        choices=verdicts.CLAIMS,
        help="ahead: the reference beats every baseline; tie: they equal it",
    )
    co.add_argument(
        "--target",
        type=float,
        metavar="R",
        help="a time statistic's target return, fixed in advance from runs the comparison "
        "does not test (e.g. tuning seeds); default: pooled over every method of the run",
    )
    co.add_argument(
        "--sequential",
        metavar="5,10,20,40",
        help="decide each comparison by looks at these seed counts: 0.10 split over the "
        "looks whose smallest attainable p reaches their share, equivalence by two "
        "one-sided tests of a margin",
    )
    co.add_argument(
        "--out",
        metavar="FILE",
        help="write the JSON to FILE.json and the Markdown to FILE.md (FILE may "
        "end in .json or .md; default: compare.json and compare.md, or "
        "sequential.*, in the first run directory)",
    )
    co.set_defaults(func=compare_command)


def analysis_problem(e: Exception, flags=COMPARE_FLAGS) -> str:
    """An analysis error with the command line's words: the flag of the parameter at fault,
    and for an unfinished run directory the command that finishes it."""
    from jaxnigt import analysis

    text = flagged(e, flags)
    if isinstance(e, analysis.UnfinishedRunError) and e.path is not None:
        text += f" with `jaxnigt run CONFIG --resume {e.path}`"
    return text


def _compare_outputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """Where ``compare`` writes its JSON and Markdown (``--out``, else the first run
    directory); raises ValueError for an ``--out`` that ends in neither ``.json`` nor
    ``.md``, or whose files would replace a run's own file or a device (:func:`own_problem`)."""
    if args.out is None:
        name = "sequential" if args.sequential else "compare"
        out = Path(args.run_dir[0]) / name
    else:
        out = Path(args.out)
        if out.suffix not in ("", ".json", ".md"):
            raise ValueError(
                f"got {args.out!r}; expected FILE, FILE.json or FILE.md (the JSON goes to "
                "FILE.json, the Markdown to FILE.md)"
            )
        out = out.with_suffix("")
    outputs = out.with_name(f"{out.name}.json"), out.with_name(f"{out.name}.md")
    for path in outputs:
        own_problem(path)
    return outputs


def own_problem(path: Path) -> None:
    """Raises ValueError when writing ``path`` would replace a run directory's own file
    (``RUN/summary.json``, ...) or something that is no regular file (a device, a pipe)."""
    from jaxnigt.run.run_dir import not_replaceable, run_file

    if run_file(path):
        raise ValueError(
            f"{str(path)!r} is a run directory's own file (written by its run only); "
            "choose another FILE"
        )
    if problem := not_replaceable(path):
        raise ValueError(problem)


def _check_baselines(run, baselines: list[str] | None, reference: str) -> str | None:
    """What is wrong with ``--baselines`` for this run (None if nothing): a name the run
    does not have, the reference itself, or no name at all; the run's methods are listed."""
    methods = list(run.algorithms())
    has = f"the run's methods: {', '.join(methods)}"
    if baselines is None:
        return None
    if not baselines:
        return f"--baselines: got no name; expected A,B,... of {has}"
    unknown = [b for b in baselines if b not in methods]
    if unknown:
        names = ", ".join(repr(b) for b in unknown)
        verb = "is" if len(unknown) == 1 else "are"
        return f"--baselines: {names} {verb} not in {str(run.path)!r}; {has}"
    if reference in baselines:
        return f"--baselines: {reference!r} is the reference (--reference); {has}"
    return None


def compare_command(args: argparse.Namespace) -> int:
    import json

    from jaxnigt import analysis
    from jaxnigt.analysis import run_data
    from jaxnigt.run.run_dir import atomic_write_text, describe

    baselines = None
    if args.baselines is not None:
        baselines = [b.strip() for b in args.baselines.split(",") if b.strip()]
    try:
        json_out, md_out = _compare_outputs(args)
    except ValueError as e:
        return error(f"--out: {e}")
    try:
        runs = [analysis.load_run(d) for d in args.run_dir]
        if len(runs) > 1:
            run_data.check_seed_blocks(runs)
        run = runs[0] if len(runs) == 1 else analysis.sequential.merge_runs(runs)
        if problem := _check_baselines(run, baselines, args.reference):
            return error(problem)
        kw = dict(statistic=args.statistic, baselines=baselines, claim=args.claim)
        kw["target"] = args.target
        if args.sequential:
            stages = analysis.sequential.parse_stages(args.sequential)
            result = analysis.sequential.compare_sequential(
                run, args.reference, stages=stages, **kw
            )
            text = analysis.sequential.markdown(result)
        else:
            result = analysis.compare(run, args.reference, **kw)
            text = analysis.compare_markdown(result)
    except analysis.AnalysisError as e:
        return error(analysis_problem(e))
    print(text, flush=True)  # the table, also where its files cannot be written
    try:
        atomic_write_text(json_out, json.dumps(result, indent=2) + "\n")
        atomic_write_text(md_out, text + "\n")
    except OSError as e:
        hint = "; pass --out FILE to write them elsewhere" if args.out is None else ""
        return error(f"cannot write the comparison: {describe(e)}{hint}")
    km = result.get("kaplan_meier")
    if km:
        from jaxnigt.analysis import survival

        km_out = json_out.with_name(f"{json_out.stem}_kaplan_meier.png")
        try:
            survival.plot(km["curves"], km_out, target=km["target"])
        except OSError as e:
            return error(f"cannot write the Kaplan-Meier plot: {describe(e)}")
        print(f"[jaxnigt] wrote {json_out}, {md_out} and {km_out}")
    else:
        print(f"[jaxnigt] wrote {json_out} and {md_out}")
    return 0


def plan_command(args: argparse.Namespace) -> int:
    from jaxnigt import config as config_lib
    from jaxnigt.run import plan, sizing

    overrides = list(args.set or []) + ([f"seeds={args.seeds}"] if args.seeds is not None else [])
    try:
        raw = config_lib.read(args.config)
        if args.over or "sweep" in raw:  # planned as `jaxnigt sweep` would run it
            return _plan_sweep(args, raw, overrides)
        cfg = config_lib.load(args.config, overrides)
    except config_lib.ConfigError as e:
        return error(flagged(e))
    announce(args)
    try:
        rows = plan.plan(cfg, memory=not args.no_memory)
    except sizing.SizeError as e:
        return error(str(e))
    print(plan.table(rows, cfg))
    problems = [r["problem"] for r in rows if r["problem"] is not None]
    for problem in problems:
        error(problem)
    return EXIT_USAGE if problems else 0


def _plan_sweep(args: argparse.Namespace, raw: dict, overrides: list[str]) -> int:
    """``jaxnigt plan --over ...``, or of a config with a ``sweep:`` section: the points
    ``jaxnigt sweep`` would run (:func:`jaxnigt.studies.sweep.sweep_points`) and the
    programs it would compile for them."""
    from jaxnigt import config as config_lib
    from jaxnigt.cli.grids import parse_over
    from jaxnigt.studies import sweep, sweep_programs

    if args.max_padding is not None and not args.max_padding >= 1:
        return error(f"--max-padding: got {args.max_padding:g}; expected a number >= 1")
    try:
        config_lib.apply_overrides(raw, overrides)  # a malformed --set, named as such
        points = sweep.sweep_points(raw, parse_over(args.over or []), overrides)
    except (sweep.SweepError, config_lib.ConfigError) as e:
        return error(flagged(e))
    announce(args)
    if args.per_point:
        programs = sweep_programs.per_point(points)
    else:
        programs = sweep_programs.programs(points, args.max_padding)
    names = [p.name for p in points]
    measure = lambda prog: sweep_programs.measure(points, prog)
    print(f"{len(points)} points; " + sweep_programs.describe(programs, names, measure))
    return 0


def _unwritable(e: OSError, args: argparse.Namespace) -> int:
    """A plot that cannot be written: one line naming the file and the reason."""
    from jaxnigt.run.run_dir import describe

    hint = "; pass --out FILE to write it elsewhere" if args.out is None else ""
    return error(f"cannot write the plot: {describe(e)}{hint}")


def _plot_counts(args: argparse.Namespace) -> int:
    from jaxnigt.run.metrics import COUNTS_FILE, MetricsFileError
    from jaxnigt.run.plots import PlotError, plot_counts

    for d in args.dirs:
        if not (Path(d) / COUNTS_FILE).is_file():
            return error(f"{d!r} has no {COUNTS_FILE} (written by runs with n <= 64)")
    for d in args.dirs:
        out = args.out if args.out and len(args.dirs) == 1 else Path(d) / "counts.png"
        try:
            path = plot_counts(d, out=out)
        except (PlotError, MetricsFileError) as e:
            return error(flagged(e, PLOT_FLAGS))
        except OSError as e:
            return _unwritable(e, args)
        print(f"[jaxnigt] wrote {path}")
    return 0


def plot_command(args: argparse.Namespace) -> int:
    from jaxnigt.run.metrics import MetricsFileError
    from jaxnigt.run.plots import PlotError, plot_runs, plot_sweep

    if args.out is not None:  # never a run's own file (but its counts.png, which --counts draws)
        out = Path(args.out) if Path(args.out).suffix else Path(args.out).with_suffix(".png")
        redraw = args.counts and any(out == Path(d) / "counts.png" for d in args.dirs)
        try:
            if not redraw:
                own_problem(out)
        except ValueError as e:
            return error(f"--out: {e}")

    if len(args.dirs) == 1 and (Path(args.dirs[0]) / "sweep.json").is_file():
        try:
            path = plot_sweep(args.dirs[0], x=args.x, out=args.out)
        except ValueError as e:
            return error(flagged(e, PLOT_FLAGS))
        except OSError as e:
            return _unwritable(e, args)
        print(f"[jaxnigt] wrote {path}")
        return 0
    if args.counts:
        return _plot_counts(args)
    if args.timeline:
        return _plot_timeline(args)
    args.x = args.x or "time"
    for d in args.dirs:
        if not (Path(d) / "metrics.csv").is_file():
            return error(f"{d!r} is not a run directory (no metrics.csv)")
    out = args.out or str(Path(args.dirs[0]) / f"curves_{args.x}.png")
    try:
        path = plot_runs(args.dirs, x=args.x, y=args.y, out=out)
    except (PlotError, MetricsFileError) as e:
        return error(flagged(e, PLOT_FLAGS))
    except OSError as e:
        return _unwritable(e, args)
    print(f"[jaxnigt] wrote {path}")
    return 0


def _plot_timeline(args: argparse.Namespace) -> int:
    """``jaxnigt plot RUN --timeline``: seed 0's first rounds (:mod:`jaxnigt.run.timeline`)."""
    from jaxnigt.cluster import timeline_plot
    from jaxnigt.run import timeline
    from jaxnigt.run.plots import save

    if len(args.dirs) != 1:
        return error("--timeline draws one run directory; give one")
    try:
        tl = timeline.run_timeline(args.dirs[0], algorithm=args.algorithm, rounds=args.rounds)
    except ValueError as e:  # the library names the argument; the command line its flag
        text = str(e)
        for name in ("algorithm", "rounds"):
            text = f"--{text}" if text.startswith(f"{name}: ") else text
        return error(text)
    title = f"{tl.rule}: seed 0, rounds 1-{len(tl.round_end)} of {args.dirs[0]}"
    out = Path(args.out or Path(args.dirs[0]) / "timeline.png")
    out = out if out.suffix else out.with_suffix(".png")
    try:
        save(timeline_plot.draw(tl, title=title).figure, out)
    except OSError as e:
        return _unwritable(e, args)
    print(f"[jaxnigt] wrote {out}")
    return 0


def list_command(args: argparse.Namespace) -> int:
    del args
    from jaxnigt import envs
    from jaxnigt.algorithms import NAMES
    from jaxnigt.config import bundled

    print("environments:", ", ".join(envs.list_envs()))
    print("algorithms:  ", ", ".join(NAMES))
    configs = bundled.names()
    print("configs:     ", ", ".join(configs) if configs else "(none found)")
    if configs:
        print("              (run one by name from any directory, e.g. jaxnigt run demo)")
    return 0
