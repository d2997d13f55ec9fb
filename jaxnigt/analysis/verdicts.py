"""Deciding a comparison: effects, bootstrap intervals, outcomes and a claim's verdict.

Pure functions of per-seed arrays (the statistics of :mod:`jaxnigt.analysis.stats`); every
comparison ``jaxnigt compare`` (:mod:`jaxnigt.analysis`) and ``scripts/paper/second.py`` report is
decided by these rules and no others.

**Effects.** For the return statistics: the difference of means over seeds, reference minus
baseline (> 0: the reference is ahead).  For times to target: the ratio baseline / reference
of the median times (> 1: the reference is faster; ``inf`` when only the reference's majority
reached the target, undefined when neither did).

**Intervals** (:func:`bootstrap_interval`).  A percentile bootstrap at level 0.9 with 2,000
resamples from ``numpy.random.default_rng(seed)`` (seed 0): in every resample each group's
seeds (each method's, each scenario's) are drawn with replacement, independently of the other
groups (the runs of different methods are separate programs), in the order resample by
resample, group by group; the interval is the 5 % and 95 % quantiles of the resampled
statistic (``method="nearest"``, so two infinite draws never interpolate to NaN); resamples
where the statistic is undefined (NaN) are left out.

**Outcome of a comparison** (:func:`outcome`): *identical runs* when every seed's evaluation
curve is the same for both methods; the reference (or the baseline) *ahead* when the interval
excludes a tie (0 for a difference, 1 for a ratio) on its side; otherwise *tie not excluded*,
with the seeds an interval that narrow would need (:func:`needed_seeds`).

**Verdict** (:func:`verdict`), over the comparisons of one claim.  Claim ``ahead`` (the
reference beats every baseline): *refuted* when some baseline is ahead, or the runs are
identical (the reference cannot be ahead of itself); *confirmed* when the reference is ahead
of every baseline; *inconclusive* otherwise, with the most seeds any undecided comparison
needs.  Claim ``tie`` (the methods are the same): *confirmed (identical runs)* when every
comparison is identical runs, *refuted* when some interval excludes a tie, *inconclusive*
otherwise.  :func:`lead_growth` decides whether a lead grows from one scenario to another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from jaxnigt.analysis.stats import median_time

LEVEL = 0.9
REPS = 2000
SEED = 0
IDENTICAL, REFERENCE_AHEAD, BASELINE_AHEAD, TIE = (
    "identical runs",
    "reference ahead",
    "baseline ahead",
    "tie not excluded",
)
CLAIMS = ("ahead", "tie")


def bootstrap_interval(
    statistic: Callable[..., float],
    *groups: np.ndarray,
    level: float = LEVEL,
    reps: int = REPS,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """``(estimate, low, high)``: ``statistic(*groups)`` and its percentile bootstrap interval.

    Each group is a per-seed array (leading seed axis).  Resample ``r`` draws, for each
    group in order, ``len(g)`` indices with replacement (``rng.integers(0, len(g), len(g))``,
    ``rng = numpy.random.default_rng(seed)``); the interval is the ``(1 ∓ level)/2``
    quantiles (``method="nearest"``) of the resampled statistic, NaN resamples left out
    (NaN bounds when every resample is NaN).  ``statistic`` may return ``±inf``.
    """
    rng = np.random.default_rng(seed)
    groups = tuple(np.asarray(g) for g in groups)
    est = float(statistic(*groups))
    draws = np.array(
        [statistic(*(g[rng.integers(0, len(g), len(g))] for g in groups)) for _ in range(reps)],
        np.float64,
    )
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return est, float("nan"), float("nan")
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], method="nearest")
    return est, float(low), float(high)


def mean_difference(reference: np.ndarray, baseline: np.ndarray) -> float:
    """Mean over seeds of ``reference`` minus that of ``baseline``."""
    return float(np.mean(reference) - np.mean(baseline))


def time_ratio(reference: np.ndarray, baseline: np.ndarray) -> float:
    """``median_time(baseline) / median_time(reference)`` of per-seed times (``inf`` when
    only the reference's majority reached the target, NaN when neither did)."""
    ref, other = float(median_time(reference)), float(median_time(baseline))
    if math.isinf(ref) and math.isinf(other):
        return math.nan
    if ref == 0:
        return 1.0 if other == 0 else math.inf
    return other / ref


def interval(statistic, *groups, **kw) -> dict[str, float]:
    """:func:`bootstrap_interval` as ``{"estimate", "low", "high"}``."""
    est, low, high = bootstrap_interval(statistic, *groups, **kw)
    return {"estimate": est, "low": low, "high": high}


def needed_seeds(iv: Mapping[str, float], seeds: int, *, ratio: bool = False) -> int | None:
    """Seeds an interval as narrow as ``iv`` (at ``seeds`` seeds) would need to exclude a tie.

    The half-width shrinks as 1/√seeds, so ``ceil(seeds (half-width / |estimate|)²)``; for
    a ratio on the log scale.  None when the estimate is a tie itself or a bound is not
    finite (no number of seeds is implied).
    """
    est, low, high = iv["estimate"], iv["low"], iv["high"]
    if ratio:
        if not (est > 0 and low > 0 and high > 0):
            return None
        est, low, high = math.log(est), math.log(low), math.log(high)
    half = (high - low) / 2
    if not (math.isfinite(half) and math.isfinite(est)) or est == 0:
        return None
    return math.ceil(seeds * (half / abs(est)) ** 2 - 1e-9)  # an exact square stays exact


def outcome(iv: Mapping[str, float], *, identical: bool = False, ratio: bool = False) -> str:
    """The outcome of one comparison (module docstring): :data:`IDENTICAL`,
    :data:`REFERENCE_AHEAD`, :data:`BASELINE_AHEAD` or :data:`TIE`."""
    if identical:
        return IDENTICAL
    null = 1.0 if ratio else 0.0
    if iv["low"] > null:
        return REFERENCE_AHEAD
    if iv["high"] < null:
        return BASELINE_AHEAD
    return TIE


def verdict(rows: Sequence[Mapping[str, Any]], claim: str = "ahead") -> dict[str, Any]:
    """``{"verdict", "needed_seeds"}`` of a claim over its comparisons (module docstring).

    Each row has ``outcome`` (:func:`outcome`) and ``needed_seeds`` (for :data:`TIE`).
    """
    if claim not in CLAIMS:
        raise ValueError(f"claim: got {claim!r}; expected one of {CLAIMS}")
    outcomes = [r["outcome"] for r in rows]
    if not outcomes:
        raise ValueError("verdict: no comparisons")
    ties = [r.get("needed_seeds") for r in rows if r["outcome"] == TIE]
    needed = max(ties) if ties and None not in ties else None
    if claim == "tie":
        if all(o == IDENTICAL for o in outcomes):
            return {"verdict": "confirmed (identical runs)", "needed_seeds": None}
        if any(o in (REFERENCE_AHEAD, BASELINE_AHEAD) for o in outcomes):
            return {"verdict": "refuted", "needed_seeds": None}
        return {"verdict": "inconclusive", "needed_seeds": None}
    if BASELINE_AHEAD in outcomes:
        return {"verdict": "refuted", "needed_seeds": None}
    if IDENTICAL in outcomes:
        return {"verdict": "refuted (identical runs)", "needed_seeds": None}
    if all(o == REFERENCE_AHEAD for o in outcomes):
        return {"verdict": "confirmed", "needed_seeds": None}
    return {"verdict": "inconclusive", "needed_seeds": needed}


def lead_growth(
    small: tuple[np.ndarray, np.ndarray, float],
    large: tuple[np.ndarray, np.ndarray, float],
    **kw,
) -> dict[str, Any]:
    """Does the reference's lead over a baseline grow from scenario ``small`` to ``large``?

    Each argument is ``(reference, baseline, improvement)``: the per-seed statistic of both
    methods in that scenario and its improvement R_best − R0
    (:func:`~jaxnigt.analysis.stats.targets`), held fixed.  A scenario's lead is the difference of
    means divided by its improvement, so that scenarios with different returns compare; the
    effect is lead(large) − lead(small), its interval bootstraps the four groups of seeds
    independently.  Confirmed when the interval is above 0, refuted below, otherwise
    inconclusive (with :func:`needed_seeds`).
    """
    (r_s, b_s, scale_s), (r_l, b_l, scale_l) = small, large

    def growth(rs, bs, rl, bl):
        return mean_difference(rl, bl) / scale_l - mean_difference(rs, bs) / scale_s

    return _growth("lead_difference", interval(growth, r_s, b_s, r_l, b_l, **kw),
                   r_s, b_s, r_l, b_l)  # fmt: skip


def _growth(name: str, iv: dict, *groups: np.ndarray) -> dict[str, Any]:
    """A growth's interval ``iv`` (under ``name``), its verdict and the seeds it needs."""
    decided = iv["low"] > 0 or iv["high"] < 0
    result = "confirmed" if iv["low"] > 0 else "refuted" if iv["high"] < 0 else "inconclusive"
    seeds = min(len(g) for g in groups)
    return {
        name: iv,
        "needed_seeds": None if decided else needed_seeds(iv, seeds),
        "verdict": result,
    }


def speed_lead_growth(
    small: tuple[np.ndarray, np.ndarray],
    large: tuple[np.ndarray, np.ndarray],
    **kw,
) -> dict[str, Any]:
    """Does the reference's *speed* lead over a baseline grow from scenario ``small`` to
    ``large``?

    Each argument is ``(reference, baseline)``: per-seed times to the same fraction of the
    improvement in that scenario (``inf``: censored at the budget).  A scenario's lead is the
    log of :func:`time_ratio` (baseline over reference: 0 when they are as fast), so that
    scenarios with different time scales compare; the effect is lead(large) − lead(small),
    its interval bootstraps the four groups of seeds independently.  A censored majority
    gives an infinite lead (a resample where neither method's majority reaches the target is
    left out).  Confirmed when the interval is above 0, refuted below, otherwise
    inconclusive (with :func:`needed_seeds`).
    """
    (r_s, b_s), (r_l, b_l) = small, large

    def growth(rs, bs, rl, bl):
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.log(time_ratio(rl, bl)) - np.log(time_ratio(rs, bs)))

    return _growth("log_lead_difference", interval(growth, r_s, b_s, r_l, b_l, **kw),
                   r_s, b_s, r_l, b_l)  # fmt: skip
