"""The fifth edition: the fourth edition's comparisons decided by exact tests.

    python scripts/paper fifth run [SCENARIO ...]      # the seed blocks the rule still needs
    python scripts/paper fifth analyze [SCENARIO ...]  # the rule on the seeds so far: JSON, figures
    python scripts/paper fifth list [SCENARIO ...]     # each block: stored, run here, not needed
    python scripts/paper fifth power [EXPERIMENTS]     # the rule's test beside others, same draws
    python scripts/paper fifth null [SCENARIO ...]     # the rule on nulls split from real seeds
    python scripts/paper fifth stability               # the decisions under 30 fresh draws

**The rule** is docs/results/fifth.md, committed before any analysis under it: each seed's
restricted time ``min(T, B)`` to a target fixed from the third edition's tuning look (or its
return statistic), the exact paired sign-flip test (:mod:`jaxnigt.analysis.randomization`),
``alpha = 0.10`` split over the looks that can reach their share
(:func:`jaxnigt.analysis.sequential.run_exact_rule`), TOST equivalence, Holm over each family.

**What it reuses.**  The fourth edition's scenarios, seed blocks and store
(:mod:`paper.fourth`): the blocks ``[0, 5)``, ``[5, 10)``, ``[10, 20)``, ``[20, 40)`` of the
same configs, nothing retuned; a block the fourth edition stored is restored, one it did not
run is run (``run``) only while a comparison of its scenario is undecided on the blocks
before it, up to the caps of :data:`CAPS` (raised from the fourth edition's 20 for reacher
and 10 for hopper and walker2d).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from jaxnigt.analysis import looks, run_data, sequential, survival
from jaxnigt.run import checkpoint
from jaxnigt.studies import store as results_store
from paper import fourth, outages, third_scenarios
from paper import store as paper_store
from paper.claims import GROWTH, THIRD_CLAIMS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "results" / "fifth"
OUT = ROOT / "runs" / "results" / "fourth"  # the blocks' run directories (the fourth's)
CAPS = {"point_mass": 40, "reacher": 40, "hopper": 20, "walker2d": 20}
GAP_MARGIN = fourth.GAP_MARGIN  # ±log 1.25, a log ratio of ratios
ALPHA = sequential.ALPHA


def names() -> list[str]:
    """The scenarios the fifth edition decides: every one the fourth edition stored."""
    return [n for n in fourth.SCENARIOS if fourth.stored(n, fourth.BLOCKS[0])]


def blocks(name: str) -> list[tuple[int, int]]:
    """The scenario's seed blocks up to its environment's cap (:data:`CAPS`)."""
    cap = CAPS[fourth.SCENARIOS[name].env]
    return [b for b in fourth.BLOCKS if b[1] <= cap]


def fixed_target(name: str) -> dict:
    """The target fixed before any look: the third edition's tuning look of the scenario (of
    its base scenario for an outage one), ``{"value", "R0", "R_best", "fraction"}``."""
    base = outages.TUNED_FROM.get(name, name)
    a = json.loads((fourth.THIRD_DOCS / f"{base}.json").read_text())
    t = a["sizing"]["look_target"]
    return {k: t[k] for k in ("value", "R0", "R_best", "fraction")} | {"from": base}


def merged_run(name: str, out: Path = OUT, store: Path = fourth.STORE):
    """The scenario's finished blocks, in order, up to its cap, as one run (None before its
    first block); a block stored and not here is restored."""
    runs = []
    for block in blocks(name):
        run_dir = out / name / fourth.block_name(block)
        if not checkpoint.finished(run_dir) and (where := fourth.stored(name, block, store)):
            results_store.restore(where, run_dir)
        if not checkpoint.finished(run_dir):
            break
        runs.append(run_data.load_run(run_dir))
    return sequential.merge_runs(runs) if runs else None


def analyze(name: str, out: Path = OUT, store: Path = fourth.STORE, seed: int = 0):
    """The rule on the scenario's claim over the seeds run so far; ``open`` lists the
    comparisons that need the next block.  ``seed``: of the bootstrap second views (no
    draw decides).  None before the scenario's first block."""
    run = merged_run(name, out, store)
    if run is None:
        return None
    claim = THIRD_CLAIMS[fourth.SCENARIOS[name].claim]
    target = fixed_target(name)
    ratio = claim.statistic not in sequential.RETURN_STATISTICS
    result = sequential.compare_sequential(
        run,
        claim.reference,
        statistic=claim.statistic,
        claim=claim.kind,
        baselines=claim.baselines,
        stages=[b[1] for b in blocks(name)],
        test="exact",
        target=target["value"] if ratio else None,
        improvement=target["R_best"] - target["R0"],
        seed=seed,
    )
    seeds = min(len(m.seeds) for m in run.algorithms().values())
    result.update(scenario=name, claim=claim.name, seeds_run=seeds, fixed_target=target)
    result["open"] = [b for b, r in result["comparisons"].items() if r["open"]]
    used = max(r["seeds"] for r in result["comparisons"].values())  # the rule's last look
    result["kaplan_meier"] = curves(run, target["value"], used)
    result["run"] = paper_store.relative(run.path.parent)
    return result


def curves(run, target: float, seeds: int) -> dict:
    """Each method's Kaplan–Meier curve of its times to the fixed target over its first
    ``seeds`` seeds (those of the rule's last look)."""
    times = lambda m: m.statistic("time", run.budget, target)[:seeds]
    return {
        "target": target,
        "seeds": seeds,
        "curves": {
            a: survival.kaplan_meier(times(m), run.budget) for a, m in run.algorithms().items()
        },
    }


def gap(env: str, baseline: str, out: Path = OUT, store: Path = fourth.STORE) -> dict | None:
    """The lead-growth claim (:data:`paper.claims.GROWTH`) from ``<env>_sqrt`` to
    ``<env>_sqrt_dim`` under the rule: per seed, the growth of the log ratio of restricted
    times (baseline over reference) at each scenario's fixed target, tested by sign flips
    (docs/results/fifth.md).  None before both scenarios have a block."""
    pair = (GROWTH.reference, baseline)
    scenarios = [f"{env}_{key}" for key in GROWTH.settings]
    if not all(n in third_scenarios.SCENARIOS for n in scenarios):
        return None
    runs = [merged_run(n, out, store) for n in scenarios]
    if any(r is None for r in runs):
        return None
    seeds = min(len(m.seeds) for r in runs for m in r.algorithms().values())
    logs = []
    for n, run in zip(scenarios, runs, strict=True):
        t = fixed_target(n)["value"]
        ref, base = (
            looks.restricted(run.algorithms()[m].statistic("time", run.budget, t), run.budget)
            for m in pair
        )
        logs.append(np.log(base[:seeds] / ref[:seeds]))
    growth = logs[1] - logs[0]

    def look_at(k: int, level: float) -> dict:
        g = growth[:k]
        one = looks.look(
            looks.RETURN, g, np.zeros_like(g), paired=True, level=level, margin=GAP_MARGIN
        )
        one["values"] = {"reference": g.tolist(), "baseline": [0.0] * k}
        return one

    result = sequential.run_exact_rule(
        look_at,
        tie=0.0,
        stages=[b[1] for b in blocks(scenarios[0])],
        alpha=ALPHA,
        available=seeds,
    )
    result.update(
        env=env,
        baseline=baseline,
        scenarios=scenarios,
        seeds_run=seeds,
        verdict=sequential.claim_verdict("ahead", result),
    )
    return result


def needs_stage(name: str, block: tuple[int, int], out: Path = OUT, store=fourth.STORE) -> bool:
    """Whether ``block`` is needed: the first always; a later one while the blocks before it
    leave a comparison of the scenario undecided (or it is stored already)."""
    if block == blocks(name)[0] or fourth.stored(name, block, store):
        return True
    result = analyze(name, out, store)
    if result is None or result["seeds_run"] < block[0]:
        return False
    return bool(result["open"])


def run_all(todo, out: Path = OUT, store: Path = fourth.STORE) -> None:
    """Every needed block of ``todo``, breadth first (stage by stage)."""
    for stage, block in enumerate(fourth.BLOCKS):
        for name in todo:
            if block not in blocks(name):
                continue
            if not needs_stage(name, block, out, store):
                print(f"[fifth] {name}: decided before {fourth.block_name(block)}", flush=True)
                continue
            what = fourth.run_block(name, block, out, store)
            print(f"[fifth] {name} {fourth.block_name(block)} (stage {stage + 1}): {what}")


def state(name: str, out: Path = OUT, store: Path = fourth.STORE) -> str:
    """Each block: stored, run here, not needed (the rule decided before it) or missing."""
    parts = []
    for block in blocks(name):
        if fourth.stored(name, block, store):
            where = "stored"
        elif checkpoint.finished(out / name / fourth.block_name(block)):
            where = "run here"
        else:
            where = "missing" if needs_stage(name, block, out, store) else "not needed"
        parts.append(f"{fourth.block_name(block)} {where}")
    return "; ".join(parts)


def plot_curves(result: dict, path: Path) -> Path:
    """The scenario's Kaplan–Meier figure (every seed run, the fixed target)."""
    km = result["kaplan_meier"]
    title = (
        f"{result['scenario']}: seeds at the fixed target by simulated time\n"
        f"({km['seeds']} seeds of each method; +: not there by the budget)"
    )
    return survival.plot(km["curves"], path, title=title, target=km["target"])


def write(docs: Path, name: str, result: dict) -> None:
    """A scenario's JSON (every float finite or a string) and its figure."""
    docs.mkdir(parents=True, exist_ok=True)
    (docs / f"{name}.json").write_text(json.dumps(_finite(result), indent=2) + "\n")
    if "kaplan_meier" in result:
        plot_curves(result, docs / f"{name}_km.png")


def _finite(x):
    """JSON without NaN or infinities: ``inf`` as ``"inf"`` (the page formats both)."""
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, np.generic):
        return _finite(x.item())
    return x


def unfinite(x):
    """The inverse of :func:`_finite` for reading a scenario's JSON back."""
    if isinstance(x, dict):
        return {k: unfinite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [unfinite(v) for v in x]
    if x in ("inf", "-inf", "nan"):
        return float(x)
    return x


def decide_again(look: dict, kind: str, level: float, seed: int) -> str:
    """A stored look's outcome recomputed from its per-seed values (restricted times, or
    returns) with ``seed`` for every random draw (:func:`jaxnigt.analysis.looks.look`, then
    the rule's decision at the look's level)."""
    x, y = (np.asarray(look["values"][k], np.float64) for k in ("reference", "baseline"))
    budget = float(max(np.max(x), np.max(y))) if kind == looks.TIME else None
    margin = tuple(look["margin"]) if look.get("margin") else None
    again = looks.look(
        kind, x, y, paired=True, level=level, margin=margin, budget=budget,
        intervals=False, seed=seed,
    )  # fmt: skip
    return sequential.exact_outcome(again, looks.tie_of(kind), 1.0 - level)


def stability(results: dict[str, dict], gaps: dict[str, dict], draws: int = 30) -> dict:
    """Every decided comparison's deciding look recomputed ``draws`` times, each with fresh
    seeds for every random draw a look makes (the bootstrap view; a Monte Carlo p beyond 40
    paired seeds): how many repetitions give the published outcome.  Exact tests decide every
    look up to 40 seeds, so a decided row must give it every time."""
    rows = []
    for name, result in results.items():
        ratio = result["statistic"] not in sequential.RETURN_STATISTICS
        for b, r in result["comparisons"].items():
            rows.append(
                (f"{name}: {result['reference']} vs {b}", r, looks.TIME if ratio else looks.RETURN)
            )
    rows += [(key, g, looks.RETURN) for key, g in gaps.items()]
    found = {}
    for key, r, kind in rows:
        last = r["looks"][-1]
        if r["outcome"] == sequential.UNDECIDED:
            continue
        same = sum(
            decide_again(last, kind, r["level"], seed) == last["outcome"]
            for seed in range(1, draws + 1)
        )
        found[key] = {"outcome": last["outcome"], "seeds": r["seeds"], "same": same}
    return {"draws": draws, "rows": found}


def families(results: dict[str, dict], gaps: dict[str, dict]) -> dict:
    """Holm at 10 % over each family (docs/results/fifth.md): the opening table's distinct
    comparisons (the lead growths included) and the outage rows; their equivalence readings
    apart, Holm over the TOST p-values of *every* comparison of the family (a family chosen
    by outcome would not hold its error: the note of 7 Dec on the rule's page)."""
    from jaxnigt.analysis import verdicts

    rows: dict[str, dict] = {"paper": {}, "outages": {}}
    tost: dict[str, dict] = {"paper": {}, "outages": {}}
    for name, result in results.items():
        fam = "outages" if name in outages.SCENARIOS else "paper"
        for b, r in result["comparisons"].items():
            key = f"{name}: {result['reference']} vs {b}"
            rows[fam][key] = r["p"]
            tost[fam][key] = r["tost_p"]
    for key, g in gaps.items():
        rows["paper"][key] = g["p"]
        tost["paper"][key] = g["tost_p"]
    return {
        fam: {
            "holm": verdicts.holm_adjusted(rows[fam]),
            "equivalence_holm": verdicts.holm_adjusted(tost[fam]),
            "size": len(rows[fam]),
        }
        for fam in rows
    }


def analyze_all(todo, docs: Path = DOCS, out: Path = OUT, store: Path = fourth.STORE) -> dict:
    """Every scenario's analysis and figure, the lead growths, the families and the
    stability check, written under ``docs``; returns ``{"scenarios", "gaps", "checks"}``."""
    results = {}
    for name in todo:
        result = analyze(name, out, store)
        if result is None:
            print(f"[fifth] {name}: no block finished yet", flush=True)
            continue
        results[name] = result
        write(docs, name, result)
        said = {b: r["verdict"] for b, r in result["comparisons"].items()}
        print(f"[fifth] {name} ({result['seeds_run']} seeds run): {said}", flush=True)
    gaps = {}
    for env in GROWTH.envs:
        for baseline in GROWTH.baselines:
            g = gap(env, baseline, out, store)
            if g is not None:
                key = f"{env}_gap: {GROWTH.reference} vs {baseline}"
                gaps[key] = g
                write(docs, f"{env}_gap_{baseline}", g)
                print(f"[fifth] {key}: {g['verdict']}", flush=True)
    checks = {"families": families(results, gaps), "stability": stability(results, gaps)}
    (docs / "families.json").write_text(json.dumps(_finite(checks), indent=2) + "\n")
    return {"scenarios": results, "gaps": gaps, "checks": checks}


#: The tests :func:`power_tests` puts side by side (the first is the rule's).
POWER_TESTS = ("sign_flip_log", "sign_flip_rmst", "signed_rank", "paired_t")


def power_tests(experiments: int = 40_000, seed: int = 7) -> dict:
    """The power at a true 1.5× speed-up of the rule's test (its own look, on log restricted
    times) at one look of 20 paired seeds, two-sided 10 %, beside other tests of the same
    restricted times on the *same* draws (:data:`jaxnigt.analysis.error_rate.POINT3` at 30 %
    and 60 % censored; experiment e draws from ``default_rng([seed, e])``): the registered
    sign-flip of differences, the exact Wilcoxon signed-rank (the sign-flip of signed ranks)
    and the paired t (scipy; not exact under ties).  The defaults reproduce the table of the
    note that moved the rule to the log scale.  Returns each test's share of experiments with
    p <= 0.10 and its Monte Carlo standard error."""
    from scipy import stats as sps

    from jaxnigt.analysis import error_rate, randomization

    found = {}
    for censored in (0.3, 0.6):
        regime = error_rate.POINT3._replace(censored=censored)
        hits = dict.fromkeys(POWER_TESTS, 0)
        for e in range(experiments):
            rng = np.random.default_rng([seed, e])
            ref, base, b = error_rate.draw(rng, regime, 20, kind=looks.TIME, effect=1.5)
            rule = looks.look(looks.TIME, ref, base, paired=True, level=0.9, budget=b,
                              intervals=False)  # fmt: skip
            hits["sign_flip_log"] += rule["p"] <= 0.1
            x, y = looks.restricted(ref, b), looks.restricted(base, b)
            d = (y - x)[y != x]
            hits["sign_flip_rmst"] += randomization.sign_flip_p(d) <= 0.1
            ranks = sps.rankdata(np.abs(d)) * np.sign(d)
            hits["signed_rank"] += randomization.sign_flip_p(ranks) <= 0.1
            if d.size:  # scipy's t of all-zero differences is undefined
                hits["paired_t"] += sps.ttest_rel(y, x).pvalue <= 0.1
        share = {k: v / experiments for k, v in hits.items()}
        found[str(censored)] = {
            k: {"power": r, "se": math.sqrt(r * (1 - r) / experiments)} for k, r in share.items()
        }
    command = f"python scripts/paper fifth power {experiments}"
    return {"command": command, "experiments": experiments, "seed": seed, "censored": found}


def null(name: str, experiments: int = 1000, out: Path = OUT, store: Path = fourth.STORE):
    """The rule's error on nulls split from the scenario's real seeds: for each method,
    :func:`jaxnigt.analysis.error_rate.split_null` of its per-seed values (times to the fixed
    target, restricted at the budget; or returns) over every seed run, at the scenario's
    stages and margin.  Halves of fewer seeds than a decisive look decide nothing.  None
    before the scenario's first block."""
    from jaxnigt.analysis import error_rate

    run = merged_run(name, out, store)
    if run is None:
        return None
    claim = THIRD_CLAIMS[fourth.SCENARIOS[name].claim]
    ratio = claim.statistic not in sequential.RETURN_STATISTICS
    target = fixed_target(name)
    if ratio:
        margin = sequential.TIME_MARGIN
    else:
        width = sequential.RETURN_MARGIN * abs(target["R_best"] - target["R0"])
        margin = (-width, width)
    methods = {}
    for a, m in run.algorithms().items():
        if ratio:
            values = m.statistic("time", run.budget, target["value"])
        else:
            values = m.statistic(claim.statistic, run.budget)
        if len(values) // 2 < blocks(name)[0][1]:
            continue  # halves below the first look
        methods[a] = error_rate.split_null(
            values, ratio=ratio, stages=[b[1] for b in blocks(name)], margin=margin,
            experiments=experiments, budget=run.budget if ratio else None,
        )  # fmt: skip
    seeds = min(len(m.seeds) for m in run.algorithms().values())
    return {"scenario": name, "seeds": seeds, "experiments": experiments, "methods": methods}
