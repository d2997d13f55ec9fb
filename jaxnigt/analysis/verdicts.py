"""Deciding a comparison: effects, bootstrap intervals, outcomes and a claim's verdict.

Pure functions of per-seed arrays (the statistics of :mod:`jaxnigt.analysis.stats`); every
comparison ``jaxnigt compare`` (:mod:`jaxnigt.analysis`) and the results pipeline
(``scripts/paper``) report is decided by these rules and no others.

**Effects.** For the return statistics: the difference of means over seeds, reference minus
baseline (> 0: the reference is ahead).  For times to target: the ratio baseline / reference
of the median times (> 1: the reference is faster; ``inf`` when only the reference's majority
reached the target, 1 when neither did).

**Intervals** (:func:`bootstrap_interval`).  A percentile bootstrap at level 0.9 with 2,000
resamples from ``numpy.random.default_rng(seed)`` (seed 0).  *Paired* (``paired=True``: the
groups are the same seeds of two methods, or of two scenarios; seed s gives every method the
same initial policy and evaluation keys): each resample draws one set of seed indices,
``rng.integers(0, n, (reps, n))``, used for every group.  *Independent* (groups of different
seeds): in every resample each group's seeds are drawn with replacement, independently of the
other groups, in the order resample by resample, group by group.  The interval is the 5 % and
95 % quantiles of the resampled statistic (``method="nearest"``, so two infinite draws never
interpolate to NaN); resamples where the statistic is undefined (NaN) are left out, and
:func:`bootstrap_p_value` is the two-sided p-value of a tie that the same draws give.

**Never reached.**  A time to target is ``inf`` when the seed did not reach it within the
budget (censored).  Where neither method's majority reaches it, the ratio of median times is
1, a tie: the two methods are as fast as far as the budget shows (in the estimate and in every
resample; leaving such resamples out would build the interval from the few in which one side
is finite, and could exclude a tie between two copies of one method).

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


def _indices(rng: np.random.Generator, sizes: Sequence[int], reps: int, paired: bool):
    """Each group's ``[reps, size]`` resampled seed indices (module docstring)."""
    if paired:
        if len(set(sizes)) != 1:
            raise ValueError(f"paired resampling needs groups of one size; got sizes {sizes}")
        one = rng.integers(0, sizes[0], (reps, sizes[0]))
        return [one] * len(sizes)
    out = [np.empty((reps, n), np.int64) for n in sizes]
    for r in range(reps):
        for idx, n in zip(out, sizes, strict=True):
            idx[r] = rng.integers(0, n, n)
    return out


def bootstrap_draws(
    statistic: Callable[..., Any],
    *groups: np.ndarray,
    reps: int = REPS,
    seed: int = SEED,
    paired: bool = False,
) -> tuple[float, np.ndarray]:
    """``(estimate, draws)``: ``statistic(*groups)`` and its ``reps`` resampled values
    (NaN where undefined).  A statistic with ``batched = True`` is called once on
    ``[reps, seeds]`` arrays; any other once per resample."""
    rng = np.random.default_rng(seed)
    groups = tuple(np.asarray(g) for g in groups)
    est = float(statistic(*groups))
    idx = _indices(rng, [len(g) for g in groups], reps, paired)
    if getattr(statistic, "batched", False):
        draws = np.asarray(statistic(*(g[i] for g, i in zip(groups, idx, strict=True))))
    else:
        draws = [
            statistic(*(g[i[r]] for g, i in zip(groups, idx, strict=True))) for r in range(reps)
        ]
    return est, np.asarray(draws, np.float64).reshape(reps)


def bootstrap_p_value(draws: np.ndarray, tie: float) -> float:
    """The two-sided bootstrap p-value of ``tie``: ``2 min(share of draws <= tie, share >=
    tie)``, at most 1 (NaN draws left out; draws equal to ``tie`` count on both sides).  A
    percentile interval at level L excludes ``tie`` about when this is below 1 − L."""
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return float("nan")
    return float(min(1.0, 2 * min(np.mean(draws <= tie), np.mean(draws >= tie))))


def bootstrap_interval(
    statistic: Callable[..., float],
    *groups: np.ndarray,
    level: float = LEVEL,
    reps: int = REPS,
    seed: int = SEED,
    paired: bool = False,
) -> tuple[float, float, float]:
    """``(estimate, low, high)``: ``statistic(*groups)`` and its percentile bootstrap interval.

    Args:
      statistic: a function of per-seed arrays (leading seed axis); may return ``±inf``,
        NaN where undefined.
      groups: the per-seed arrays.
      level: the interval's level: its bounds are the ``(1 ∓ level)/2`` quantiles
        (``method="nearest"``) of the resampled statistic, NaN resamples left out (NaN bounds
        when every resample is NaN).
      reps, seed: resamples and the seed of ``numpy.random.default_rng``.
      paired: resample the groups' seeds jointly (the groups are the same seeds; module
        docstring); else each group independently, in the order resample by resample, group
        by group (``rng.integers(0, len(g), len(g))``).

    Returns:
      The estimate and the interval's bounds.
    """
    iv = interval(statistic, *groups, level=level, reps=reps, seed=seed, paired=paired)
    return iv["estimate"], iv["low"], iv["high"]


def mean_difference(reference: np.ndarray, baseline: np.ndarray) -> Any:
    """Mean over seeds (the last axis) of ``reference`` minus that of ``baseline``."""
    out = np.mean(reference, axis=-1) - np.mean(baseline, axis=-1)
    return float(out) if np.ndim(out) == 0 else out


mean_difference.batched = True


def time_ratio(reference: np.ndarray, baseline: np.ndarray) -> Any:
    """``median_time(baseline) / median_time(reference)`` of per-seed times (the last axis;
    ``inf`` = never reached): ``inf`` when only the reference's majority reached the target,
    0 when only the baseline's, 1 when neither did (a tie: module docstring)."""
    ref = np.asarray(median_time(reference), np.float64)
    other = np.asarray(median_time(baseline), np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(
            np.isinf(ref) & np.isinf(other),
            1.0,
            np.where(ref == 0, np.where(other == 0, 1.0, np.inf), other / ref),
        )
    return float(out) if out.ndim == 0 else out


time_ratio.batched = True


def interval(
    statistic,
    *groups,
    tie: float | None = None,
    level: float = LEVEL,
    reps: int = REPS,
    seed: int = SEED,
    paired: bool = False,
) -> dict[str, float]:
    """:func:`bootstrap_interval` as ``{"estimate", "low", "high"}``, and with ``tie`` (0 for
    a difference, 1 for a ratio) its :func:`bootstrap_p_value` as ``"p"``."""
    est, draws = bootstrap_draws(statistic, *groups, reps=reps, seed=seed, paired=paired)
    kept = draws[~np.isnan(draws)]
    if kept.size == 0:
        out = {"estimate": est, "low": float("nan"), "high": float("nan")}
    else:
        low, high = np.quantile(kept, [(1 - level) / 2, (1 + level) / 2], method="nearest")
        out = {"estimate": est, "low": float(low), "high": float(high)}
    if tie is not None:
        out["p"] = bootstrap_p_value(draws, tie)
    return out


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


def holm_adjusted(p_values: Mapping[str, float | None]) -> dict[str, float | None]:
    """Holm's adjusted p-values of a family of comparisons: sorted ascending, the i-th (from
    0) is ``max over j <= i of min(1, (m − j) p_(j))``, m the family's size.  A comparison
    without a p-value (None or NaN) counts in m and has none."""
    m = len(p_values)
    known = {k: p for k, p in p_values.items() if p is not None and not math.isnan(p)}
    out: dict[str, float | None] = dict.fromkeys(p_values)
    running = 0.0
    for i, name in enumerate(sorted(known, key=known.get)):
        running = max(running, min(1.0, (m - i) * known[name]))
        out[name] = running
    return out


def holm(p_values: Mapping[str, float | None], alpha: float = 0.10) -> dict[str, bool]:
    """Holm's step-down over a family of comparisons: ``{name: rejected}`` at family-wise
    error ``alpha``.  The p-values are sorted; the i-th smallest (from 0) is rejected while
    every smaller one was and it is at most ``alpha / (m − i)``, m the family's size (the same
    as :func:`holm_adjusted` at most ``alpha``).  A comparison without a p-value (None or
    NaN) counts in m and is never rejected."""
    adjusted = holm_adjusted(p_values)
    return {k: p is not None and p <= alpha for k, p in adjusted.items()}


def lead_growth(
    small: tuple[np.ndarray, np.ndarray, float],
    large: tuple[np.ndarray, np.ndarray, float],
    *,
    paired: bool = False,
    **kw,
) -> dict[str, Any]:
    """Does the reference's lead over a baseline grow from scenario ``small`` to ``large``?

    Each argument is ``(reference, baseline, improvement)``: the per-seed statistic of both
    methods in that scenario and its improvement R_best − R0
    (:func:`~jaxnigt.analysis.stats.targets`), held fixed.  A scenario's lead is the difference of
    means divided by its improvement, so that scenarios with different returns compare; the
    effect is lead(large) − lead(small).  Its interval resamples the four groups' seeds jointly
    with ``paired`` (the same seeds in both scenarios and methods), else independently.
    Confirmed when the interval is above 0, refuted below, otherwise inconclusive (with
    :func:`needed_seeds`).
    """
    (r_s, b_s, scale_s), (r_l, b_l, scale_l) = small, large

    def growth(rs, bs, rl, bl):
        return mean_difference(rl, bl) / scale_l - mean_difference(rs, bs) / scale_s

    growth.batched = True
    iv = interval(growth, r_s, b_s, r_l, b_l, tie=0.0, paired=paired, **kw)
    return _growth("lead_difference", iv, r_s, b_s, r_l, b_l)


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


def log_lead_difference(rs, bs, rl, bl) -> Any:
    """``log time_ratio(rl, bl) − log time_ratio(rs, bs)`` (batched over leading axes): the
    growth of a speed lead; 0 where both leads are infinite of one sign (neither scenario's
    comparison is decided by the budget: no growth is seen)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        large = np.log(np.asarray(time_ratio(rl, bl), np.float64))
        small = np.log(np.asarray(time_ratio(rs, bs), np.float64))
        out = np.where(np.isinf(large) & (large == small), 0.0, large - small)
    return float(out) if out.ndim == 0 else out


log_lead_difference.batched = True


def speed_lead_growth(
    small: tuple[np.ndarray, np.ndarray],
    large: tuple[np.ndarray, np.ndarray],
    *,
    paired: bool = False,
    **kw,
) -> dict[str, Any]:
    """Does the reference's *speed* lead over a baseline grow from scenario ``small`` to
    ``large``?

    Each argument is ``(reference, baseline)``: per-seed times to the same fraction of the
    improvement in that scenario (``inf``: censored at the budget).  A scenario's lead is the
    log of :func:`time_ratio` (baseline over reference: 0 when they are as fast, and when
    neither majority reaches the target), so that scenarios with different time scales
    compare; the effect is lead(large) − lead(small) (:func:`log_lead_difference`).  Its
    interval resamples the four groups' seeds jointly with ``paired`` (the same seeds in both
    scenarios), else independently.  A censored majority on one side gives an infinite lead.
    Confirmed when the interval is above 0, refuted below, otherwise inconclusive (with
    :func:`needed_seeds`).
    """
    (r_s, b_s), (r_l, b_l) = small, large
    iv = interval(log_lead_difference, r_s, b_s, r_l, b_l, tie=0.0, paired=paired, **kw)
    return _growth("log_lead_difference", iv, r_s, b_s, r_l, b_l)
