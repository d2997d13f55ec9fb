"""Deciding a comparison by adding seeds in fixed stages (a group-sequential rule).

A comparison starts at the first stage's seeds (default 5) and, while undecided, looks again
at each later stage (10, 20, 40), on seeds ``0 … k - 1`` of both methods.  **Each look's
interval** is :func:`jaxnigt.analysis.compare`'s percentile bootstrap at level ``1 - alpha /
K`` (K looks; Bonferroni), so the chance that two identical methods end "reference ahead" or
"baseline ahead" at *any* look stays at most ``alpha`` (0.10) whatever the dependence between
the looks.  (For a difference of returns the looks use Welch's t interval instead,
:func:`welch_interval`: at 5 seeds the bootstrap of a mean is too narrow, and :func:`simulate`
shows it.)  **Equivalence**: a look whose whole interval lies inside a margin stated in
advance (:data:`TIME_MARGIN` for a ratio of times, :data:`RETURN_MARGIN` × the run's
improvement for a difference of returns) decides "equivalent within the margin" (two one-sided
tests at the look's level).  A comparison undecided at its last stage is "undecided at N
seeds".  :mod:`jaxnigt.analysis.error_rate` checks the rule's error rate and power on
synthetic and on real per-seed values.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxnigt.analysis.run_data import AnalysisError, Method, Run
from jaxnigt.analysis.stats import RETURN_STATISTICS
from jaxnigt.analysis.verdicts import (
    BASELINE_AHEAD,
    REFERENCE_AHEAD,
)

STAGES = (5, 10, 20, 40)
ALPHA = 0.10
TIME_MARGIN = (0.8, 1.25)  # a ratio of times inside it is "equivalent"
RETURN_MARGIN = 0.10  # a difference of returns within ± this fraction of the improvement
EQUIVALENT, UNDECIDED = "equivalent within the margin", "undecided"


def look_level(looks: int, alpha: float = ALPHA) -> float:
    """The interval level of each of ``looks`` looks (Bonferroni): ``1 - alpha / looks``."""
    if looks < 1 or not 0 < alpha < 1:
        raise AnalysisError(f"got {looks} looks at alpha {alpha}; expected >= 1 and (0, 1)")
    return 1.0 - alpha / looks


def parse_stages(text: str) -> tuple[int, ...]:
    """``--sequential 5,10,20,40``: increasing seed counts, each at least 2."""
    try:
        stages = tuple(int(s) for s in text.split(","))
    except ValueError:
        stages = ()
    if not stages or any(s < 2 for s in stages) or list(stages) != sorted(set(stages)):
        raise AnalysisError(
            f"got {text!r}; expected increasing seed counts >= 2, e.g. 5,10,20", param="sequential"
        )
    return stages


def welch_interval(reference: np.ndarray, baseline: np.ndarray, level: float) -> dict:
    """The difference of means with Welch's t interval at ``level`` and its two-sided
    p-value ``p`` (methods of different seeds): at 5 seeds a percentile bootstrap of a mean
    covers far less than its level (its resamples see no more spread than the seeds), so the
    rule's looks at a difference of returns use a t interval."""

    a, b = np.asarray(reference, float), np.asarray(baseline, float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    est, se = float(a.mean() - b.mean()), float(np.sqrt(va + vb))
    if se == 0.0:
        return {"estimate": est, "low": est, "high": est, "p": 1.0 if est == 0 else 0.0}
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return _t_interval(est, se, df, level)


def paired_t_interval(reference: np.ndarray, baseline: np.ndarray, level: float) -> dict:
    """The mean of the per-seed differences ``reference − baseline`` (the same seeds of two
    methods) with the paired t interval at ``level`` (n − 1 degrees of freedom) and its
    two-sided p-value ``p``."""
    d = np.asarray(reference, float) - np.asarray(baseline, float)
    est, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))
    if se == 0.0:
        return {"estimate": est, "low": est, "high": est, "p": 1.0 if est == 0 else 0.0}
    return _t_interval(est, se, d.size - 1, level)


def _t_interval(est: float, se: float, df: float, level: float) -> dict:
    from scipy import stats as sps

    half = float(sps.t.ppf((1 + level) / 2, df)) * se
    p = float(2 * sps.t.sf(abs(est) / se, df))
    return {"estimate": est, "low": est - half, "high": est + half, "p": p}


def difference_interval(reference, baseline, level: float, *, paired: bool) -> dict:
    """A look's interval for a difference of returns: :func:`paired_t_interval` for the same
    seeds of two methods, else :func:`welch_interval`."""
    return (paired_t_interval if paired else welch_interval)(reference, baseline, level)


def decide(iv: dict[str, float], tie: float, margin: tuple[float, float]) -> str:
    """One look's outcome: a side ahead when the interval excludes ``tie`` on it,
    :data:`EQUIVALENT` when it lies inside ``margin``, else :data:`UNDECIDED`."""
    if iv["low"] > tie:
        return REFERENCE_AHEAD
    if iv["high"] < tie:
        return BASELINE_AHEAD
    if margin[0] <= iv["low"] and iv["high"] <= margin[1]:
        return EQUIVALENT
    return UNDECIDED


def run_rule(
    interval_at: Callable[[int, float], dict[str, float]],
    margin_at: Callable[[int], tuple[float, float]],
    *,
    tie: float,
    stages: Sequence[int] = STAGES,
    alpha: float = ALPHA,
    available: int | None = None,
) -> dict[str, Any]:
    """The rule over ``stages``: ``interval_at(k, level)`` is the effect's interval on the
    first ``k`` seeds; returns the outcome, the seeds it used and every look made.  The level
    is set by every planned stage; with ``available`` seeds only the stages up to it are
    looked at so far (an undecided result is then ``open`` until the last stage)."""
    level = look_level(len(stages), alpha)
    due = [k for k in stages if available is None or k <= available]
    if not due:
        raise AnalysisError(
            f"{available} seeds: fewer than the first stage ({stages[0]})", param="sequential"
        )
    looks = []
    for k in due:
        iv, margin = interval_at(k, level), margin_at(k)
        looks.append({"seeds": k, "interval": iv, "margin": list(margin), "outcome": ""})
        looks[-1]["outcome"] = result = decide(iv, tie, margin)
        if result != UNDECIDED:
            break
    seeds = looks[-1]["seeds"]
    return {
        "outcome": looks[-1]["outcome"],
        "seeds": seeds,
        "level": level,
        "alpha": alpha,
        "stages": list(stages),
        "looks": looks,
        "open": looks[-1]["outcome"] == UNDECIDED and seeds < stages[-1],
        "p": rule_p_value(looks, len(stages)),
    }


def rule_p_value(looks: Sequence[dict], planned: int) -> float | None:
    """A comparison's p-value for a family-wise correction: ``planned`` × the smallest
    p-value of the looks it made, at most 1 (Bonferroni over the planned looks, as the rule's
    levels: the rule excludes a tie at some look at level ``1 − α/K`` exactly when this is
    below α, up to the bootstrap's quantile rounding).  None when a look has no p-value."""
    ps = [look["interval"].get("p") for look in looks]
    if not ps or any(p is None or math.isnan(p) for p in ps):
        return None
    return float(min(1.0, planned * min(ps)))


def claim_verdict(kind: str, result: dict[str, Any]) -> str:
    """A claim's verdict from one comparison's :func:`run_rule` result (module docstring)."""
    o, n = result["outcome"], result["seeds"]
    if o == UNDECIDED and result.get("open"):
        return f"open at {n} seeds (next look at {min(k for k in result['stages'] if k > n)})"
    if o == UNDECIDED:
        return f"undecided at {n} seeds"
    if kind == "tie":
        return "confirmed (equivalent)" if o == EQUIVALENT else "refuted"
    return {REFERENCE_AHEAD: "confirmed", BASELINE_AHEAD: "refuted"}.get(o, EQUIVALENT)


def first_seeds(method: Method, k: int) -> Method:
    """``method`` restricted to its first ``k`` seeds (in seed order)."""
    if k > len(method.seeds):
        raise AnalysisError(f"{method.name} has {len(method.seeds)} seeds; a look needs {k}")
    pick = lambda xs: tuple(xs[:k])
    return dataclasses.replace(
        method,
        seeds=pick(method.seeds),
        curves=pick(method.curves),
        per_type={t: pick(c) for t, c in method.per_type.items()},
        updates=method.updates[:k],
        env_steps=method.env_steps[:k],
        end_time=method.end_time[:k],
        diverged=tuple(s for s in method.diverged if s in method.seeds[:k]),
    )


def merge_runs(runs: Sequence[Run]) -> Run:
    """Runs of one config over disjoint seed blocks (``first_seed``) as one run: each method's
    seeds in order.  Raises AnalysisError when the blocks' methods or budgets differ, or a
    seed is in two blocks."""
    first = runs[0]
    if any(r.budget != first.budget or set(r.methods) != set(first.methods) for r in runs):
        raise AnalysisError("the runs to merge differ in budget or methods")
    methods = {}
    for name, m in first.methods.items():
        parts = [r.methods[name] for r in runs]
        seeds = [s for p in parts for s in p.seeds]
        if len(set(seeds)) != len(seeds):
            raise AnalysisError(f"{name}: a seed is in two of the runs to merge")
        order = np.argsort(seeds, kind="stable")
        cat = lambda f: tuple(np.asarray([x for p in parts for x in f(p)], object)[order])
        arr = lambda f: np.concatenate([f(p) for p in parts])[order]
        methods[name] = dataclasses.replace(
            m,
            seeds=tuple(int(s) for s in np.asarray(seeds)[order]),
            curves=cat(lambda p: p.curves),
            per_type={t: cat(lambda p, t=t: p.per_type[t]) for t in m.per_type},
            updates=arr(lambda p: p.updates),
            env_steps=arr(lambda p: p.env_steps),
            end_time=arr(lambda p: p.end_time),
            diverged=tuple(sorted(s for p in parts for s in p.diverged)),
        )
    return dataclasses.replace(first, methods=methods)


def compare_sequential(
    run: Run,
    reference: str,
    *,
    statistic: str,
    claim: str = "ahead",
    baselines: Sequence[str] | None = None,
    stages: Sequence[int] = STAGES,
    alpha: float = ALPHA,
    **kw: Any,
) -> dict[str, Any]:
    """The rule for the reference against each baseline of ``run`` (its seeds in stages).

    Args:
      run: a finished run, or seed blocks merged by :func:`merge_runs`.
      reference, statistic, claim, baselines: as for :func:`jaxnigt.analysis.compare`.
      stages, alpha: the looks' planned seed counts (they set each look's level), the error
        rate they share.
      kw: to :func:`jaxnigt.analysis.compare` (``reps``, ``seed``).

    Returns:
      Per baseline, :func:`run_rule`'s result (every look) and the claim's verdict.
    """
    looks = _Looks(run, reference, statistic, claim, baselines, kw)
    level = look_level(len(stages), alpha)
    available = min(len(m.seeds) for m in looks.methods.values())
    out = {}
    for b in looks.names:
        result = run_rule(
            functools.partial(looks.effect, b),
            lambda k: looks.margin(k, level),
            tie=1.0 if looks.ratio else 0.0,
            stages=stages,
            alpha=alpha,
            available=available,
        )
        out[b] = {**result, "verdict": claim_verdict(claim, result)}
    return {"reference": reference, "statistic": statistic, "claim": claim, "comparisons": out}


class _Looks:
    """:func:`compare_sequential`'s looks at a run: each ``(seeds, level)`` compared once."""

    def __init__(self, run: Run, reference, statistic, claim, baselines, kw):
        self.run, self.reference, self.statistic = run, reference, statistic
        self.claim, self.kw = claim, kw
        self.methods = run.algorithms()
        self.names = (
            [a for a in self.methods if a != reference] if baselines is None else list(baselines)
        )
        self.ratio = statistic not in RETURN_STATISTICS
        self.done: dict[tuple[int, float], dict] = {}

    def __call__(self, k: int, level: float) -> dict:
        from jaxnigt.analysis.comparison import compare

        if (k, level) not in self.done:
            sub = {n: first_seeds(m, k) for n, m in self.run.methods.items() if m.grid == 0}
            self.done[k, level] = compare(
                dataclasses.replace(self.run, methods=sub),
                self.reference,
                statistic=self.statistic,
                claim=self.claim,
                baselines=self.names,
                level=level,
                **self.kw,
            )
        return self.done[k, level]

    def effect(self, baseline: str, k: int, level: float) -> dict:
        """A ratio of times: compare's percentile bootstrap (paired when the methods ran the
        same seeds; checked by :func:`simulate`); a difference of returns:
        :func:`difference_interval` (paired t, else Welch)."""
        if self.ratio:
            return self(k, level)["comparisons"][baseline]["effect"]
        ref, other = (first_seeds(self.methods[a], k) for a in (self.reference, baseline))
        same = tuple(ref.seeds) == tuple(other.seeds)
        values = [m.statistic(self.statistic, self.run.budget) for m in (ref, other)]
        return difference_interval(*values, level, paired=same)

    def margin(self, k: int, level: float) -> tuple[float, float]:
        if self.ratio:
            return TIME_MARGIN
        a = self(k, level)
        width = RETURN_MARGIN * abs(a["best_second_half_median"] - a["initial_median_return"])
        return (-width, width)


def markdown(result: dict[str, Any]) -> str:
    """The table of :func:`compare_sequential`: per baseline, each look and the verdict."""
    from jaxnigt.analysis.report_text import fmt

    rows = [
        f"**{result['reference']}** by `{result['statistic']}` (claim {result['claim']}), "
        "seeds added in stages",
        "",
        "| baseline | look (seeds) | interval | margin | outcome | verdict |",
        "|---|---:|---|---|---|---|",
    ]
    for b, r in result["comparisons"].items():
        for i, look in enumerate(r["looks"]):
            verdict = f"**{r['verdict']}**" if i == len(r["looks"]) - 1 else ""
            lo, hi = look["margin"]
            rows.append(
                f"| {b} | {look['seeds']} | {fmt(look['interval'])} "
                f"| [{lo:.3g}, {hi:.3g}] | {look['outcome']} | {verdict} |"
            )
    level = next(iter(result["comparisons"].values()))["level"]
    rows += ["", f"Each look at level {level:.4g} (Bonferroni over the looks)."]
    return "\n".join(rows)
