"""One look at a comparison, decided by an exact randomization test (the default rule).

A look compares the reference with one baseline on their first k seeds.  What it tests,
fixed before any data:

* **time claims** (``time_to_50``, ``time_to_80``): each seed's *restricted time*
  ``min(T, B)``, T its first evaluation time at or above the target and B the budget; a seed
  that never reaches the target counts as B, exactly as the restricted mean survival time
  (RMST) counts it, so it is neither dropped nor an infinity.  The test and the effect are
  on the log scale: per seed ``log(min(T_base, B) / min(T_ref, B))``, whose mean is the log
  of the ratio of geometric-mean restricted times, baseline over reference (> 1: the
  reference is faster).  Restricted times are heavy-tailed (lognormal-like); on the log
  scale the same exact test finds a true 1.5× speed-up more often at 20 paired seeds (the
  project's simulation: 0.345 against 0.321 on differences at 30 % censored).  Beside it:
  the RMST ratio with a paired bootstrap interval, the RMST difference with its inverted
  interval, and the ratio of median times (descriptive).  A seed reaching the target at
  time 0 counts at :data:`FLOOR` × B.  A time on another axis (``worker_time_to_50``,
  ``worker_time_to_80``: the total worker time at that first evaluation) is looked at in the
  same way, each seed censored at its own point (``censor``: its final total worker time)
  instead of B;
* **return claims** (``average``, ``second_half``): each seed's return statistic; the effect
  is the mean difference, reference minus baseline.

**The test** of a tie (:mod:`jaxnigt.analysis.randomization`): the paired sign-flip test
when both methods ran the same seeds, exact at every look up to 40 seeds; the permutation
test of independent seeds otherwise.  The look's interval is the test inverted at the look's
level: it excludes the tie exactly when the test rejects it.  **Equivalence** within a
margin is two one-sided tests (TOST) of the margin's ends; its p-value is reported apart
from the tie's.  A look at too few seeds for its level to be reachable (5 paired seeds can
give no p below 1/16) decides nothing (:func:`decisive_stages`).

**Conventions.** Medians are numpy's (the mean of the two middle values of an even count; a
median with an infinite middle value is infinite); bootstrap percentiles are numpy's linear
quantiles (``method="linear"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxnigt.analysis import randomization

TIME, RETURN = "time", "return"
BOOTSTRAP_REPS = 2000
FLOOR = 1e-6  # a restricted time of 0 counts at FLOOR × B on the log scale


def restricted(times: np.ndarray, budget) -> np.ndarray:
    """``min(T, B)`` per seed (``inf``: never reached, counts as the budget); ``budget`` a
    number, or per seed the point where each is censored."""
    return np.minimum(np.asarray(times, np.float64), np.asarray(budget, np.float64))


def median_ratio(reference: np.ndarray, baseline: np.ndarray) -> float:
    """``median(baseline) / median(reference)`` of per-seed times (numpy's median; ``inf``
    never reached): 1 when both are infinite, ``inf`` when only the baseline's is."""
    ref, base = float(np.median(reference)), float(np.median(baseline))
    if math.isinf(ref) and math.isinf(base):
        return 1.0
    if ref == 0 or math.isinf(base):
        return math.inf if base > 0 else 1.0
    return base / ref


def decisive_stages(
    stages: Sequence[int], alpha: float, p_min: Callable[[int], float]
) -> tuple[int, ...]:
    """The looks that can decide: the largest K such that at least K stages have a smallest
    attainable p (``p_min(k)``) of at most ``alpha / K``, and the latest K of those.  The
    error ``alpha`` is split over these looks alone: a look that cannot reject spends none
    of it (at 5, 10, 20, 40 paired seeds and alpha 0.10: the looks at 10, 20, 40, each at
    alpha / 3; at 5, 10: the look at 10, at alpha).  Empty when no look can reach alpha."""
    for k in range(len(stages), 0, -1):
        reach = [s for s in stages if p_min(s) <= alpha / k]
        if len(reach) >= k:
            return tuple(reach[-k:])
    return ()


def paired_p_min(k: int) -> float:
    """The smallest two-sided p of the paired sign-flip test at k seeds."""
    return randomization.smallest_p(k)


def independent_p_min(k: int) -> float:
    """The smallest two-sided p of the permutation test of two groups of k seeds."""
    return min(1.0, 2.0 / math.comb(2 * k, k))


def _bootstrap_ratio(x, y, level: float, paired: bool, seed: int = 0) -> dict:
    """The ratio of means ``mean(y) / mean(x)`` with a percentile bootstrap interval
    (:data:`BOOTSTRAP_REPS` resamples from ``default_rng(seed)``; paired: one index set)."""
    rng = np.random.default_rng(seed)
    ix = rng.integers(0, x.size, (BOOTSTRAP_REPS, x.size))
    iy = ix if paired else rng.integers(0, y.size, (BOOTSTRAP_REPS, y.size))
    draws = y[iy].mean(axis=1) / x[ix].mean(axis=1)
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], method="linear")
    return {"estimate": float(y.mean() / x.mean()), "low": float(low), "high": float(high)}


def look(
    kind: str,
    reference: np.ndarray,
    baseline: np.ndarray,
    *,
    paired: bool,
    level: float,
    margin: tuple[float, float] | None = None,
    budget: float | None = None,
    censor: tuple[np.ndarray, np.ndarray] | None = None,
    intervals: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """One look (module docstring).

    Args:
      kind: :data:`TIME` (per-seed times to the target, ``inf`` never reached; needs
        ``budget``) or :data:`RETURN` (per-seed returns).
      reference, baseline: the per-seed values, seed-aligned when ``paired``.
      paired: the same seeds of both methods.
      level: the interval's level (``1 − alpha / K`` in the staged rule).
      margin: an equivalence margin (a ratio range for times, a difference range for
        returns), or None for no equivalence test.
      censor: times only: ``(reference, baseline)`` per-seed points where each side's seeds
        are censored (a time on another axis: the total worker time); None: the budget.
      intervals: False skips the inverted intervals (a simulation's looks need only p).
      seed: of the bootstrap second view and of a Monte Carlo p (beyond 40 paired seeds);
        an exact test draws nothing.

    Returns:
      ``interval`` (estimate, low, high: the ratio of geometric-mean restricted times, or
      the mean difference), ``p`` and the test (``test``, ``p_se``, ``p_min``, ``exact``),
      ``tost_p`` (None without a margin), and for times ``rmst`` (each side),
      ``rmst_ratio`` (the RMST ratio with its percentile bootstrap interval),
      ``rmst_difference``, ``median_ratio``, ``reached`` (seeds at the target, each side).
    """
    if kind not in (TIME, RETURN):
        raise ValueError(f"kind: got {kind!r}; expected {TIME!r} or {RETURN!r}")
    if kind == TIME and budget is None:
        raise ValueError("a time look needs the budget")
    args = (reference, baseline, paired, level, budget, intervals, seed)
    out, test_at = _time_look(*args, censor) if kind == TIME else _return_look(*args)
    out["interval"]["p"] = out["p"]
    out["tost_p"] = None if margin is None else randomization.tost(test_at, margin)["p"]
    out["margin"] = None if margin is None else list(margin)
    return out


def _time_look(reference, baseline, paired, level, budget, intervals, seed, censor=None):
    """:func:`look` of restricted times: its fields and the test of a ratio, for TOST."""
    cx, cy = (budget, budget) if censor is None else censor
    x, y = restricted(reference, cx), restricted(baseline, cy)
    lx, ly = log_restricted(x, cx), log_restricted(y, cy)
    test = randomization.difference_test(ly, lx, paired=paired, level=1.0 - level, seed=seed)
    out: dict[str, Any] = {"kind": TIME, **_test_fields(test)}
    out["rmst"] = {"reference": float(x.mean()), "baseline": float(y.mean())}
    out["reached"] = {
        "reference": int(np.sum(np.asarray(reference) <= cx)),
        "baseline": int(np.sum(np.asarray(baseline) <= cy)),
        "seeds": int(x.size),
    }
    out["median_ratio"] = median_ratio(np.asarray(reference), np.asarray(baseline))
    if intervals:
        log_ratio = randomization.shift_interval(ly, lx, level, paired=paired)
        out["interval"] = {k: math.exp(v) for k, v in log_ratio.items()}
        out["rmst_ratio"] = _bootstrap_ratio(x, y, level, paired, seed)
        out["rmst_difference"] = randomization.shift_interval(y, x, level, paired=paired)
    else:
        out["interval"] = {"estimate": math.exp(float(ly.mean() - lx.mean()))}
    return out, lambda c, alt: randomization.difference_test(
        ly, lx, paired=paired, shift=math.log(c), alternative=alt
    )


def log_restricted(restricted_times: np.ndarray, budget) -> np.ndarray:
    """``log(min(T, B))`` per seed, a time of 0 counted at :data:`FLOOR` × B (B finite and
    positive; ``budget`` a number or per seed, as :func:`restricted`'s)."""
    budget = np.asarray(budget, np.float64)
    usable = np.isfinite(budget) & (budget > 0)
    floor = np.where(usable, FLOOR * np.where(usable, budget, 1.0), np.finfo(np.float64).tiny)
    return np.log(np.maximum(np.asarray(restricted_times, np.float64), floor))


def _return_look(reference, baseline, paired, level, budget, intervals, seed):
    """:func:`look` of returns: its fields and the test of a shift, for TOST."""
    x, y = np.asarray(reference, np.float64), np.asarray(baseline, np.float64)
    test = randomization.difference_test(x, y, paired=paired, level=1.0 - level, seed=seed)
    out: dict[str, Any] = {"kind": RETURN, **_test_fields(test)}
    if intervals:
        out["interval"] = randomization.shift_interval(x, y, level, paired=paired)
    else:
        out["interval"] = {"estimate": float(x.mean() - y.mean())}
    return out, lambda d, alt: randomization.difference_test(
        x, y, paired=paired, shift=d, alternative=alt
    )


def _test_fields(test: dict[str, Any]) -> dict[str, Any]:
    keep = ("test", "p", "p_se", "p_min", "exact", "draws")
    return {k: test[k] for k in keep if k in test}


def tie_of(kind: str) -> float:
    """The effect of a tie: a ratio of 1 for times, a difference of 0 for returns."""
    return 1.0 if kind == TIME else 0.0
