"""Randomization tests of a comparison over seeds: exact at the seeds a study runs.

A comparison's per-seed values are *paired* when both methods ran the same seeds (seed s
gives every method the same initial policy and evaluation keys), else *independent*.

**Paired: the sign-flip test.**  Under the null that the two methods' values of a seed are
exchangeable, each per-seed difference ``d_s`` is as likely to carry either sign, and the
``2^n`` sign patterns are equally likely.  The test statistic is ``S = Σ d_s`` (the mean
difference times n); its two-sided p-value is the share of the ``2^n`` patterns whose
``|S*|`` is at least the observed ``|S|`` (:func:`sign_flip_p`).  It is computed *exactly*
for up to :data:`EXACT_PAIRS` non-zero differences by meet in the middle: the ``2^k`` sums of
one half of the seeds against the sorted ``2^(n-k)`` sums of the other (n = 40 takes about a
second, where enumerating ``2^40`` patterns as ``scipy.stats.permutation_test`` does would
take days); beyond that by Monte Carlo (:func:`monte_carlo_p`).  A seed whose difference is 0
(both censored at the budget, say) changes no count.  The smallest p it can give at n
non-zero differences is ``2 / 2^n`` two-sided (:func:`smallest_p`): 1/16 at 5 seeds.

**Independent: the permutation test** (``scipy.stats.permutation_test``, difference of
means): exact when the ``C(n1 + n2, n1)`` splits number at most :data:`EXACT_SPLITS`, else
Monte Carlo.

**Monte Carlo p-values** carry their standard error ``sqrt(p (1 − p) / N)`` and count the
observed statistic among the ``N`` draws (``(1 + hits) / (1 + N)``, never 0).  Given a
level, draws are added (×10, up to :data:`MAX_DRAWS`) while p lies within 3 standard errors
of it, so a decision is not a coin of the draws.

**Intervals by inversion** (:func:`shift_interval`, :func:`ratio_interval`): the effects the
test does not reject at the level, so an interval excludes the tie exactly when the test
rejects it.  A shift δ of a difference is tested on ``d_s − δ``; a ratio c of means
(baseline over reference) on ``y_s − c x_s`` (paired) or on ``y`` against ``c x``
(independent).  Where the level is below the smallest p the seeds allow, no effect is
rejected and the interval is unbounded: at 5 paired seeds and level 0.975, ``(−∞, ∞)``.
A shifted null assumes the shifted differences symmetric (as a t interval assumes them
normal); the test of the tie itself assumes only exchangeable pairs.

**Equivalence** (:func:`tost`): two one-sided tests of the margin's ends; its p-value is the
larger of the two.

Every random draw comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

EXACT_PAIRS = 40  # exact sign-flip enumeration (meet in the middle) up to this many pairs
EXACT_SPLITS = 200_000  # exact independent permutation test up to this many splits
DRAWS = 20_000  # Monte Carlo draws to start with
MAX_DRAWS = 2_000_000  # at most this many when settling a p-value near its level
SEED = 0
ALTERNATIVES = ("two-sided", "greater", "less")


def _subset_sums(values: np.ndarray) -> np.ndarray:
    """The ``2^k`` signed sums ``Σ ±v`` of ``values`` (k of them)."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def _count_at_least(d: np.ndarray, t: float) -> int:
    """How many of the ``2^n`` sign patterns give ``Σ ±d >= t`` (meet in the middle)."""
    half = d.size // 2
    left, right = _subset_sums(d[:half]), np.sort(_subset_sums(d[half:]))
    return int(right.size * left.size - np.searchsorted(right, t - left, side="left").sum())


def _tolerance(d: np.ndarray) -> float:
    """Sums within this of each other are equal: a bound on the float rounding of one sum of
    ``d.size`` terms added in two orders (wider would merge distinct sums of values whose
    magnitudes span many decades)."""
    return 64 * d.size * float(np.finfo(np.float64).eps) * float(np.sum(np.abs(d))) + 1e-300


def smallest_p(n: int, alternative: str = "two-sided") -> float:
    """The smallest p-value a sign-flip test can give at ``n`` non-zero differences:
    ``2 / 2^n`` two-sided, ``1 / 2^n`` one-sided (1 at n = 0)."""
    if n <= 0:
        return 1.0
    return min(1.0, (2.0 if alternative == "two-sided" else 1.0) / 2.0**n)


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative: got {alternative!r}; expected one of {ALTERNATIVES}")


def sign_flip_p(d: np.ndarray, alternative: str = "two-sided") -> float:
    """The exact sign-flip p-value of the per-seed differences ``d`` (module docstring).

    ``alternative``: ``"greater"`` (the differences lean positive), ``"less"`` or
    ``"two-sided"``.  Exact for up to :data:`EXACT_PAIRS` non-zero differences (raises
    ValueError beyond: use :func:`sign_flip_test`).
    """
    _check_alternative(alternative)
    d = np.asarray(d, np.float64)
    if not np.all(np.isfinite(d)):
        raise ValueError("sign_flip_p: the differences must be finite")
    d = d[d != 0]
    if d.size > EXACT_PAIRS:
        raise ValueError(f"{d.size} non-zero differences: exact only up to {EXACT_PAIRS}")
    if d.size == 0:
        return 1.0
    s, tol, total = float(d.sum()), _tolerance(d), 2.0**d.size
    upper = lambda: _count_at_least(d, s - tol) / total  # P(S* >= s)
    lower = lambda: _count_at_least(-d, -s - tol) / total  # P(S* <= s)
    if alternative == "greater":
        return upper()
    if alternative == "less":
        return lower()
    return min(1.0, 2.0 * (_count_at_least(d, abs(s) - tol) / total))


def monte_carlo_p(
    draw: Callable[[np.random.Generator, int], np.ndarray],
    observed: float,
    alternative: str,
    *,
    level: float | None = None,
    draws: int = DRAWS,
    seed: int = SEED,
    tol: float = 0.0,
) -> dict[str, Any]:
    """A Monte Carlo p-value: ``draw(rng, N)`` gives N null statistics.  With ``level``,
    draws are added while p lies within 3 standard errors of it (module docstring).
    Returns ``{"p", "p_se", "draws"}``."""
    rng = np.random.default_rng(seed)
    hi = lo = 0
    total = 0
    batch = draws
    while True:
        null = draw(rng, batch)
        hi += int(np.sum(null >= observed - tol))
        lo += int(np.sum(null <= observed + tol))
        total += batch
        p_hi, p_lo = (1 + hi) / (1 + total), (1 + lo) / (1 + total)
        p = {"greater": p_hi, "less": p_lo}.get(alternative, min(1.0, 2 * min(p_hi, p_lo)))
        se = _standard_error(p, alternative, total)
        if level is None or abs(p - level) > 3 * se or total >= MAX_DRAWS:
            return {"p": p, "p_se": se, "draws": total}
        batch = min(9 * total, MAX_DRAWS - total)


def _standard_error(p: float, alternative: str, draws: int) -> float:
    """A Monte Carlo p's standard error: ``p (1 − p) / N`` one-sided; a two-sided p is twice
    a one-sided share, so its variance is ``p (2 − p) / N``."""
    var = p * (2.0 - p) if alternative == "two-sided" else p * (1.0 - p)
    return math.sqrt(max(var, 0.0) / draws)


def sign_flip_test(
    d: np.ndarray, alternative: str = "two-sided", *, level: float | None = None, seed=SEED
) -> dict[str, Any]:
    """The sign-flip test of ``d``: ``{"test", "p", "p_se", "p_min", "n", "exact"}`` (exact up
    to :data:`EXACT_PAIRS` non-zero differences, else Monte Carlo settled at ``level``)."""
    _check_alternative(alternative)
    d = np.asarray(d, np.float64)
    nonzero = d[d != 0]
    out = {"test": "paired sign-flip", "n": int(d.size)}
    out["p_min"] = smallest_p(nonzero.size, alternative)
    if nonzero.size <= EXACT_PAIRS:
        return {**out, "p": sign_flip_p(nonzero, alternative), "p_se": 0.0, "exact": True}
    draw = lambda rng, k: rng.choice((-1.0, 1.0), (k, nonzero.size)) @ nonzero
    mc = monte_carlo_p(
        draw, float(nonzero.sum()), alternative, level=level, seed=seed, tol=_tolerance(nonzero)
    )
    return {**out, **mc, "exact": False}


def permutation_test(
    x: np.ndarray,
    y: np.ndarray,
    alternative: str = "two-sided",
    *,
    level: float | None = None,
    seed: int = SEED,
) -> dict[str, Any]:
    """The permutation test of ``mean(x) − mean(y)`` for independent groups, by
    ``scipy.stats.permutation_test``: exact up to :data:`EXACT_SPLITS` splits, else Monte
    Carlo settled at ``level``.  ``{"test", "p", "p_se", "p_min", "n", "exact"}``."""
    from scipy import stats as sps

    _check_alternative(alternative)
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    splits = math.comb(x.size + y.size, x.size)
    p_min = (2.0 if alternative == "two-sided" else 1.0) / splits
    out = {"test": "permutation (independent seeds)", "n": int(min(x.size, y.size))}
    out["p_min"] = min(1.0, p_min)
    stat = lambda a, b, axis: np.mean(a, axis=axis) - np.mean(b, axis=axis)
    run = lambda n, s: sps.permutation_test(
        (x, y), stat, permutation_type="independent", vectorized=True, n_resamples=n,
        alternative=alternative, rng=np.random.default_rng(s),
    )  # fmt: skip
    if splits <= EXACT_SPLITS:
        return {**out, "p": float(run(np.inf, seed).pvalue), "p_se": 0.0, "exact": True}
    draws = DRAWS
    while True:
        p = float(run(draws, seed).pvalue)
        se = _standard_error(p, alternative, draws)
        if level is None or abs(p - level) > 3 * se or draws >= MAX_DRAWS:
            return {**out, "p": p, "p_se": se, "draws": draws, "exact": False}
        draws = min(10 * draws, MAX_DRAWS)


def difference_test(
    a: np.ndarray,
    b: np.ndarray,
    *,
    paired: bool,
    shift: float = 0.0,
    alternative: str = "two-sided",
    level: float | None = None,
    seed: int = SEED,
) -> dict[str, Any]:
    """The test of ``mean(a) − mean(b) = shift``: sign-flip on ``a − b − shift`` (paired) or
    the permutation test of ``a − shift`` against ``b`` (independent)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"paired seeds need one length; got {a.size} and {b.size}")
        return sign_flip_test(a - b - shift, alternative, level=level, seed=seed)
    return permutation_test(a - shift, b, alternative, level=level, seed=seed)


def ratio_test(
    x: np.ndarray,
    y: np.ndarray,
    c: float,
    *,
    paired: bool,
    alternative: str = "two-sided",
    level: float | None = None,
    seed: int = SEED,
) -> dict[str, Any]:
    """The test of ``mean(y) / mean(x) = c`` (x > 0): on ``y − c x`` (paired) or ``y``
    against ``c x`` (independent)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if paired:
        return sign_flip_test(y - c * x, alternative, level=level, seed=seed)
    return permutation_test(y, c * x, alternative, level=level, seed=seed)


def _invert(p_at: Callable[[float], float], alpha: float, est: float, far: float, iters: int):
    """The end, between ``est`` and ``far``, of the region where ``p_at(t) > alpha``
    (bisection; ``far`` itself when p stays above alpha there)."""
    if p_at(far) > alpha:
        return far
    inside, outside = est, far
    for _ in range(iters):
        mid = (inside + outside) / 2
        inside, outside = (mid, outside) if p_at(mid) > alpha else (inside, mid)
    return (inside + outside) / 2


def shift_interval(
    a: np.ndarray, b: np.ndarray, level: float, *, paired: bool, iters: int = 30
) -> dict[str, float]:
    """``mean(a) − mean(b)`` with the interval of the shifts the two-sided test does not
    reject at ``1 − level`` (±inf where no finite shift is rejected)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    est = float(a.mean() - b.mean())
    span = float(np.ptp(np.concatenate([a, b]))) + abs(est) + 1e-12
    alpha = 1.0 - level
    p_at = lambda s: difference_test(a, b, paired=paired, shift=s, seed=SEED)["p"]
    lo = _invert(p_at, alpha, est, est - 4 * span, iters)
    hi = _invert(p_at, alpha, est, est + 4 * span, iters)
    unbounded = lambda v, far: math.inf * np.sign(far - est) if v == far else v
    return {
        "estimate": est,
        "low": float(unbounded(lo, est - 4 * span)),
        "high": float(unbounded(hi, est + 4 * span)),
    }


def ratio_interval(
    x: np.ndarray, y: np.ndarray, level: float, *, paired: bool, iters: int = 30
) -> dict[str, float]:
    """``mean(y) / mean(x)`` (x, y > 0) with the interval of the ratios the two-sided test
    does not reject at ``1 − level``, found on the log scale (0 or inf where unbounded)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    est = float(np.log(y.mean() / x.mean()))
    # the ratios of subset sums the inversion can end at (a seed at time 0 counts as 0)
    pos = np.concatenate([x, y])
    pos = pos[pos > 0]
    span = float(np.log(pos.max() / pos.min()) + np.log(max(x.size, 2))) + 1.0
    alpha = 1.0 - level
    p_at = lambda t: ratio_test(x, y, math.exp(min(t, 700.0)), paired=paired, seed=SEED)["p"]
    lo = _invert(p_at, alpha, est, est - 4 * span, iters)
    hi = _invert(p_at, alpha, est, est + 4 * span, iters)
    return {
        "estimate": math.exp(est),
        "low": 0.0 if lo == est - 4 * span else math.exp(lo),
        "high": math.inf if hi == est + 4 * span else math.exp(hi),
    }


def tost(
    test_at: Callable[[float, str], dict[str, Any]], margin: tuple[float, float]
) -> dict[str, Any]:
    """Two one-sided tests of an equivalence ``margin = (low, high)``: ``test_at(value,
    alternative)`` tests the effect against ``value``; the effect lies above ``low``
    (``greater``) and below ``high`` (``less``).  ``{"p", "p_low", "p_high"}``, p the larger."""
    lo, hi = test_at(margin[0], "greater"), test_at(margin[1], "less")
    return {"p": max(lo["p"], hi["p"]), "p_low": lo["p"], "p_high": hi["p"]}
