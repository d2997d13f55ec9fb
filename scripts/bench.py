"""jaxnigt benchmark suite: one entry point, one subcommand per benchmark.

Every subcommand prints a table and returns its rows; ``--json PATH`` writes all rows with
the exact command, the package versions, the CPU model and the JAX backend. Comparisons are
measured side by side in one process (interleaved), so read the RATIOS: absolute times on a
shared 2-core machine move with other people's load. See docs/benchmarks.md.

Usage::

    python scripts/bench.py --quick                    # every CPU benchmark, < 10 min
    python scripts/bench.py --json out.json overhead   # one benchmark, full size
    python scripts/bench.py scaling --env reacher --quick
    bash scripts/bench_gpu.sh                          # the GPU benchmark (needs a GPU)

Subcommands: schedule, rollout, overhead, scaling, power, seeds, padding, sweep, compile, gym,
memory, central, jobs, executors, gpu (``all``, the default, runs every one except executors
and gpu; :data:`BENCHMARKS` is the one table of them). ``gym`` needs the optional extra
``pip install -e '.[bench]'`` (gymnasium[mujoco]).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import shlex
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

from benchmarks import gpu_args

warnings.filterwarnings("ignore")
# ``benchmarks`` below is scripts/benchmarks: run as a script, this file's folder (scripts/) is
# first on Python's path.


def _names(text: str | None) -> tuple[str, ...] | None:
    """``--envs a,b``: the names (None: not given)."""
    return tuple(text.split(",")) if text else None


def _ints(text: str) -> tuple[int, ...]:
    """``--batches 16,64``: the numbers (``""``: none)."""
    return tuple(int(v) for v in text.split(",") if v.strip())


def _rollout(args) -> dict:
    envs = _names(args.envs) or (("reacher",) if args.quick else ("reacher", "hopper", "humanoid"))
    return {
        "envs": envs,
        "batches": _ints(args.batches or ("64" if args.quick else "16,64")),
        "reps": args.reps or (2 if args.quick else 3),
        "solver_iterations": args.solver_iterations,
        "ls_iterations": args.ls_iterations,
    }


def _gpu(args) -> dict:
    return {
        "env": args.env,
        "horizon": args.horizon,
        "n": args.n,
        "M": args.M,
        "seeds": args.seeds,
        "rounds": args.rounds,
        "async_block": args.async_block,
        "deadline": args.deadline,
        "allow_cpu": args.allow_cpu,
        "solver_iterations": args.solver_iterations,
        "ls_iterations": args.ls_iterations,
        "batches": _ints(args.batches),  # "": no rollouts
        "large_n": args.large_n,
        "studies": tuple(args.study or ()),
        "reference_batch": args.reference_batch,
        "groups": tuple(g for g in args.rows.split(",") if g.strip()),
        "rows": args.partial_rows,
    }


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A subcommand: ``benchmarks.<module>.run(quick, **kwargs(args))`` gives its rows and
    ``<module>.<table>(rows)`` their text; ``options``: its own flags, each ``(flags,
    add_argument's keywords)`` (``gpu``'s: :mod:`benchmarks.gpu_args`)."""

    module: str
    help: str
    kwargs: Callable[[argparse.Namespace], dict] = lambda args: {}
    options: tuple[tuple[tuple[str, ...], dict], ...] = ()
    table: str = "format_rows"


_ENVS = (("--envs",), {"default": None, "help": "comma-separated env names"})
_REPS = (("--reps",), {"type": int, "default": None})
_SOLVER = (
    (("--solver-iterations",), {"type": int, "default": None}),
    (("--ls-iterations",), {"type": int, "default": None}),
)
_ENV = (("--env",), {"default": None, "help": "default: reacher"})
_GYM = (  # gym precedes gpu below, so `all` takes these defaults for --M etc.
    (("--horizon",), {"type": int, "default": None, "help": "default 1000 (quick 200)"}),
    (("--M",), {"type": int, "default": 20}),
    (("--n",), {"type": int, "default": 10}),
    (("--rounds",), {"type": int, "default": None, "help": "default 3 (quick 2)"}),
)
_COMPILE = (
    (("--n",), {"default": None, "help": "instead: the run's chunk program at these n (demo)"}),
    (("--algorithm",), {"default": "sync_nigt", "help": "with --n (default sync_nigt)"}),
)
_BATCHES = (("--batches",), {"default": None, "help": "default 16,64 (quick: 64)"})

# Every benchmark, in the order `all` runs them (gpu excepted) and the parser declares their
# flags: a flag several benchmarks have takes, under `all`, the default of the first.
BENCHMARKS = {
    "schedule": Benchmark("schedule", "one Rennala schedule + weights call vs n (M = 50)"),
    "rollout": Benchmark(
        "rollout",
        "rollout + policy gradient vs bare env stepping (env-steps/s)",
        _rollout,
        (_ENVS, _BATCHES, _REPS, *_SOLVER),
        table="format_table",
    ),
    "overhead": Benchmark(
        "overhead",
        "rennala_nigt training rounds vs bare rollout + gradient",
        lambda args: {"envs": _names(args.envs) or ("reacher", "hopper")},
        (_ENVS,),
    ),
    "scaling": Benchmark(
        "scaling",
        "wall time per round vs n: Rennala, Malenia, AFedPG (waves vs 1)",
        lambda args: {"env": args.env},
        (_ENV,),
    ),
    "power": Benchmark(
        "power",
        "a Rennala NIGT round under outages vs constant power (n = 10, 10,000)",
        lambda args: {"env": args.env or "reacher"},
        (_ENV,),
    ),
    "seeds": Benchmark(
        "seeds",
        "8 seeds / a 4x2 grid vmapped vs sequential",
        lambda args: {"env": args.env or "reacher"},
        ((("--env",), {"default": "reacher"}),),
    ),
    "padding": Benchmark(
        "padding",
        "Rennala runs of n in {10,30,100} x M in {20,30,50}: 1 padded program vs 9",
        lambda args: {"env": args.env or "point_mass"},
    ),
    "sweep": Benchmark(
        "sweep_programs", "the demo's n x M sweep: grouped into padded programs vs point by point"
    ),
    "compile": Benchmark(
        "compile",
        "cold compile time of the first round per env",
        lambda args: {
            "envs": _names(args.envs),
            "ns": _ints(args.n or ""),
            "algorithm": args.algorithm,
        },
        (_ENVS, *_COMPILE),
    ),
    "gym": Benchmark(
        "gym_reference",
        "vs the paper-style CPU simulation (gymnasium loop over workers)",
        lambda args: {
            "envs": _names(args.envs),
            **{k: getattr(args, k) for k in ("horizon", "M", "n", "rounds", "reps")},
        },
        (_ENVS, _REPS, *_GYM),
    ),
    "memory": Benchmark("memory", "peak memory of one round vs M (no per-trajectory gradients)"),
    "central": Benchmark(
        "central", "a seed_rl learner update vs impala's, and its per-step clock's share"
    ),
    "jobs": Benchmark(
        "jobs", "a tuning's programs in sequence vs in parallel processes (tune --jobs)"
    ),
    "executors": Benchmark(
        "executors", "a 4-program tuning: --jobs 1, --jobs 2, Ray with 2 one-CPU nodes"
    ),
    "gpu": Benchmark(
        "gpu",
        "studies' padded programs vs a rollout, then humanoid rollouts and rounds/s",
        _gpu,
        _SOLVER,
    ),
}
ALL = tuple(name for name in BENCHMARKS if name not in ("executors", "gpu"))


def run_benchmark(name: str, args: argparse.Namespace) -> tuple[list[dict], str]:
    """Runs the benchmark ``name`` with the parsed ``args``: its rows and their table."""
    bench = BENCHMARKS[name]
    module = importlib.import_module(f"benchmarks.{bench.module}")
    rows = module.run(args.quick, **bench.kwargs(args))
    return rows, getattr(module, bench.table)(rows)


def _ratios(name: str, rows: list[dict]) -> list[str]:
    """One line per headline ratio of a benchmark (printed again in the final summary)."""
    out = []
    for r in rows:
        if "error" in r:
            out.append(f"{name}: ERROR {r['error']}")
        elif name == "executors":
            out.append(
                f"executors: --jobs 1 / --jobs 2 wall = {r['speedup_jobs2']:.2f}, --jobs 1 / Ray = "
                f"{r['speedup_ray']:.2f}, Ray overhead {r['ray_overhead_per_program_s']:.1f} s per "
                f"program (same tuned.yaml: {r['same_tuned']})"
            )
        elif name == "jobs":
            out.append(
                f"jobs pair {r['pair']}: --jobs 1 / --jobs {r['jobs']} wall = {r['speedup']:.2f} "
                f"(same results: {r['same_results']})"
            )
        elif name == "sweep" and r["form"] == "grouped":
            out.append(
                f"sweep: grouped / per point: wall {r['wall_over_per_point']:.2f}, compile "
                f"{r['compile_over_per_point']:.2f}, {r['programs']} programs; sweep.csv max "
                f"rel. diff {r['max_rel_diff']:.1e}"
            )
        elif name == "padding" and r["form"] == "padded":
            out.append(
                f"padding: 1 padded program / {r['separate_programs']} separate: compile "
                f"{r['compile_over_separate']:.2f}, wall {r['wall_over_separate']:.2f} "
                f"(max |Δ params| = {r['max_param_diff']:.1e})"
            )
        elif name == "schedule":
            out.append(
                f"schedule n={r['n']}: {r['ratio_vs_n10']:.2f}x the n=10 call; "
                f"previous full-draw method / now = {r['full_over_lazy']:.1f}; "
                f"outages / constant power = {r['outages_over_constant']:.2f}"
            )
        elif name == "rollout":
            out.append(
                f"rollout {r['env']} b={r['batch']} H={r['horizon']}: pg/bare = {r['ratio']:.2f}"
            )
        elif name == "overhead":
            if r["met"] is None:
                tail = "information only: the two sides' batches survive for different times"
            else:
                tail = f"target >= {r['target']}: {'met' if r['met'] else 'NOT met'}"
            out.append(
                f"overhead {r['env']} H={r['H']} M={r['M']} early exit {r['early_exit']}: "
                f"train/bare = {r['ratio']:.3f} ({tail}); at lr=0 {r['ratio_lr0']:.3f}"
            )
        elif name == "scaling" and "ms_per_arrival" in r:
            if r["wave"] == 1:
                continue
            met = "" if r["met"] is None else f" (target >= 3: {'met' if r['met'] else 'NOT met'})"
            out.append(
                f"scaling afedpg {r['env']} n={r['n']} block={r['block']}: one arrival at a time "
                f"/ waves (W={r['wave']}) = {r['one_at_a_time_over_waves']:.2f}x{met}"
            )
        elif name == "scaling":
            tail = ""
            if "met" in r:
                tail = f" (target <= {r['target']}: {'met' if r['met'] else 'NOT met'})"
            out.append(
                f"scaling {r['algorithm']} {r['env']} n={r['n']}: "
                f"{r['ratio_vs_smallest_n']:.3f}x smallest n{tail}"
            )
        elif name == "seeds":
            out.append(
                f"seeds {r['case']}: sequential/vmapped = {r['speedup']:.2f}; "
                f"compile {r['compile_vmap_s']:.1f}s (b={r['batch']}), "
                f"{r['compile_batch1_s']:.1f}s (b=1), recompiles {r['recompiles']}"
            )
        elif name == "gym":
            ok = "met" if r["met"] else "NOT met"
            out.append(
                f"gym {r['env']} H={r['H']} M={r['M']} R={r['rounds']} "
                f"vs {r['reference']} {r['gym_id']}, jaxnigt {r['variant']}, MJX solver "
                f"{r['solver']} ({r['solver_effective']}): speedup {r['speedup']:.2f}x "
                f"(target >= {r['target']}: {ok}; alive {r['alive_share']:.0%} of computed "
                f"steps; compile {r['jaxnigt_compile_s']:.0f}s excluded)"
            )
        elif name == "compile":
            if "env" in r:
                out.append(f"compile {r['env']}: {r['first_round_total_s']:.1f}s lower+compile")
            else:
                out.append(
                    f"compile {r['algorithm']} n = {r['n']:,} ({r['arrays']}): "
                    f"{r['compile_s']:.1f}s (lower {r['lower_s']:.1f}s, prepare "
                    f"{r['prepare_s']:.1f}s)"
                )
        elif name == "memory" and r is rows[-1]:
            out.append(
                f"memory: {r['kb_per_traj_xla_round']:.2f} KB/trajectory (XLA round), "
                f"{r['kb_per_traj_peak_rss']:.2f} KB/trajectory (peak RSS of the run) "
                f"vs d*4 = {r['kb_per_traj_d4']:.2f} KB"
            )
        elif name == "power" and r["power"] != "constant":
            out.append(
                f"power rennala_nigt {r['env']} n={r['n']}: {r['power']} / constant per round = "
                f"{r['over_constant']:.3f} (target <= {r['target']}: "
                f"{'met' if r['met'] else 'NOT met'})"
            )
        elif name == "central":
            out.append(
                f"central {r['env']} n={r['n']}: seed_rl / impala per update = "
                f"{r['seed_over_impala']:.2f}; clock share {r['clock_share']:.2f}"
            )
        elif name == "gpu" and "rounds_per_s" in r:
            out.append(f"gpu {r['algorithm']} seeds={r['seeds']}: {r['rounds_per_s']:.3f} rounds/s")
    if name == "gpu":
        from benchmarks import gpu_study

        out += gpu_study.ratio_lines(rows)
    return out


def _parser() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: the flags work before or after the subcommand without overwriting each other.
    shared.add_argument(
        "--quick",
        action="store_true",
        default=argparse.SUPPRESS,
        help="short horizons, few repetitions",
    )
    shared.add_argument(
        "--json", default=argparse.SUPPRESS, metavar="PATH", help="write all results here"
    )
    shared.add_argument(
        "--markdown",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help="also write every table as Markdown (for docs/benchmarks.md)",
    )
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        parents=[shared],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("all", parents=[shared], help="every benchmark except gpu (default)")
    for name, bench in BENCHMARKS.items():
        p = sub.add_parser(name, parents=[shared], help=bench.help)
        for flags, kwargs in bench.options:
            p.add_argument(*flags, **kwargs)
        if name == "gpu":
            gpu_args.add_arguments(p)
    return parser


def _sub_defaults() -> dict:
    """Every benchmark's flags with their defaults (the first benchmark's where several have
    one): what `all` gives each benchmark, which has no flags of its own."""
    parser = _parser()
    out: dict = {}
    for name in BENCHMARKS:
        for key, value in vars(parser.parse_args([name])).items():
            if key != "command":
                out.setdefault(key, value)
    return out


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(gpu_args.expand_tiny(argv))
    args.quick = getattr(args, "quick", False)
    # `all` has no per-benchmark options: give every benchmark its own defaults.
    for key, value in _sub_defaults().items():
        if not hasattr(args, key):
            setattr(args, key, value)
    json_path = getattr(args, "json", None)
    markdown_path = getattr(args, "markdown", None)
    markdown = [f"Command: `{shlex.join(['python', 'scripts/bench.py', *argv])}`"]
    names = ALL if args.command in (None, "all") else (args.command,)

    from jaxnigt.run import devices

    xla_flags = devices.apply_gpu_flags()  # as `jaxnigt run` does, before a backend starts
    from benchmarks.common import system_info

    info = system_info()
    info["xla_flags"] = f"{os.environ.get('XLA_FLAGS', '')!r} ({xla_flags})"
    command = shlex.join(["python", "scripts/bench.py", *argv])
    print(f"command: {command}")
    print(f"cpu: {info['cpu']} ({info['cpu_count']} cores); backend: {info['backend']}")
    print(f"XLA_FLAGS: {info['xla_flags']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    results = {}
    interrupted = False
    t_all = time.perf_counter()
    # SIGTERM (e.g. from `timeout`) stops the benchmark in progress; the rows measured so far
    # are still written (the gpu benchmark fills args.partial_rows as it goes).
    signal.signal(signal.SIGTERM, _stopped)
    for name in names:
        print(
            f"\n=== {name}{' (quick)' if args.quick else ''}: {BENCHMARKS[name].help}", flush=True
        )
        t0 = time.perf_counter()
        args.partial_rows = []
        try:
            rows, table = run_benchmark(name, args)
        except SystemExit:
            raise
        except KeyboardInterrupt as e:
            interrupted = True
            rows = [*args.partial_rows, {"error": f"interrupted ({e or 'SIGINT'})"}]
            table = f"INTERRUPTED after {len(rows) - 1} row(s)"
            if name == "gpu":
                from benchmarks import gpu

                table = gpu.format_rows(rows[:-1]) + "\n\n" + table
        except Exception as e:  # keep going: one failing benchmark must not hide the others
            if len(names) == 1:
                raise
            traceback.print_exc()
            rows, table = [{"error": f"{type(e).__name__}: {e}"}], f"ERROR: {e}"
        wall = time.perf_counter() - t0
        print(table)
        from benchmarks.common import to_markdown

        markdown += [f"\n### {name}\n", to_markdown(table)]
        if name == "gpu":
            from benchmarks import gpu_study

            notes = gpu_study.notes(rows)
            print("\n".join(notes))
            markdown += [line for note in notes for line in ("", note)]
        for line in _ratios(name, rows):
            print("  " + line)
        print(f"  ({name} took {wall:.0f}s)", flush=True)
        results[name] = {"rows": rows, "wall_s": wall}
        if interrupted:
            break
    total = time.perf_counter() - t_all
    print(f"\n=== summary ({total:.0f}s in all)")
    for name, res in results.items():
        for line in _ratios(name, res["rows"]):
            print("  " + line)
    out = {
        "command": command,
        "quick": args.quick,
        "interrupted": interrupted,
        "system": info,
        "total_wall_s": total,
        "results": results,
    }
    if markdown_path:
        Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
        Path(markdown_path).write_text("\n".join(markdown) + "\n")
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(out, indent=2, default=str) + "\n")
        print(f"wrote {json_path}")
    return out


def _stopped(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


if __name__ == "__main__":
    # 124 (as `timeout` says) when stopped early: the files hold the rows measured so far.
    sys.exit(124 if main().get("interrupted") else 0)
