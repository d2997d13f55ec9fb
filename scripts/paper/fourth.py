"""The fourth edition: the third edition's claims decided by seeds added in fixed stages.

    python scripts/paper fourth run [SCENARIO ...]    # the seed blocks, stage by stage
    python scripts/paper fourth analyze [SCENARIO ...]  # the rule on the seeds so far: JSON
    python scripts/paper fourth list [SCENARIO ...]   # each block: stored, run here, missing
    python scripts/paper fourth rerun ALGORITHM [SCENARIO ...]  # one method's stored blocks again
    python scripts/paper fourth null [SCENARIO ...]   # the rule on nulls split from real seeds

**What it reuses.**  Each scenario is the third edition's (:data:`paper.third_scenarios.SCENARIOS`),
with its budget, evaluation cadence and tuned values read from the third edition's analysis
JSON (``docs/results/third/<scenario>.json``: ``sizing`` and ``tuned``, tuned on seeds 100
and 101, which no reported run uses).  Nothing is retuned: the fourth edition only adds
report seeds.

**Seed blocks.**  The report seeds run in blocks ``[0, 5)``, ``[5, 10)``, ``[10, 20)``,
``[20, 40)`` (:data:`BLOCKS`), each one program per method with ``first_seed`` at the block's
start, so a block adds seeds without rerunning the earlier ones (seed s's result does not
depend on which seeds share its program).  Blocks run breadth first: every scenario's first
block, then every scenario's second, and so on up to the scenario's cap (:data:`CAPS`); a
later block runs only while a comparison of the scenario is undecided by the rule of
:mod:`jaxnigt.analysis.sequential` (docs/results/fourth.md, fixed before the runs).

**The store.**  Every finished block leaves its results in the repository
(``docs/results/fourth/store/<scenario>/seeds_<a>-<b>/``: :mod:`paper.store`).  ``run`` on a
fresh clone restores stored blocks instead of running them again, and says so; a block
stopped mid-way (SIGTERM, Ctrl-C) keeps its newest checkpoint in the store and continues from
it there (:func:`jaxnigt.studies.store.run_kept`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np

from jaxnigt import config as config_lib
from jaxnigt.analysis import run_data, sequential
from jaxnigt.run import checkpoint
from jaxnigt.studies import store as results_store
from paper import outages, third, third_scenarios
from paper import store as paper_store
from paper.claims import GROWTH, THIRD_CLAIMS, row_scenarios

ROOT = Path(__file__).resolve().parents[2]
THIRD_DOCS = ROOT / "docs" / "results" / "third"
THIRD_OUT = ROOT / "runs" / "results" / "third"  # the third edition's runs (its --out)
STORE = paper_store.STORE
BLOCKS = ((0, 5), (5, 10), (10, 20), (20, 40))
# The most seeds a comparison may use, by environment (then "undecided at N seeds").
CAPS = {"point_mass": 40, "reacher": 20, "hopper": 10, "walker2d": 10}
# The scenarios run when none are named: point_mass's in the opening table's rows.
NAMES = row_scenarios("point_mass")
SHAPED = ("rennala_nigt", "malenia_nigt")  # their tuned M is M = M_init
# Every scenario the fourth edition runs: the third edition's and the outage rows'
# (:mod:`paper.outages`, tuned values of the scenario each adds outages to).
SCENARIOS = {**third_scenarios.SCENARIOS, **outages.SCENARIOS}


def block_name(block: tuple[int, int]) -> str:
    return f"seeds_{block[0]:02d}-{block[1]:02d}"


def blocks(name: str) -> list[tuple[int, int]]:
    """The scenario's seed blocks up to its environment's cap."""
    cap = CAPS[SCENARIOS[name].env]
    return [b for b in BLOCKS if b[1] <= cap]


def report_raw(name: str, docs: Path = THIRD_DOCS) -> dict:
    """The third edition's report config of ``name`` (default cluster model), rebuilt from
    its analysis JSON: the scenario's config, its sized budget and cadence, its tuned values."""
    a = json.loads((docs / f"{outages.TUNED_FROM.get(name, name)}.json").read_text())
    sc = SCENARIOS[name]
    raw = third.timed(third.scenario_raw(sc), a["sizing"]["budget"], a["sizing"]["every_time"])
    per = {}
    for alg, values in a["tuned"].items():
        per[alg] = {k: values[k] for k in ("learning_rate", "eta")}
        if alg in SHAPED:
            per[alg].update(M=values["M"], M_init=values["M"])
    raw.update(seed=0, per_algorithm=per)
    return raw


def block_config(name: str, block: tuple[int, int]):
    raw = report_raw(name)
    raw.update(first_seed=block[0], seeds=block[1] - block[0])
    return config_lib.from_dict(raw)


def stored(name: str, block: tuple[int, int], store: Path = STORE) -> Path | None:
    where = store / name / block_name(block)
    return where if results_store.holds(where) else None


def run_block(
    name: str, block: tuple[int, int], out: Path, store: Path = STORE, third_out: Path = THIRD_OUT
) -> str:
    """Runs (or restores, or keeps) one block; returns what it did.  The first block is the
    third edition's report run when that ran here (``third_out``) with the same config."""
    run_dir = out / name / block_name(block)
    cfg = block_config(name, block)
    partial = store / name / results_store.PARTIAL / block_name(block)
    earlier = third_out / name / name
    if checkpoint.finished(run_dir, cfg):
        what = "kept (finished here)"
    elif (where := stored(name, block, store)) is not None:
        results_store.restore(where, run_dir)
        what = "restored from the store"
    elif checkpoint.finished(earlier, cfg):
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(earlier, run_dir)
        what = "the third edition's report run (same config), copied"
    else:  # a checkpoint of a block stopped mid-way is kept in the store and continued
        what = results_store.run_kept(cfg, run_dir, None, partial)
    if stored(name, block, store) is None:
        results_store.pack(run_dir, store / name / block_name(block))
    # a checkpoint kept while it ran (or left by another machine's store) is not needed now
    shutil.rmtree(partial, ignore_errors=True)
    return what


def rerun_block(
    name: str, block: tuple[int, int], algorithm: str, out: Path, store: Path = STORE
) -> str:
    """Runs ``algorithm`` of a stored block again and stores the block with its new rows;
    the block's other methods are kept as stored (their programs do not run).  For a change
    of the library that alters one method's results only (amendment of 2026-12-05: the
    asynchronous baselines evaluated on the time grid); a block whose checkpoint of that
    method is kept under ``partial/`` continues from it."""
    where = stored(name, block, store)
    if where is None:
        return "not stored (nothing to rerun)"
    run_dir = out / "rerun" / name / block_name(block)
    partial = store / name / results_store.PARTIAL / block_name(block)
    cfg = block_config(name, block)
    if algorithm not in cfg.algorithms:
        return f"{algorithm} is not a method of {name}"
    kept = json.loads((where / "summary.json").read_text())
    done_here = checkpoint.done_algorithms(run_dir)
    if not checkpoint.finished(run_dir, cfg) or algorithm not in done_here:
        shutil.rmtree(run_dir, ignore_errors=True)
        results_store.restore(where, run_dir)
        results_store.drop_algorithm(run_dir, algorithm)
        what = results_store.run_kept(cfg, run_dir, None, partial)
    else:
        what = "kept (rerun here)"
    # the kept methods' own wall and compile seconds (a resumed run has none for them)
    summary = json.loads((run_dir / "summary.json").read_text())
    for alg, entry in summary.items():
        if alg != algorithm:
            entry.update({k: v for k, v in kept.get(alg, {}).items() if k not in entry})
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    results_store.pack(run_dir, where)
    shutil.rmtree(partial, ignore_errors=True)
    return f"{algorithm} {what}; stored again"


def run_all(names, out: Path, store: Path = STORE, upto: int | None = None) -> None:
    """Every block of ``names``, breadth first (stage by stage), at most ``upto`` stages."""
    for stage, block in enumerate(BLOCKS[:upto]):
        for name in names:
            if block not in blocks(name):
                continue
            if not needs_stage(name, block, out, store):
                print(f"[fourth] {name}: decided before {block_name(block)}", flush=True)
                continue
            what = run_block(name, block, out, store)
            print(f"[fourth] {name} {block_name(block)} (stage {stage + 1}): {what}", flush=True)


def state(name: str, out: Path, store: Path = STORE) -> str:
    """Each block: stored, run here, not needed (the rule decided before it) or missing."""
    parts, needed = [], None
    for block in blocks(name):
        if stored(name, block, store):
            where = "stored"
        elif checkpoint.finished(out / name / block_name(block)):
            where = "run here"
        else:
            if needed is None:  # the rule on the blocks so far, once: every later block alike
                needed = needs_stage(name, block, out, store)
            where = "missing" if needed else "not needed"
        parts.append(f"{block_name(block)} {where}")
    return "; ".join(parts)


def merged_run(name: str, out: Path, store: Path = STORE):
    """The scenario's finished blocks (run here, else restored from the store) as one run;
    None before its first block."""
    runs = []
    for block in blocks(name):
        run_dir = out / name / block_name(block)
        if not checkpoint.finished(run_dir) and (where := stored(name, block, store)):
            results_store.restore(where, run_dir)
        if not checkpoint.finished(run_dir):
            break  # the blocks are looked at in order: seeds 0 … k - 1
        runs.append(run_data.load_run(run_dir))
    return sequential.merge_runs(runs) if runs else None


def analyze(name: str, out: Path, store: Path = STORE) -> dict | None:
    """The sequential rule on the scenario's claim (:data:`paper.claims.THIRD_CLAIMS`) over
    the seeds run so far; ``open`` lists the comparisons that need the next stage."""
    run = merged_run(name, out, store)
    if run is None:
        return None
    sc = SCENARIOS[name]
    claim = THIRD_CLAIMS[sc.claim]
    seeds = min(len(m.seeds) for m in run.algorithms().values())
    result = sequential.compare_sequential(
        run,
        claim.reference,
        statistic=claim.statistic,
        claim=claim.kind,
        baselines=claim.baselines,
        stages=[b[1] for b in blocks(name)],
    )
    where = paper_store.relative(run.path.parent)
    result.update(scenario=name, claim=sc.claim, seeds_run=seeds, run=where)
    result["open"] = [b for b, r in result["comparisons"].items() if r["open"]]
    return result


def gaps(name: str, out: Path, store: Path = STORE) -> dict | None:
    """Each method's largest simulated time between two evaluations of one seed, over the
    scenario's seeds run so far, beside ``eval.every_time`` and its largest logged step (a
    round; for AFedPG a block of arrivals).  None before its first block."""
    from jaxnigt.analysis import comparison

    run = merged_run(name, out, store)
    if run is None:
        return None
    every = report_raw(name)["eval"]["every_time"]
    methods = {
        a: {"largest_gap": comparison.largest_gap(m), "seeds": len(m.seeds)}
        for a, m in run.algorithms().items()
    }
    return {"scenario": name, "every_time": every, "methods": methods}


NULL_EXPERIMENTS = 1000  # splits per method of a scenario (real-data null)


def null(
    name: str,
    out: Path,
    store: Path = STORE,
    experiments: int = NULL_EXPERIMENTS,
    reps: int = 2000,
) -> dict | None:
    """The rule's error rate on nulls built from the scenario's real per-seed values: for
    each method, :func:`jaxnigt.analysis.error_rate.split_null` of its claim statistic over
    every seed run (times to the 80 % target pooled over the whole run, or returns), at the
    scenario's stages and margin.  None before its first block."""
    from jaxnigt.analysis import comparison, error_rate

    run = merged_run(name, out, store)
    if run is None:
        return None
    claim = THIRD_CLAIMS[SCENARIOS[name].claim]
    ratio = claim.statistic not in comparison.RETURN_STATISTICS
    f = comparison.fraction(claim.statistic) if ratio else 0.8
    initial, levels, tg = comparison.pooled_targets(run.algorithms(), run.budget, [f])
    if ratio:  # compare's pooled target (no comparison needed for it)
        target = tg[f]
        margin = sequential.TIME_MARGIN
    else:
        best = max(float(np.median(v)) for v in levels.values())
        width = abs(best - float(np.nanmedian(initial)))
        margin = (-sequential.RETURN_MARGIN * width, sequential.RETURN_MARGIN * width)
    stages = [b[1] for b in blocks(name)]
    methods = {}
    for a, m in run.algorithms().items():
        if ratio:
            values = m.statistic("time", run.budget, target)
        else:
            values = m.statistic(claim.statistic, run.budget)
        methods[a] = error_rate.split_null(
            values, ratio=ratio, stages=stages, margin=margin, experiments=experiments, reps=reps
        )
    return {
        "scenario": name,
        "statistic": claim.statistic,
        "margin": list(margin),
        "methods": methods,
    }


def needs_stage(name: str, block: tuple[int, int], out: Path, store: Path = STORE) -> bool:
    """Whether ``block`` is needed: the scenario's earlier blocks leave a comparison open
    (the first block always is)."""
    if block == blocks(name)[0] or stored(name, block, store):
        return True
    result = analyze(name, out, store)
    return result is not None and bool(result["open"])


GAP_MARGIN = (-math.log(1.25), math.log(1.25))  # the time margin, as a log ratio of ratios


def gap(env: str, baseline: str, out: Path, store: Path = STORE) -> dict | None:
    """The lead-growth claim (:data:`paper.claims.GROWTH`) from ``<env>_sqrt`` to
    ``<env>_sqrt_dim`` by the sequential rule: at each look, the growth of the log time-to-80 %
    ratio (reference over
    ``baseline``) on the first k seeds of both scenarios, each scenario's 80 % target pooled
    over its first k seeds (:func:`jaxnigt.analysis.verdicts.speed_lead_growth`; the four
    groups are the same seeds, resampled jointly).  None
    before both scenarios have a block, or where ``env`` has only one of them (hopper)."""
    from jaxnigt.analysis import comparison, verdicts

    names = [f"{env}_{key}" for key in GROWTH.settings]
    pair = (GROWTH.reference, baseline)
    if not all(n in third_scenarios.SCENARIOS for n in names):
        return None
    runs = [merged_run(n, out, store) for n in names]
    if any(r is None for r in runs):
        return None
    seeds = min(len(m.seeds) for r in runs for m in r.algorithms().values())
    stages = [b[1] for b in blocks(names[0])]

    def interval_at(k, level):
        groups = []
        for run in runs:
            sub = {a: sequential.first_seeds(m, k) for a, m in run.algorithms().items()}
            part = dataclasses.replace(run, methods=sub)
            a = comparison.compare(
                part, GROWTH.reference, statistic="time_to_80", baselines=[baseline], reps=200
            )
            target = a["targets"]["0.8"]
            groups.append(tuple(sub[m].statistic("time", run.budget, target) for m in pair))
        used = {
            tuple(sequential.first_seeds(r.algorithms()[m], k).seeds) for r in runs for m in pair
        }
        same = len(used) == 1
        growth = verdicts.speed_lead_growth(*groups, level=level, paired=same)
        return growth["log_lead_difference"]

    result = sequential.run_rule(
        interval_at, lambda k: GAP_MARGIN, tie=0.0, stages=stages, available=seeds
    )
    verdict = sequential.claim_verdict("ahead", result)
    result.update(env=env, baseline=baseline, scenarios=names, seeds_run=seeds, verdict=verdict)
    return result


def clock_inflation(name: str) -> dict:
    """``python scripts/paper outages predict``: for the outage scenario ``name``
    (:mod:`paper.outages`), each method's simulated clock alone (no training) over the
    scenario's budget, with and without its outages: trajectories delivered by the budget
    and the time per step (a round, or a block of arrivals); the inflation is the constant
    run's trajectories over the outage run's.  The compute times are deterministic in these
    scenarios and the trace is fixed, so one key gives the runs' clocks exactly."""
    import jax

    from jaxnigt.run import trainer as trainer_lib

    with_power = report_raw(name)
    without = report_raw(outages.TUNED_FROM[name])
    budget = with_power["budget"]
    out = {}
    for alg in with_power["algorithms"]:
        found = {}
        for label, raw in (("constant", without), ("outages", with_power)):
            tr = trainer_lib.make_trainer(config_lib.from_dict(raw), alg)
            per_step = tr.clock(16)[1]
            steps = math.ceil(2 * budget / per_step) + 16
            trajectories, ends = jax.device_get(
                trainer_lib.clock_program(tr)(jax.random.key(0), steps)
            )
            inside = np.asarray(ends) <= budget
            assert not inside[-1], f"{name} {alg}: the clock's steps end before the budget"
            found[label] = {
                "steps": int(inside.sum()),
                "trajectories": float(np.asarray(trajectories)[inside].sum()),
                "time_per_step": budget / max(int(inside.sum()), 1),
            }
        found["inflation"] = found["constant"]["trajectories"] / found["outages"]["trajectories"]
        out[alg] = found
    return out
