"""An outside check of the fourth edition's verdicts: the same per-seed values, decided by
AdaStop (Mathieu et al., TMLR 2024; the ``adastop`` package, the ``paper`` extra).

    python scripts/paper adastop [SCENARIO ...]   # docs/results/fourth/adastop.{json,md}

**What is compared.**  Every scenario of the fourth edition with a stored seed block: its
claim's reference against each of the claim's baselines (:data:`paper.claims.THIRD_CLAIMS`),
on the claim's primary statistic, from the seed blocks in the store
(:func:`paper.fourth.merged_run`, restored into a scratch folder so that the store is read
afresh on every call).  The fourth edition's verdicts are read from whatever
``docs/results/fourth/<scenario>.json`` holds when this runs; ``same_data`` says whether that
JSON was made from the same per-seed values (its last look's estimate, recomputed).  The
lead-growth claims (``<env>_gap_<baseline>.json``) are a difference between two scenarios,
not a comparison of agents: AdaStop does not test them.

**Per-seed values.**  A return statistic (``average``, ``second_half``): the seed's value
(:meth:`jaxnigt.analysis.run_data.Method.statistic`).  A time statistic (``time_to_80``):
AdaStop compares means and needs finite values, so a seed's time to the 80 % target counts
as its *restricted* time ``min(time, budget)`` (a censored seed counts as the budget: the
restricted mean survival time, :func:`jaxnigt.analysis.stats.restricted_mean_time`), negated
so that larger is better, as for returns.  The target is the fourth edition's: the library's
pooled target (:func:`jaxnigt.analysis.comparison.compare`) over the first k seeds of every
method.  AdaStop needs a seed's value fixed once it has been looked at (its permutation
distribution is built block by block), whereas the fourth edition recomputes the target at
each look; so a block of seeds gets the target of the interim that adds it (the first
``5 (j + 1)`` seeds at interim j) and keeps it.  Within a block every agent shares that
target, and AdaStop only permutes within a block, so the agents stay exchangeable under the
null.  ``final_target`` repeats the test with one target for every seed (pooled over every
seed run): where the two differ, the verdict depends on the target's drift.

**Stages.**  AdaStop adds the same number n of seeds at every interim, K interims at most;
the fourth edition's looks (5, 10, 20, 40 seeds) are not equal steps.  Chosen: n = 5 and
K = cap / 5 (point_mass 8, reacher 4, hopper and walker2d 2), so AdaStop's largest sample is
the fourth edition's cap and its seed counts include every look of the fourth edition (5, 10,
20, 40 are multiples of 5); AdaStop looks in between as well (15, 25, 30, 35).  The seeds fed
are the ones the fourth edition ran (its blocks; seeds 0 … k - 1 in order, five at a time):
where the fourth edition stopped before its cap, AdaStop has no more seeds either, and a
comparison it has not decided by then is "undecided at k seeds" (AdaStop would continue).
No K makes AdaStop's counts coincide with 5, 10, 20, 40 exactly; n = 5 is the only equal
step that reaches every one of them.

**Level.**  The page's alpha = 0.10 bounds the chance that two identical methods end with
either side ahead.  AdaStop 0.1.3 rejects when ``|T|`` exceeds a quantile of the *signed*
permutation distribution at level alpha, so its chance of a decision "larger" or "smaller"
between identical agents is about 2 alpha (:func:`null_rate`; 0.1 passed gives about 0.2).
The primary decision therefore passes ``alpha / 2`` = 0.05 (a two-sided 0.10); the decision
with 0.10 passed is kept as ``nominal``.  AdaStop also controls the error over the
comparisons of a scenario together (the fourth edition: per comparison, Bonferroni over the
looks), compares means of unpaired samples (the fourth edition: seeds paired, a ratio of
median times for speed) and has no equivalence margin: "equal" (with beta = 0) only means no
difference was found by the K-th interim.

**AdaStop's randomness.**  With n = 5 the first interim enumerates all C(10, 5) = 252 splits;
each later interim extends every split still admissible by one random split of the new block
(so B = 10,000 does not add permutations: 252 at most).  ``stability`` is the fraction of
AdaStop seeds 0 … S - 1 that reach the primary decision.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import tempfile
import time
from pathlib import Path

import numpy as np

from jaxnigt.analysis import comparison, sequential
from jaxnigt.analysis.stats import RETURN_STATISTICS, fraction
from jaxnigt.analysis.verdicts import BASELINE_AHEAD, REFERENCE_AHEAD
from paper import fourth, third_scenarios
from paper import store as results_store
from paper.claims import THIRD_CLAIMS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "results" / "fourth"
N = 5  # seeds per AdaStop interim
ALPHA = 0.10  # the page's: identical methods end with a side ahead at most this often
B = 10_000  # AdaStop's permutations (252 at most at n = 5: module docstring)
SEED = 0
STABILITY = 20  # AdaStop seeds for the stability fraction
REFERENCE, BASELINE = "reference", "baseline"


def adastop_alpha(alpha: float = ALPHA) -> float:
    """The alpha passed to AdaStop 0.1.3 for a two-sided error ``alpha`` (module docstring)."""
    return alpha / 2


def restricted_time(times: np.ndarray, budget: float) -> np.ndarray:
    """Per-seed times to a target as AdaStop's values: ``-min(time, budget)`` (``inf``, not
    reached, counts as the budget; negated: larger is faster)."""
    return -np.minimum(np.asarray(times, np.float64), budget)


def _first(run, k: int):
    sub = {n: sequential.first_seeds(m, k) for n, m in run.methods.items() if m.grid == 0}
    return dataclasses.replace(run, methods=sub)


def target(run, reference: str, statistic: str, k: int) -> float:
    """The fourth edition's target of a time statistic on the first ``k`` seeds (pooled over
    every method: :func:`jaxnigt.analysis.comparison.compare`)."""
    a = comparison.compare(_first(run, k), reference, statistic=statistic, reps=2)
    return a["targets"][str(fraction(statistic))]


def per_seed(run, reference: str, names, statistic: str, final_target: bool = False):
    """``{method: values}`` AdaStop compares, the seeds run in order (whole interims of
    :data:`N` only).  A time statistic: :func:`restricted_time`, each block of ``N`` seeds at
    the target of the interim that adds it, or with ``final_target`` at one target pooled
    over every seed."""
    methods = run.algorithms()
    seeds = min(len(m.seeds) for m in methods.values()) // N * N
    if statistic in RETURN_STATISTICS:
        out = {a: methods[a].statistic(statistic, run.budget)[:seeds] for a in names}
    else:
        out = {a: np.empty(0) for a in names}
        last = target(run, reference, statistic, seeds) if final_target else None
        for k in range(N, seeds + 1, N):
            tg = last if final_target else target(run, reference, statistic, k)
            for a in names:
                t = sequential.first_seeds(methods[a], k).statistic("time", run.budget, tg)
                out[a] = np.append(out[a], restricted_time(t[k - N :], run.budget))
    bad = [a for a, v in out.items() if not np.all(np.isfinite(v))]
    if bad:
        raise ValueError(f"non-finite per-seed {statistic} for {bad}")
    return out


def direction(decision: str) -> str | None:
    """AdaStop's decision on ``(reference, baseline)`` as the side ahead: "larger" (the
    reference's mean is larger: better) -> reference; "smaller" -> baseline; else None."""
    return {"larger": REFERENCE, "smaller": BASELINE}.get(decision)


def fourth_direction(outcome: str | None) -> str | None:
    """The fourth edition's outcome as the side ahead (equivalent, undecided: None)."""
    return {REFERENCE_AHEAD: REFERENCE, BASELINE_AHEAD: BASELINE}.get(outcome)


def adastop(values: dict, K: int, *, alpha: float, B: int = B, seed: int = SEED, n: int = N):
    """AdaStop on ``values`` (``{method: per-seed values}``, the reference first), the
    reference against every other method, feeding ``n`` seeds per interim while there are
    seeds, at most ``K`` interims.  Per baseline: AdaStop's decision ("larger", "smaller",
    "equal", or "continue": undecided with the seeds there are), the seeds it had when it
    decided (else all it saw), and the side ahead; ``trace``: the decisions after each
    interim."""
    from adastop import MultipleAgentsComparator

    names = list(values)
    pairs = np.array([(0, i) for i in range(1, len(names))])
    comp = MultipleAgentsComparator(n=n, K=K, B=B, comparisons=pairs, alpha=alpha, beta=0,
                                    seed=seed)  # fmt: skip
    interims = min(K, min(len(v) for v in values.values()) // n)
    if interims < 1:
        raise ValueError(f"fewer than {n} seeds: no interim")
    trace, decided = [], {}
    for k in range(1, interims + 1):
        comp.partial_compare({a: np.asarray(v[: k * n], float) for a, v in values.items()},
                             verbose=False)  # fmt: skip
        now = {names[c[1]]: str(comp.decisions[str(c)]) for c in comp.comparisons}
        trace.append({"seeds": k * n, "decisions": now})
        for b, d in now.items():
            if d != "continue":
                decided.setdefault(b, k * n)
        if comp.is_finished:
            break
    last = trace[-1]
    out = {b: {"decision": d, "seeds": decided.get(b, last["seeds"]), "ahead": direction(d)}
           for b, d in last["decisions"].items()}  # fmt: skip
    return {"comparisons": out, "trace": trace}


def null_rate(experiments: int, K: int, baselines: int = 1, *, alpha: float, seed: int = 0):
    """The fraction of ``experiments`` in which AdaStop (``K`` interims of :data:`N`, the
    first of ``baselines + 1`` identical N(0, 1) agents against the others, ``alpha`` passed)
    decides "larger" or "smaller" for some comparison: its error rate between identical
    agents."""
    rng = np.random.default_rng(seed)
    hits = 0
    for e in range(experiments):
        values = {f"agent{i}": rng.normal(size=K * N) for i in range(baselines + 1)}
        r = adastop(values, K, alpha=alpha, seed=e)
        hits += any(c["ahead"] for c in r["comparisons"].values())
    rate = hits / experiments
    return {"experiments": experiments, "K": K, "baselines": baselines, "alpha_passed": alpha,
            "rate": rate, "monte_carlo_se": math.sqrt(rate * (1 - rate) / experiments)}  # fmt: skip


def _fourth_verdicts(name: str, docs: Path) -> dict | None:
    path = docs / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _estimate(run, reference: str, baseline: str, statistic: str, k: int) -> float:
    """The fourth edition's effect on the first ``k`` seeds: a difference of mean returns or
    the ratio of median times (at the look's target)."""
    if statistic in RETURN_STATISTICS:
        ref, other = (sequential.first_seeds(run.algorithms()[a], k).statistic(statistic,
                      run.budget) for a in (reference, baseline))  # fmt: skip
        return float(ref.mean() - other.mean())
    a = comparison.compare(_first(run, k), reference, statistic=statistic,
                           baselines=[baseline], reps=2)  # fmt: skip
    return float(a["comparisons"][baseline]["effect"]["estimate"])


def _same(a: float, b: float) -> bool:
    return (math.isinf(a) and a == b) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check(name: str, out: Path, store: Path = fourth.STORE, docs: Path = DOCS,
          stability: int = STABILITY) -> dict | None:  # fmt: skip
    """AdaStop on one scenario (module docstring) beside the fourth edition's verdicts; None
    before its first block."""
    run = fourth.merged_run(name, out, store)
    if run is None:
        return None
    sc = third_scenarios.SCENARIOS[name]
    claim = THIRD_CLAIMS[sc.claim]
    methods = run.algorithms()
    baselines = list(claim.baselines or [a for a in methods if a != claim.reference])
    names = [claim.reference, *baselines]
    cap = fourth.CAPS[sc.env]
    K = cap // N
    values = per_seed(run, claim.reference, names, claim.statistic)
    primary = adastop(values, K, alpha=adastop_alpha())
    nominal = adastop(values, K, alpha=ALPHA)
    if claim.statistic in RETURN_STATISTICS:
        final = primary
    else:
        final_values = per_seed(run, claim.reference, names, claim.statistic, final_target=True)
        final = adastop(final_values, K, alpha=adastop_alpha())
    seeds_again = [adastop(values, K, alpha=adastop_alpha(), seed=s) for s in range(stability)]
    fourth_result = _fourth_verdicts(name, docs)
    rows = {}
    for b in baselines:
        row = dict(primary["comparisons"][b])
        row.update(nominal=nominal["comparisons"][b], final_target=final["comparisons"][b])
        if stability:
            same = [r["comparisons"][b]["decision"] == row["decision"] for r in seeds_again]
            row["stability"] = sum(same) / stability
        f = (fourth_result or {}).get("comparisons", {}).get(b)
        if f is None:
            row["fourth"] = None
        else:
            look = f["looks"][-1]
            now = _estimate(run, claim.reference, b, claim.statistic, look["seeds"])
            row["fourth"] = {"verdict": f["verdict"], "outcome": f["outcome"],
                             "seeds": f["seeds"], "ahead": fourth_direction(f["outcome"]),
                             "estimate": look["interval"]["estimate"],
                             "same_data": _same(now, look["interval"]["estimate"])}  # fmt: skip
        if row["fourth"] is not None:  # AdaStop's state with the seeds the verdict used
            at = [t["decisions"][b] for t in primary["trace"] if t["seeds"] == f["seeds"]]
            row["at_fourth_seeds"] = at[0] if at else None
        row["agree"] = None if row["fourth"] is None else row["ahead"] == row["fourth"]["ahead"]
        rows[b] = row
    return {
        "scenario": name, "claim": sc.claim, "reference": claim.reference,
        "statistic": claim.statistic, "seeds_run": len(next(iter(values.values()))),
        "n": N, "K": K, "cap": cap, "alpha": ALPHA, "alpha_passed": adastop_alpha(),
        "B": B, "seed": SEED, "stability_seeds": stability,
        "values": {a: [float(x) for x in v] for a, v in values.items()},
        "comparisons": rows, "trace": primary["trace"],
    }  # fmt: skip


def _ahead_text(ahead: str | None, reference: str, baseline: str) -> str:
    return {REFERENCE: f"{reference} ahead", BASELINE: f"{baseline} ahead"}.get(ahead, "")


def decision_text(row: dict, reference: str, baseline: str, cap: int) -> str:
    """AdaStop's decision in words, with the seeds it had."""
    d, k = row["decision"], row["seeds"]
    if d in ("larger", "smaller"):
        return f"{_ahead_text(row['ahead'], reference, baseline)} ({d}, {k} seeds)"
    if d == "equal":
        return f"no difference found by the cap (equal, {k} seeds)"
    return f"undecided at {k} seeds (continue; cap {cap})"


def markdown(results: list[dict], command: str, calibration: list[dict] | None = None) -> str:
    """The page: the command, the table (one row per comparison) and what the columns mean."""
    lines = [
        "# AdaStop cross-check of the fourth edition", "",
        f"Made by `{command}` (scripts/paper/adastop_check.py; a run naming scenarios "
        "updates their rows and keeps the others, each scenario's command is in "
        "adastop.json); it reads the store and docs/results/fourth/<scenario>.json as they "
        "are when it runs.", "",
        "| scenario | comparison | statistic | jaxnigt verdict | AdaStop decision | agree? "
        "| AdaStop, 0.10 passed | one target | stability |",
        "|---|---|---|---|---|---|---|---|---:|",
    ]  # fmt: skip
    notes, stability = [], max((r.get("stability_seeds", 0) for r in results), default=0)
    for r in results:
        ref, cap = r["reference"], r["cap"]
        for b, row in r["comparisons"].items():
            f = row["fourth"]
            if f is None:
                verdict, agree = "– (no fourth-edition JSON)", "–"
            else:
                verdict = f["verdict"]
                verdict += "" if "seeds" in verdict else f" ({f['seeds']} seeds)"
                agree = "yes" if row["agree"] else "**no**"
                if not f["same_data"]:
                    agree += " (JSON from other data)"
                    notes.append(f"{r['scenario']} vs {b}")
            nominal = decision_text(row["nominal"], ref, b, cap)
            one = row["final_target"]["decision"]
            one = "same" if one == row["decision"] else decision_text(row["final_target"], ref,
                                                                      b, cap)  # fmt: skip
            stab = f"{row['stability']:.2f}" if "stability" in row else "–"
            lines.append(f"| {r['scenario']} | {ref} vs {b} | {r['statistic']} | {verdict} "
                         f"| {decision_text(row, ref, b, cap)} | {agree} | {nominal} | {one} "
                         f"| {stab} |")  # fmt: skip
    lines += [
        "",
        "**Columns.** *jaxnigt verdict*: the fourth edition's (its sequential rule, "
        "docs/results/fourth.md), with the seeds it used.  *AdaStop decision*: AdaStop 0.1.3 "
        f"(n = {N} seeds per interim, K = cap / {N} interims: point_mass 8, reacher 4, hopper "
        f"and walker2d 2; B = {B:,}, seed {SEED}, beta = 0) with alpha = "
        f"{adastop_alpha()} passed, which is a two-sided error of {ALPHA} (AdaStop 0.1.3 "
        "rejects on |T| against its signed permutation distribution: its error between "
        "identical agents is about twice the alpha passed); \"larger\" means the reference's "
        "mean is larger: a higher return, or a shorter restricted time to the 80 % target "
        "(values −min(time, budget)); adastop.json also has AdaStop's state at the seeds of "
        "the fourth edition's verdict (`at_fourth_seeds`) and after every interim.  "
        "*agree?*: whether both name the same side ahead, or "
        "neither does (AdaStop's \"equal\" and \"continue\", the fourth edition's equivalent, "
        "undecided and open all count as neither).  *AdaStop, 0.10 passed*: the same with "
        "alpha = 0.10 passed (a two-sided 0.20).  *one target*: for a time statistic, the "
        "decision with every seed at one target pooled over all seeds run, instead of each "
        "block of five at the target of the interim that adds it (\"same\": no change).  "
        f"*stability*: the fraction of AdaStop seeds 0 … {stability - 1} that reach the same "
        "decision (its random permutations after the first interim).",
        "",
        "**Stages.** AdaStop needs equal steps; the fourth edition looks at 5, 10, 20 and 40 "
        "seeds.  n = 5 is the one equal step whose multiples include all of those, so "
        "AdaStop looks at every fourth-edition look and in between (15, 25, 30, 35), up to "
        "the same cap.  It gets the seeds the fourth edition ran and no more: a comparison "
        "AdaStop has not decided when they run out is \"undecided at k seeds (continue)\".",
        "",
        "**Differences of method.** AdaStop compares means of unpaired samples by "
        "permutation, controls the error over a scenario's comparisons together, and has no "
        "equivalence margin (its \"equal\" with beta = 0 only says no difference was found "
        "by the last interim).  The fourth edition pairs the seeds, compares median times "
        "(a ratio) for speed and means (Welch) for returns, controls each comparison "
        "separately (Bonferroni over the looks) and can decide \"equivalent within the "
        "margin\".  The lead-growth claims (<env>_gap_*.json) compare two scenarios and are "
        "not tested here.",
    ]  # fmt: skip
    if notes:
        lines += ["", "**Other data.** The fourth edition's JSON of " + ", ".join(notes) +
                  " does not reproduce its last look's estimate from the store's seeds as "
                  "they are now: it was made from other per-seed values (rerun `python "
                  "scripts/paper fourth analyze`, then this)."]  # fmt: skip
    if calibration:
        lines += ["", "**AdaStop's error between identical agents** (N(0, 1) values, "
                  f"n = {N}; `--calibrate {calibration[0]['experiments']}`, kept until run "
                  "again):", "",
                  "| K | baselines | alpha passed | decided a side | ± MC s.e. |",
                  "|---:|---:|---:|---:|---:|"]  # fmt: skip
        for c in calibration:
            lines.append(f"| {c['K']} | {c['baselines']} | {c['alpha_passed']} | "
                         f"{c['rate']:.3f} | {c['monte_carlo_se']:.3f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def scenarios(store: Path = fourth.STORE) -> list[str]:
    """The fourth edition's scenarios with a stored first block, in the scenarios' order."""
    return [n for n in third_scenarios.SCENARIOS if fourth.stored(n, fourth.blocks(n)[0], store)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="paper adastop", description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="scenarios (default: every one with a stored block)")
    p.add_argument("--docs", type=Path, default=DOCS)
    p.add_argument("--store", type=Path, default=fourth.STORE)
    p.add_argument(
        "--out",
        type=Path,
        help="where the blocks are restored (default: a scratch folder, removed)",
    )
    p.add_argument(
        "--stability",
        type=int,
        default=STABILITY,
        help="AdaStop seeds for the stability fraction (0: none)",
    )
    p.add_argument("--calibrate", type=int, default=0, metavar="EXPERIMENTS",
                   help="also AdaStop's error between identical agents for each K and number "
                   "of baselines used, at the alpha passed and at 0.10 (else the last one "
                   "kept)")  # fmt: skip
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in third_scenarios.SCENARIOS]
    if unknown:
        p.error(f"unknown scenarios {unknown}; allowed: {', '.join(third_scenarios.SCENARIOS)}")
    names = args.names or scenarios(args.store)
    command = shlex.join(["python", "scripts/paper", "adastop", *(argv or [])])
    results, start = [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="adastop-") as scratch:
        for name in names:
            r = check(name, args.out or Path(scratch), args.store, args.docs, args.stability)
            if r is None:
                print(f"[adastop] {name}: no block stored")
                continue
            results.append(r)
            said = {b: (c["decision"], c["seeds"], c["agree"]) for b, c in r["comparisons"].items()}
            print(f"[adastop] {name} ({r['seeds_run']} seeds): {said}", flush=True)
    print(f"[adastop] {len(results)} scenarios in {time.monotonic() - start:.0f} s", flush=True)
    calibration = []
    if args.calibrate:
        for K, nb in sorted({(r["K"], len(r["comparisons"])) for r in results}):
            for alpha in (adastop_alpha(), ALPHA):
                calibration.append(null_rate(args.calibrate, K, nb, alpha=alpha))
                print(f"[adastop] null rate: {calibration[-1]}", flush=True)
    args.docs.mkdir(parents=True, exist_ok=True)
    path = args.docs / "adastop.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    done = {**(kept.get("scenarios", {}) if args.names else {}),
            **{r["scenario"]: r for r in results}}  # fmt: skip
    for r in results:
        r["command"] = command
    results = [done[n] for n in third_scenarios.SCENARIOS if n in done]
    calibration = calibration or kept.get("calibration", [])
    doc = {"command": command, "n": N, "alpha": ALPHA, "alpha_passed": adastop_alpha(),
           "B": B, "seed": SEED,
           "scenarios": {r["scenario"]: r for r in results}}  # fmt: skip
    if calibration:
        doc["calibration"] = calibration
    if args.calibrate:
        print(f"[adastop] with the calibration: {time.monotonic() - start:.0f} s", flush=True)
    path.write_text(json.dumps(results_store.relative_paths(doc), indent=2) + "\n")
    text = markdown(results, command, calibration)
    (args.docs / "adastop.md").write_text(text)
    print(text)
    print(f"[adastop] wrote {args.docs / 'adastop.json'} and {args.docs / 'adastop.md'}")
    return 0
