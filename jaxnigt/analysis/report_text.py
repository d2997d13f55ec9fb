"""The text of a comparison: intervals, outcomes and verdicts in words, ``jaxnigt
compare``'s Markdown table, and ``jaxnigt tune``'s table of scores.

Pure functions of the JSON-able results of :func:`jaxnigt.analysis.compare` and
:func:`jaxnigt.studies.tuning.tune` and of the rules of :mod:`jaxnigt.analysis.verdicts`;
the results pipeline (``scripts/paper``) writes its tables with the same functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jaxnigt.analysis import stats
from jaxnigt.analysis.verdicts import BASELINE_AHEAD, REFERENCE_AHEAD, TIE

STATISTIC_TEXT = {
    "average": "difference in average return over [0, B] (reference − baseline)",
    "second_half": "difference in second-half return over [B/2, B] (reference − baseline)",
    "time_to_50": "ratio of the geometric-mean restricted times min(T, B) to 50 % of the "
    "improvement (baseline / reference)",
    "time_to_80": "ratio of the geometric-mean restricted times min(T, B) to 80 % of the "
    "improvement (baseline / reference)",
    "worker_time_to_50": "ratio of the geometric-mean restricted total worker times "
    "min(W, W_final) to 50 % of the improvement (baseline / reference)",
    "worker_time_to_80": "ratio of the geometric-mean restricted total worker times "
    "min(W, W_final) to 80 % of the improvement (baseline / reference)",
}


def fmt(iv: Mapping[str, float], digits: int = 2) -> str:
    """``estimate [low, high]`` (``∞`` for infinite values)."""

    def f(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        return "∞" if v == math.inf else "−∞" if v == -math.inf else f"{v:.{digits}f}"

    return f"{f(iv['estimate'])} [{f(iv['low'])}, {f(iv['high'])}]"


def outcome_text(row: Mapping[str, Any], reference: str, baseline: str) -> str:
    """A row's outcome with the method names (and the seeds a tie would need)."""
    text = row["outcome"]
    if text == REFERENCE_AHEAD:
        return f"{reference} ahead"
    if text == BASELINE_AHEAD:
        return f"{baseline} ahead"
    if text == TIE and row.get("needed_seeds"):
        return f"{TIE} (≈{row['needed_seeds']} seeds)"
    return text


def p_text(row: Mapping[str, Any]) -> str:
    """A test's p-value beside the smallest its seeds allow (and a Monte Carlo p's standard
    error): never a p below what the test can give."""
    if row.get("p") is None:
        return "–"
    text = f"{row['p']:.2g}"
    if row.get("p_se"):
        text += f" ± {row['p_se']:.1g}"
    return text + (f" ({row['p_min']:.2g})" if row.get("p_min") is not None else "")


def verdict_text(result: Mapping[str, Any]) -> str:
    """The verdict with the seeds an inconclusive one would need."""
    text = result["verdict"]
    if result.get("needed_seeds"):
        text += f" (≈{result['needed_seeds']} seeds)"
    return text


def pairing_text(result: Mapping[str, Any]) -> str:
    """How :func:`compare`'s resamples treated the seeds, and how a never-reached median
    counts."""
    paired = result.get("paired", {})
    both = [b for b, p in paired.items() if p]
    apart = [b for b, p in paired.items() if not p]
    parts = []
    if both:
        parts.append(
            f"Paired: {result['reference']} and {', '.join(both)} ran the same seeds (one "
            "initial policy and evaluation keys per seed): the exact sign-flip test flips the "
            "sign of each seed's difference (of log restricted times for a time; 2^n "
            "patterns), and every bootstrap resample draws one set of seeds for both."
        )
    if apart:
        parts.append(
            f"Not paired: {', '.join(apart)} ran other seeds than {result['reference']}: the "
            "permutation test splits their pooled seeds, and the bootstrap resamples them "
            "independently."
        )
    censored = (
        "a seed that never reaches the target counts at the budget B (its restricted time "
        "min(T, B)); the ratio of median times (a second view) counts a tie where neither "
        "method's median reaches it."
    )
    if result.get("statistic") in stats.WORKER_TIME_STATISTICS:
        parts.append(
            "The effect counts a seed that never reaches the target within the budget B at "
            "its final total worker time (its restricted worker time min(W, W_final)); in "
            f"the times to a target (second views), {censored}"
        )
    else:
        parts.append(censored[0].upper() + censored[1:])
    return " ".join(parts)


def compare_markdown(result: Mapping[str, Any]) -> str:
    """:func:`compare`'s result as Markdown: one row per baseline, then the verdict."""
    ref, stat = result["reference"], result["statistic"]
    pct = f"{result['level'] * 100:g} %"
    seeds = result["algorithms"][ref]["seeds"]
    extra = [] if stat == "average" else [f"Δ average return [{pct} CI]"]
    extra += [] if stat == "time_to_50" else [f"time to 50 %: ratio [{pct} CI]"]
    head = ["baseline", f"effect [{pct} CI]", "p (smallest possible)", "outcome", *extra]
    head.append("updates (ref. / baseline)")
    lines = [
        f"Reference `{ref}`; effect: {STATISTIC_TEXT[stat]} over {seeds} seeds, decided by an "
        f"exact randomization test at {1 - result['level']:.3g} (two-sided), its interval the "
        f"test inverted (second views: bootstrap, {result['reps']} resamples); budget "
        f"{result['budget']:g}; targets R0 + f (R_best − R0) = "
        + ", ".join(f"{float(f) * 100:g} %: {t:.3g}" for f, t in result["targets"].items())
        + ".",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    updates = lambda a: f"{result['algorithms'][a]['updates_median']:,.0f}"
    for b, row in result["comparisons"].items():
        cells = [b, fmt(row["effect"]), p_text(row), outcome_text(row, ref, b)]
        if stat != "average":
            cells.append(fmt(row["average_return_difference"]))
        if stat != "time_to_50":
            cells.append(fmt(row["time_to_target_ratio"]["0.5"]))
        lines.append("| " + " | ".join([*cells, f"{updates(ref)} / {updates(b)}"]) + " |")
    claim = "ahead of every baseline" if result["claim"] == "ahead" else "tied with the baselines"
    lines += ["", pairing_text(result)]
    lines += ["", f"Verdict ({ref} {claim}): **{verdict_text(result)}**"]
    lines += [f"\nWarning: {w}." for w in result.get("warnings", [])]
    lines += kaplan_meier_text(result)
    why = stats.no_target_reason(result["initial_median_return"], result["best_second_half_median"])
    if why is not None:
        lines += ["", f"Note: {why}."]
    return "\n".join(lines)


def tuning_table(report: Mapping[str, Any]) -> str:
    """:func:`jaxnigt.studies.tuning.tune`'s report as the printed table: per algorithm (and value
    of each tuned shape: M, msync_m, ringmaster_R), the score of every α × η, the winner
    marked (and a time statistic's target first)."""
    lines = []
    if report.get("target"):
        t = report["target"]
        lines.append(
            f"{report['statistic']}: target {t['value']:.4g} = R0 + {t['fraction']:g} (R_best − R0)"
            f", R0 = {t['R0']:.4g}, R_best = {t['R_best']:.4g} (every initial grid pooled)"
        )
    for a, r in report["algorithms"].items():
        names = r.get("tuned_shapes", ["M"] if r["M_tuned"] else [])
        shape_of = lambda p, names=names: tuple(p[s] for s in names)
        for values in dict.fromkeys(shape_of(p) for p in r["points"]):
            shapes = ", ".join(f"{s} = {v}" for s, v in zip(names, values, strict=True))
            head = f"{a}" + (f" ({shapes})" if names else "")
            mine = [p for p in r["points"] if shape_of(p) == values]
            lines += ["", f"{head}: {report['score']}", *_score_grid(r, mine)]
        lines.append(_chosen_line(r, names))
    if report.get("speed"):
        lines += ["", _speed_line(report["speed"], report["budget"])]
    return "\n".join(lines).strip("\n")


def _score_grid(result: Mapping[str, Any], points: list) -> list[str]:
    """The α × η scores of one program's ``points`` (the winner marked ``*``)."""
    lines = ["  α \\ η  " + "".join(f"{e:>11g}" for e in result["eta"])]
    chosen = result["chosen"]
    for e in result["lr_exp"]:
        cells = []
        for eta in result["eta"]:
            p = next((q for q in points if q["lr_exp"] == e and q["eta"] == eta), None)
            mark = "*" if p is not None and chosen is not None and p == chosen else " "
            if p is None:
                text = "–"
            else:
                text = "diverged" if p["diverged_seeds"] else f"{p['score']:.3f}"
            cells.append(f"{text + mark:>11}")
        lines.append(f"  2^{e:<5d}" + "".join(cells))
    return lines


def _chosen_line(result: Mapping[str, Any], names: list[str]) -> str:
    """The winner of one algorithm's search, and whether it is interior."""
    chosen = result["chosen"]
    if chosen is None:
        return "  chosen: none (every point diverged or is not finite)"
    where = "interior" if result["interior"] else "AT AN EDGE of the grid run"
    shapes = "".join(f", {s} = {chosen[s]}" for s in names)
    return (
        f"  chosen: α = 2^{chosen['lr_exp']}, η = {chosen['eta']:g}{shapes} (score "
        f"{chosen['score']:.3f}; {where}; {result['extensions']} extension(s))"
    )


def _speed_line(speed: Mapping[str, Any], budget: float) -> str:
    """The winners' per-seed times to the target (the report's ``speed``), or, where no
    target exists (``no_target``: the returns ended at or below their start), why."""
    if speed.get("no_target"):
        fraction = speed["target"]["fraction"]
        return f"winners' times to {fraction:.0%} of the improvement: none, {speed['no_target']}"
    times = "; ".join(
        f"{a} " + ", ".join("never" if math.isinf(t) else f"{t:,.0f}" for t in ts)
        for a, ts in speed["times"].items()
    )
    target, slowest = speed["target"], speed["slowest_median"]
    return (
        f"winners' times to {target['fraction']:.0%} of the improvement (target "
        f"{target['value']:.4g}, every program pooled), per tuning seed: {times}; the "
        f"slowest upper median: {slowest:,.0f} of a budget of {budget:g}"
    )


def kaplan_meier_text(result: Mapping[str, Any]) -> list[str]:
    """The Kaplan–Meier section of a comparison's Markdown: how many seeds of each method
    reached the target, and when (none where the result has no curves)."""
    from jaxnigt.analysis import survival

    km = result.get("kaplan_meier")
    if not km:
        return []
    return [
        "",
        f"Seeds at {km['fraction']:.0%} of the improvement (target {km['target']:.4g}; a seed "
        "not there by the budget B is censored at B; the restricted mean is the area above "
        "the Kaplan–Meier curve up to B):",
        "",
        survival.table(km["curves"]),
    ]


def sequential_markdown(result: Mapping[str, Any]) -> str:
    """The table of :func:`jaxnigt.analysis.sequential.compare_sequential`: per baseline,
    each look (its interval, p beside the smallest its seeds allow, the equivalence test's
    p) and the verdict."""
    rows = [
        f"**{result['reference']}** by `{result['statistic']}` (claim {result['claim']}), "
        f"seeds added in stages, decided by the {result.get('test', 'exact')} rule",
        "",
        "| baseline | look (seeds) | effect [interval] | p (smallest possible) | "
        "equivalence p | margin | outcome | verdict |",
        "|---|---:|---|---|---|---|---|---|",
    ]
    for b, r in result["comparisons"].items():
        for i, look in enumerate(r["looks"]):
            verdict = f"**{r['verdict']}**" if i == len(r["looks"]) - 1 else ""
            lo, hi = look["margin"] or (math.nan, math.nan)
            tost = "–" if look.get("tost_p") is None else f"{look['tost_p']:.2g}"
            p = p_text(look) if "p" in look else p_text(look["interval"])
            rows.append(
                f"| {b} | {look['seeds']} | {fmt(look['interval'])} | {p} | {tost} "
                f"| [{lo:.3g}, {hi:.3g}] | {look['outcome']} | {verdict} |"
            )
    r = next(iter(result["comparisons"].values()))
    rows += kaplan_meier_text(result)
    if r.get("decisive") is not None:
        k = len(r["decisive"])
        rows += [
            "",
            f"Decisive looks at {', '.join(map(str, r['decisive']))} seeds, each at "
            f"{r['alpha']:g}/{k} = {r['alpha'] / k:.4g} (Bonferroni over the looks whose "
            "smallest possible p reaches it); intervals at level "
            f"{r['level']:.4g}, the test inverted.",
        ]
    else:
        rows += ["", f"Each look at level {r['level']:.4g} (Bonferroni over the looks)."]
    return "\n".join(rows)
