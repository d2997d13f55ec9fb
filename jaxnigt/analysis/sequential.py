"""Deciding a comparison by adding seeds in fixed stages (a group-sequential rule).

A comparison starts at the first stage's seeds (default 5) and, while undecided, looks again
at each later stage (10, 20, 40), on seeds ``0 … k - 1`` of both methods.

**The rule** (``test="exact"``, the default): each look is :func:`jaxnigt.analysis.looks.look`,
an exact randomization test of a tie on the per-seed values (restricted times ``min(T, B)``
for a time statistic, restricted worker times ``min(W, W_final)`` for a worker-time one,
returns for a return statistic; paired sign-flip for the same seeds).
The error ``alpha`` (0.10) is split equally over the *decisive* looks, those whose smallest
attainable p is at most ``alpha / K`` (:func:`jaxnigt.analysis.looks.decisive_stages`): at
stages 5, 10, 20, 40 of paired seeds the look at 5 seeds can give no p below 1/16, so the
looks at 10, 20 and 40 decide, each at ``alpha / 3``, and the look at 5 is reported and
decides nothing.  At a decisive look, ``p <= alpha / K`` makes the side of the estimate ahead
(the look's interval, the test inverted at ``1 − alpha / K``, then excludes the tie); else two
one-sided tests of a margin stated in advance (:data:`TIME_MARGIN` for a ratio of restricted
mean times, :data:`RETURN_MARGIN` × the improvement for a difference of returns) with
``p <= alpha / K`` decide "equivalent within the margin".  Bonferroni over the decisive
looks keeps the chance that two exchangeable methods end "a side ahead" at *any* look at most
``alpha``, whatever the dependence between the looks.  A comparison undecided at its last
stage is "undecided at N seeds".  A time statistic's target can be fixed in advance
(``target``: from runs no look tests); otherwise each look pools it from its own seeds.

**The fourth edition's rule** (``test="bootstrap"``): each look's interval is
:func:`jaxnigt.analysis.compare`'s percentile bootstrap of the ratio of median times at level
``1 - alpha / K`` over every planned look (Welch's or the paired t interval for a difference
of returns, :func:`welch_interval`), deciding when it excludes the tie or lies inside the
margin.  It is kept to reproduce that edition; at 5 seeds its bootstrap p can be 0 where an
exact test cannot go below 1/16.  :mod:`jaxnigt.analysis.error_rate` checks the rule's error
rate and power on synthetic and on real per-seed values.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxnigt.analysis import looks as looks_lib
from jaxnigt.analysis.report_text import sequential_markdown
from jaxnigt.analysis.run_data import AnalysisError, Run, first_seeds
from jaxnigt.analysis.run_data import merge_runs as merge_runs  # where seed blocks are merged
from jaxnigt.analysis.stats import RETURN_STATISTICS
from jaxnigt.analysis.verdicts import (
    BASELINE_AHEAD,
    REFERENCE_AHEAD,
)

#: The table of :func:`compare_sequential` (``jaxnigt compare --sequential``).
markdown = sequential_markdown
STAGES = (5, 10, 20, 40)
ALPHA = 0.10
TIME_MARGIN = (0.8, 1.25)  # a ratio of times inside it is "equivalent"
RETURN_MARGIN = 0.10  # a difference of returns within ± this fraction of the improvement
EQUIVALENT, UNDECIDED = "equivalent within the margin", "undecided"
NOT_DECISIVE = "not decisive"  # a look whose smallest attainable p is above its level
TESTS = ("exact", "bootstrap")


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


def _due(stages: Sequence[int], available: int | None) -> list[int]:
    """The stages a rule looks at so far: those with their seeds ``available`` (all: None)."""
    due = [k for k in stages if available is None or k <= available]
    if not due:
        raise AnalysisError(
            f"{available} seeds: fewer than the first stage ({stages[0]})", param="sequential"
        )
    return due


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
    due = _due(stages, available)
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


def exact_outcome(one: dict[str, Any], tie: float, per_look: float) -> str:
    """A decisive look's outcome: the side of the estimate when ``p <= per_look``, else
    :data:`EQUIVALENT` when the TOST p is, else :data:`UNDECIDED`."""
    if one["p"] <= per_look:
        return REFERENCE_AHEAD if one["interval"]["estimate"] > tie else BASELINE_AHEAD
    if one.get("tost_p") is not None and one["tost_p"] <= per_look:
        return EQUIVALENT
    return UNDECIDED


def run_exact_rule(
    look_at: Callable[[int, float], dict[str, Any]],
    *,
    tie: float,
    stages: Sequence[int] = STAGES,
    alpha: float = ALPHA,
    available: int | None = None,
    p_min: Callable[[int], float] = looks_lib.paired_p_min,
) -> dict[str, Any]:
    """The rule over ``stages`` (module docstring): ``look_at(k, level)`` is
    :func:`jaxnigt.analysis.looks.look` on the first ``k`` seeds; ``p_min(k)`` the smallest
    p its test can give there.  Returns the outcome, the seeds used, every look made, the
    decisive looks, and ``p`` / ``tost_p``: K × the smallest p of the decisive looks made (a
    comparison's p for a family-wise correction; None before a decisive look)."""
    decisive = looks_lib.decisive_stages(stages, alpha, p_min)
    if not decisive:
        raise AnalysisError(
            f"no look at {list(stages)} seeds can reach its level (alpha {alpha}): add stages",
            param="sequential",
        )
    per_look = alpha / len(decisive)
    level = 1.0 - per_look
    due = _due(stages, available)
    made = []
    for k in due:
        one = look_at(k, level)
        result = exact_outcome(one, tie, per_look) if k in decisive else NOT_DECISIVE
        made.append({"seeds": k, **one, "outcome": result})
        if result not in (UNDECIDED, NOT_DECISIVE):
            break
    last = made[-1]
    outcome = UNDECIDED if last["outcome"] == NOT_DECISIVE else last["outcome"]
    scaled = lambda key: (
        min(1.0, len(decisive) * min(ps))
        if (ps := [m[key] for m in made if m["seeds"] in decisive and m.get(key) is not None])
        else None
    )
    return {
        "outcome": outcome,
        "seeds": last["seeds"],
        "level": level,
        "alpha": alpha,
        "stages": list(stages),
        "decisive": list(decisive),
        "looks": made,
        "open": outcome == UNDECIDED and last["seeds"] < stages[-1],
        "p": scaled("p"),
        "tost_p": scaled("tost_p"),
        "test": last.get("test"),
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


def compare_sequential(
    run: Run,
    reference: str,
    *,
    statistic: str,
    claim: str = "ahead",
    baselines: Sequence[str] | None = None,
    stages: Sequence[int] = STAGES,
    alpha: float = ALPHA,
    test: str = "exact",
    target: float | None = None,
    improvement: float | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """The rule for the reference against each baseline of ``run`` (its seeds in stages).

    Args:
      run: a finished run, or seed blocks merged by :func:`merge_runs`.
      reference, statistic, claim, baselines: as for :func:`jaxnigt.analysis.compare`.
      stages, alpha: the looks' planned seed counts, the error rate they share.
      test: ``exact`` (the rule) or ``bootstrap`` (the fourth edition's; module docstring).
      target: a time statistic's target fixed in advance (else each look pools its own).
      improvement: ``R_best − R0`` fixed in advance, the scale of a return margin (else
        each look's pooled one).
      kw: to :func:`jaxnigt.analysis.compare` (``reps``, ``seed``).

    Returns:
      Per baseline, the rule's result (every look) and the claim's verdict.

    Raises:
      AnalysisError: an unknown ``test``, fewer seeds than the first stage, or no look that
        can reach its level (its ``param`` names which).
    """
    if test not in TESTS:
        raise AnalysisError(f"got {test!r}; expected one of {TESTS}", param="test")
    looks = _Looks(run, reference, statistic, claim, baselines, kw, target, improvement)
    available = min(len(m.seeds) for m in looks.methods.values())
    out = {}
    for b in looks.names:
        result = _rule(looks, b, test, stages, alpha, available)
        out[b] = {**result, "verdict": claim_verdict(claim, result)}
    km = looks.done[max(looks.done)]["kaplan_meier"] if looks.done else None
    if target is not None and looks.ratio:  # the curves at the fixed target, every seed
        from jaxnigt.analysis.comparison import kaplan_meier_curves
        from jaxnigt.analysis.stats import fraction

        fixed = {fraction(statistic): float(target)}
        km = kaplan_meier_curves(looks.methods, run.budget, fixed, statistic)
    return {
        "reference": reference,
        "statistic": statistic,
        "claim": claim,
        "test": test,
        "target": target,
        "comparisons": out,
        "kaplan_meier": km,
    }


def _rule(looks: _Looks, b: str, test: str, stages, alpha: float, available: int) -> dict:
    """One baseline's comparison under the ``test`` rule (:func:`compare_sequential`)."""
    tie = 1.0 if looks.ratio else 0.0
    if test == "exact":
        paired = tuple(looks.methods[looks.reference].seeds) == tuple(looks.methods[b].seeds)
        return run_exact_rule(
            functools.partial(looks.exact, b),
            tie=tie,
            stages=stages,
            alpha=alpha,
            available=available,
            p_min=looks_lib.paired_p_min if paired else looks_lib.independent_p_min,
        )
    level = look_level(len(stages), alpha)
    return run_rule(
        functools.partial(looks.effect, b),
        lambda k: looks.margin(k, level),
        tie=tie,
        stages=stages,
        alpha=alpha,
        available=available,
    )


class _Looks:
    """:func:`compare_sequential`'s looks at a run: each ``(seeds, level)`` compared once."""

    def __init__(self, run: Run, reference, statistic, claim, baselines, kw, target, improve):
        self.run, self.reference, self.statistic = run, reference, statistic
        self.claim, self.kw, self.target, self.improvement = claim, kw, target, improve
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
                target=self.target,
                **self.kw,
            )
        return self.done[k, level]

    def exact(self, baseline: str, k: int, level: float) -> dict:
        """The rule's look at ``k`` seeds: :func:`jaxnigt.analysis.looks.look` with the
        margin, the target fixed or pooled over the look's own seeds."""
        from jaxnigt.analysis.stats import fraction, time_axis

        ref, other = (first_seeds(self.methods[m], k) for m in (self.reference, baseline))
        paired = tuple(ref.seeds) == tuple(other.seeds)
        budget, censor = self.run.budget, None
        if self.ratio:  # a fixed target needs no pooling over the look's seeds
            pooled = lambda: self(k, level)["targets"][str(fraction(self.statistic))]
            t = self.target if self.target is not None else pooled()
            axis = time_axis(self.statistic)  # simulated time, or the total worker time
            values = [m.statistic(axis, budget, t) for m in (ref, other)]
            censor = tuple(m.censoring(axis, budget) for m in (ref, other))
            kind, margin = looks_lib.TIME, TIME_MARGIN
        else:
            values = [m.statistic(self.statistic, budget) for m in (ref, other)]
            kind, margin = looks_lib.RETURN, self.margin(k, level)
        seed = self.kw.get("seed", 0)
        one = looks_lib.look(
            kind, *values, paired=paired, level=level, margin=margin, budget=budget,
            censor=censor, seed=seed,
        )  # fmt: skip
        if self.ratio:
            one["target"] = t
        # the per-seed values tested (restricted times, or returns): the look again from them
        if self.ratio:
            values = [looks_lib.restricted(v, c) for v, c in zip(values, censor, strict=True)]
        one["values"] = {"reference": values[0].tolist(), "baseline": values[1].tolist()}
        return one

    def effect(self, baseline: str, k: int, level: float) -> dict:
        """The fourth edition's look: a ratio of times by compare's percentile bootstrap of
        the median times; a difference of returns by :func:`difference_interval`."""
        from jaxnigt.analysis.verdicts import interval, time_ratio

        ref, other = (first_seeds(self.methods[a], k) for a in (self.reference, baseline))
        same = tuple(ref.seeds) == tuple(other.seeds)
        if self.ratio:
            from jaxnigt.analysis.stats import fraction, time_axis

            t = self(k, level)["targets"][str(fraction(self.statistic))]
            axis = time_axis(self.statistic)
            values = [m.statistic(axis, self.run.budget, t) for m in (ref, other)]
            kw = {k_: v for k_, v in self.kw.items() if k_ in ("reps", "seed")}
            return interval(time_ratio, *values, tie=1.0, level=level, paired=same, **kw)
        values = [m.statistic(self.statistic, self.run.budget) for m in (ref, other)]
        return difference_interval(*values, level, paired=same)

    def margin(self, k: int, level: float) -> tuple[float, float]:
        if self.ratio:
            return TIME_MARGIN
        if self.improvement is not None:
            width = RETURN_MARGIN * abs(self.improvement)
        else:
            a = self(k, level)
            width = RETURN_MARGIN * abs(a["best_second_half_median"] - a["initial_median_return"])
        return (-width, width)
