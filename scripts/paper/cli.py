"""``python scripts/paper COMMAND ...``: the paper pipeline's commands.

    python scripts/paper page                         # docs/results.md from the JSON
    python scripts/paper third look|tune|run|analyze|all|list [SCENARIO ...]
    python scripts/paper fourth run|list [SCENARIO ...]
    python scripts/paper fifth run|analyze|list [SCENARIO ...]  # exact tests (results/fifth.md)
    python scripts/paper gpu OUT SECONDS [--tiny]     # the Humanoid scenarios on a GPU node
    python scripts/paper adastop                      # retired: where its output and code are
    python scripts/paper outages traces|predict [SCENARIO ...]  # the outage rows' traces, clock
    python scripts/paper physics store|analyze        # the heterogeneous-physics row
    python scripts/paper heavy run|store|analyze      # the heavy-tailed rows
    python scripts/paper hetero run|store|analyze     # the heterogeneous rivals' rows

Each stage is resumable: what finished is kept and skipped.  ``COMMAND --help`` lists the
options of each.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import shlex
import sys
from pathlib import Path

from jaxnigt.run import signals
from jaxnigt.studies import tuning
from paper import (
    fifth,
    fourth,
    fourth_page,
    gpu,
    heavy,
    hetero,
    outages,
    page,
    physics,
    rows,
    third,
    third_scenarios,
)
from paper import store as paper_store
from paper.claims import GROWTH
from paper.scenarios import parse_models

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "results"


def _page(argv) -> int:
    p = argparse.ArgumentParser(prog="paper page", description=page.__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=Path, default=DOCS)
    args = p.parse_args(argv)
    for target, text in page.pages(args.docs).items():
        target.write_text(text)
        print(f"[results] wrote {target}")
    return 0


def _jobs(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help=f"{what}: programs at once, in separate processes (one per core)",
    )


def _numbers(param: str, kind: type, low: float, high: float):
    """An argparse ``type``: comma-separated ``kind`` values in ``(low, high]`` for ``param``
    (:func:`jaxnigt.studies.tuning.parse_numbers`, its error as argparse's)."""

    def parse(text: str) -> tuple:
        try:
            return tuning.parse_numbers(text, param, kind, low, high)
        except tuning.TuningError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _third_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paper third", description=third.__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["look", "tune", "run", "analyze", "all", "list"])
    p.add_argument("names", nargs="*", help="scenarios (default: every point_mass one)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "results" / "third")
    p.add_argument("--docs", type=Path, default=DOCS / "third")
    p.add_argument("--quick", action="store_true", help="tiny budgets and grid: a smoke test")
    p.add_argument(
        "--models",
        type=parse_models,
        help="tune/run: only these cluster models, e.g. shared/all,independent/all",
    )
    variant = "(a labelled variant: give it its own --out and --docs)"
    p.add_argument(
        "--eta",
        type=_numbers("eta", float, 0.0, 1.0),
        help=f"η values instead of the paper's 0.001,0.01,0.1 {variant}",
    )
    p.add_argument(
        "--M",
        type=_numbers("M", int, 0, math.inf),
        help=f"M = M_init values instead of the paper's 20,30,50 for Rennala and "
        f"Malenia NIGT {variant}",
    )
    p.add_argument(
        "--store",
        type=Path,
        default=paper_store.STORE,
        help="look/tune: the results store that keeps each finished program and restores it "
        "on a fresh clone (not used with --quick, --eta or --M)",
    )
    _jobs(p, "look/tune")
    return p


def _third(argv) -> int:
    p = _third_parser()
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs: got {args.jobs}; expected >= 1")
    unknown = [n for n in args.names if n not in third_scenarios.SCENARIOS]
    if unknown:
        p.error(f"unknown scenarios {unknown}; allowed: {', '.join(third_scenarios.SCENARIOS)}")
    names = args.names or [n for n in third_scenarios.SCENARIOS if n.startswith("point_mass")]
    grid = third.variant_grid(args.eta, args.M)
    store = None if args.quick or grid is not None else args.store
    scenarios = third_scenarios.SCENARIOS
    pipes = [
        third.Pipeline(scenarios[n], args.out, args.docs, args.quick, grid, args.jobs, store)
        for n in names
    ]
    if args.command == "list":
        for pipe in pipes:
            print(f"{pipe.sc.name} (claim {pipe.sc.claim}): {third.state(pipe)}")
        return 0
    stages = ("look", "tune", "run", "analyze") if args.command == "all" else (args.command,)
    for pipe in pipes:
        pipe.where.mkdir(parents=True, exist_ok=True)
        for stage in stages:
            getattr(pipe, stage)(*(() if stage in ("look", "analyze") else (args.models,)))
    if "analyze" in stages:
        for env in sorted({third_scenarios.SCENARIOS[n].env for n in names}):
            third.gap_growth(args.out, args.docs, env)
    return 0


def _gpu(argv) -> int:
    p = argparse.ArgumentParser(prog="paper gpu", description=gpu.__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("seconds", type=float)
    p.add_argument("--tiny", action="store_true", help="point_mass on the CPU: a check")
    p.add_argument("--rate", type=float, help="env steps per second the sizing assumes")
    p.add_argument("--compile", type=float, help="seconds per compiled program assumed")
    args = p.parse_args(argv)
    gpu.run(args.out, args.seconds, tiny=args.tiny, rate=args.rate, compile_s=args.compile)
    return 0


def _fourth(argv) -> int:
    p = argparse.ArgumentParser(prog="paper fourth", description=fourth.__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["run", "analyze", "list", "rerun", "null"])
    p.add_argument(
        "names",
        nargs="*",
        help=f"scenarios (default: {', '.join(fourth.NAMES)}); rerun: the algorithm first",
    )
    p.add_argument("--docs", type=Path, default=DOCS / "fourth")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "results" / "fourth")
    p.add_argument("--store", type=Path, default=paper_store.STORE)
    p.add_argument("--stages", type=int, help="run: at most this many stages of seed blocks")
    args = p.parse_args(argv)
    algorithm = args.names.pop(0) if args.command == "rerun" and args.names else None
    if args.command == "rerun" and algorithm is None:
        p.error("rerun: give the algorithm to run again (e.g. afedpg), then the scenarios")
    unknown = [n for n in args.names if n not in fourth.SCENARIOS]
    if unknown:
        p.error(f"unknown scenarios {unknown}; allowed: {', '.join(fourth.SCENARIOS)}")
    names = args.names or list(fourth.NAMES)
    if args.command == "rerun":
        for name in names:
            for block in fourth.blocks(name):
                what = fourth.rerun_block(name, block, algorithm, args.out, args.store)
                print(f"[fourth] {name} {fourth.block_name(block)}: {what}", flush=True)
    elif args.command == "list":
        for name in names:
            print(f"{name}: {fourth.state(name, args.out, args.store)}")
    elif args.command == "null":
        _fourth_null(args, names)
    elif args.command == "run":
        fourth.run_all(names, args.out, args.store, args.stages)
    else:
        _fourth_analyze(args, names)
    return 0


def _fifth(argv) -> int:
    p = argparse.ArgumentParser(
        prog="paper fifth", description=fifth.__doc__.split("\n\n")[0], allow_abbrev=False
    )
    p.add_argument("command", choices=["run", "analyze", "list", "power", "null"])
    p.add_argument(
        "names", nargs="*", help="scenarios (default: every one the fourth stored); power: N"
    )
    p.add_argument("--docs", type=Path, default=fifth.DOCS)
    p.add_argument("--out", type=Path, default=fifth.OUT)
    p.add_argument("--store", type=Path, default=paper_store.STORE)
    args = p.parse_args(argv)
    if args.command == "power":
        n = int(args.names[0]) if args.names else 40_000
        found = fifth.power_tests(n)
        args.docs.mkdir(parents=True, exist_ok=True)
        (args.docs / "power_tests.json").write_text(json.dumps(found, indent=2) + "\n")
        print(json.dumps(found["censored"], indent=1))
        return 0
    known = fifth.names()
    unknown = [n for n in args.names if n not in known]
    if unknown:
        p.error(f"unknown scenarios {unknown}; allowed: {', '.join(known)}")
    todo = args.names or known
    if args.command == "null":
        found = {n: r for n in todo if (r := fifth.null(n, out=args.out, store=args.store))}
        for n, r in found.items():
            rates = {a: round(m["ahead_either_side"], 3) for a, m in r["methods"].items()}
            print(f"[fifth] {n} ({r['seeds']} seeds): a side ahead under the split null {rates}")
        (args.docs / "null.json").write_text(json.dumps(found, indent=1) + "\n")
        return 0
    if args.command == "list":
        for name in todo:
            print(f"{name}: {fifth.state(name, args.out, args.store)}")
    elif args.command == "run":
        fifth.run_all(todo, args.out, args.store)
    else:
        fifth.analyze_all(todo, args.docs, args.out, args.store)
        print(f"[fifth] wrote {args.docs}")
    return 0


def _merge_json(path: Path, found: dict) -> None:
    """Writes ``found`` into the JSON object at ``path``, keeping its other entries."""
    known = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**known, **found}, indent=2, sort_keys=True) + "\n")


def _fourth_null(args, names) -> None:
    """``fourth null``: the rule on nulls split from each scenario's real seeds (null.json)."""
    found = {}
    for name in names:
        if (r := fourth.null(name, args.out, args.store)) is not None:
            found[name] = r
            rates = {a: f"{m['ahead_either_side']:.3f}" for a, m in r["methods"].items()}
            print(f"[fourth] {name}: a side ahead under the split null {rates}", flush=True)
    args.docs.mkdir(parents=True, exist_ok=True)
    _merge_json(args.docs / "null.json", found)
    print(f"[fourth] wrote {args.docs / 'null.json'}")


def _fourth_analyze(args, names) -> None:
    """``fourth analyze``: each scenario's JSON, the lead-growth claims' and gaps.json, and
    the forest plot."""
    args.docs.mkdir(parents=True, exist_ok=True)
    found_gaps = {}
    for name in names:
        result = fourth.analyze(name, args.out, args.store)
        if result is None:
            print(f"[fourth] {name}: no block finished yet")
            continue
        (args.docs / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        found_gaps[name] = fourth.gaps(name, args.out, args.store)
        verdicts = {b: r["verdict"] for b, r in result["comparisons"].items()}
        print(f"[fourth] {name} ({result['seeds_run']} seeds run): {verdicts}")
    for env in sorted({fourth.SCENARIOS[n].env for n in names}):
        for baseline in GROWTH.baselines:
            g = fourth.gap(env, baseline, args.out, args.store)
            if g is not None:
                path = args.docs / f"{env}_gap_{baseline}.json"
                path.write_text(json.dumps(g, indent=2) + "\n")
                print(f"[fourth] {env} lead growth over {baseline}: {g['verdict']}")
    _merge_json(args.docs / "gaps.json", found_gaps)
    print(f"[fourth] wrote {fourth_page.forest(DOCS, args.docs / 'forest.png')}")


def _outages(argv) -> int:
    p = argparse.ArgumentParser(prog="paper outages", description=outages.__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["traces", "predict"])
    p.add_argument(
        "names", nargs="*", help=f"predict: scenarios (default: {', '.join(outages.SCENARIOS)})"
    )
    args = p.parse_args(argv)
    if args.command == "traces":
        for path in outages.write_traces():
            print(f"[outages] wrote {paper_store.relative(path)}")
        return 0
    unknown = [n for n in args.names if n not in outages.SCENARIOS]
    if unknown:
        p.error(f"unknown scenarios {unknown}; allowed: {', '.join(outages.SCENARIOS)}")
    for name in args.names or list(outages.SCENARIOS):
        found = fourth.clock_inflation(name)
        each = [
            f"{a} {v['inflation']:.2f}x ({v['constant']['steps']} -> {v['outages']['steps']} steps)"
            for a, v in found.items()
        ]
        print(f"[outages] {name}, slowdown over the budget: {'; '.join(each)}", flush=True)
    return 0


def _physics(argv) -> int:
    p = argparse.ArgumentParser(prog="paper physics", description=physics.__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["store", "analyze"])
    args = p.parse_args(argv)
    if args.command == "store":
        for path in physics.store():
            print(f"[physics] stored {paper_store.relative(path)}")
        return 0
    found = physics.analyze()
    medians = {m: {t: round(v["median"], 3) for t, v in per.items()} for m, per in found.items()}
    print(f"[physics] wrote docs/results/physics/compare.json, types.json; medians {medians}")
    return 0


def _rows(module, argv) -> int:
    """``paper heavy|hetero run|store|analyze [ROW ...]``: a page of registered rows."""
    spec, name = module.SPEC, module.__name__.split(".")[-1]
    p = argparse.ArgumentParser(prog=f"paper {name}", description=module.__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["run", "store", "analyze"])
    p.add_argument("rows", nargs="*", help=f"default all: {', '.join(spec.rows)}")
    args = p.parse_args(argv)
    unknown = [r for r in args.rows if r not in spec.rows]
    if unknown:
        p.error(f"unknown rows {unknown}; allowed: {', '.join(spec.rows)}")
    results = {}
    for row in args.rows or list(spec.rows):
        if args.command == "store":
            for path in rows.store(spec, row):
                print(f"[{name}] stored {paper_store.relative(path)}")
            continue
        results[row] = (rows.run if args.command == "run" else rows.analyze)(spec, row)
        for b, c in results[row].get("comparisons", {}).items():
            print(f"[{name}] {row}: {spec.reference} vs {b}: {c['verdict']} (p {c['p']})")
    if args.command == "analyze":
        found = rows.family(spec, results)
        (spec.docs / "family.json").write_text(json.dumps(found, indent=2) + "\n")
        print(f"[{name}] wrote docs/results/{name}/family.json: {found}")
    return 0


def _adastop(argv) -> int:
    """The AdaStop cross-check of the fourth edition ran once: its output is kept, its code is
    in the git history (docs/results/fourth.md, "An external cross-check")."""
    print(
        "paper adastop: retired. Its output is docs/results/fourth/adastop.json and adastop.md "
        "(made at commit 9cae431); the code, scripts/paper/adastop_check.py, is in the git "
        "history: docs/results/fourth.md says how to run it again.",
        file=sys.stderr,
    )
    return 2


COMMANDS = {"page": _page, "third": _third, "fourth": _fourth, "fifth": _fifth, "gpu": _gpu}
COMMANDS.update(adastop=_adastop, outages=_outages, physics=_physics)
COMMANDS.update(heavy=functools.partial(_rows, heavy), hetero=functools.partial(_rows, hetero))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    try:
        return COMMANDS[argv[0]](argv[1:])
    except signals.Interrupted as e:  # the programs checkpointed; what finished is kept
        again = shlex.join(["python", "scripts/paper", *argv])
        print(f"paper: {e}; continue with: {again}", file=sys.stderr)
        return e.exit_status
