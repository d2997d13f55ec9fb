"""The sequential rule's error rate and power (:mod:`jaxnigt.analysis.sequential`), checked on
per-seed values whose law is known.

* :func:`simulate`: synthetic comparisons in a :class:`Regime` (:data:`REGIMES`: independent
  or paired seeds, light or heavy tails, censored times on an evaluation grid), under the null
  and under a known effect;
* :func:`split_null`: nulls built from one method's real per-seed values, split at random
  into two pseudo-methods of one law.

``python -m jaxnigt.analysis.error_rate [--experiments N | --suite]`` prints the simulation
as JSON lines.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxnigt.analysis.run_data import AnalysisError
from jaxnigt.analysis.sequential import (
    ALPHA,
    STAGES,
    TIME_MARGIN,
    difference_interval,
    paired_t_interval,
    run_rule,
)
from jaxnigt.analysis.verdicts import (
    BASELINE_AHEAD,
    REFERENCE_AHEAD,
    REPS,
    interval,
    time_ratio,
)


class Regime(NamedTuple):
    """Synthetic per-seed values for :func:`simulate`.

    Attributes:
      sigma: the spread: log-times ``N(0, sigma²)`` (a ratio of times), returns
        ``N(0, sigma²)`` (a difference).
      rho: the correlation of a seed's values across the two methods (paired data; 0:
        independent draws, still resampled as pairs when ``rho > 0``).
      censored: the share of the baseline's seeds that never reach the target within the
        budget (times only; their time is ``inf``).
      grid: times are rounded up to multiples of this share of the budget (evaluations on a
        grid: ties), or not at all (0).
    """

    sigma: float
    rho: float = 0.0
    censored: float = 0.0
    grid: float = 0.0


#: The regimes the rule is checked in: the original one (lognormal times of spread 0.5, or
#: normal returns, independent), and heavy-tailed, paired, censored times on an evaluation
#: grid as reacher's and the n = 100 scenarios' are (log-time spread 1.0–1.3, up to 23 of 40
#: seeds never reaching the target).
REGIMES = {
    "time": {
        "plain": Regime(sigma=0.5),
        "paired_censored": Regime(sigma=1.3, rho=0.5, censored=0.3, grid=0.02),
        "mostly_censored": Regime(sigma=1.3, rho=0.5, censored=0.6, grid=0.02),
    },
    "average": {"plain": Regime(sigma=1.0), "paired": Regime(sigma=1.0, rho=0.5)},
}


def _draw(rng, regime: Regime, effect: float, n: int, ratio: bool):
    """One synthetic experiment's ``(reference, baseline)`` per-seed values."""
    if regime.rho:
        common, own = rng.normal(size=n), rng.normal(size=(2, n))
        z = regime.sigma * (np.sqrt(regime.rho) * common + np.sqrt(1 - regime.rho) * own)
    else:
        z = rng.normal(0.0, regime.sigma, size=(2, n))
    if not ratio:
        return z[0] + effect, z[1]
    times = np.exp(z - np.array([[effect], [0.0]]))
    if regime.censored:
        from scipy import stats as sps

        budget = float(np.exp(regime.sigma * sps.norm.ppf(1 - regime.censored)))
        if regime.grid:
            step = regime.grid * budget
            times = np.ceil(times / step) * step
        times = np.where(times > budget, np.inf, times)
    return times[0], times[1]


def simulate(
    experiments: int,
    *,
    effect: float = 0.0,
    statistic: str = "average",
    regime: Regime | str = "plain",
    stages: Sequence[int] = STAGES,
    alpha: float = ALPHA,
    reps: int = 400,
    seed: int = 0,
) -> dict[str, Any]:
    """The rule on ``experiments`` synthetic comparisons: per-seed values of both methods
    drawn in ``regime`` (:class:`Regime`, or a name of :data:`REGIMES` of the statistic's
    kind: ``plain`` is lognormal times of spread 0.5, or N(0, 1) returns), the reference's
    shifted by ``effect`` (a difference; for times a factor e^{-effect}).  Paired regimes
    (``rho > 0``) are resampled as pairs (a difference: the paired t interval), as
    :func:`jaxnigt.analysis.compare` does for methods that ran the same seeds.  Returns the
    fraction of each outcome and of "either side ahead" (the error rate when ``effect`` is
    0, the power otherwise), with its Monte Carlo standard error.

    Args:
      experiments: synthetic comparisons to run.
      effect: the reference's shift (0: the null).
      statistic: ``average`` (a difference of means) or another (a ratio of median times).
      regime: the per-seed values' law.
      stages, alpha: the rule's.
      reps: bootstrap resamples per look (ratios of times).
      seed: the generator's seed.

    Returns:
      A JSON-able dict of the fractions of each outcome.
    """
    ratio = statistic != "average"
    name = regime if isinstance(regime, str) else None
    regime = REGIMES["time" if ratio else "average"][regime] if name else regime
    rng = np.random.default_rng(seed)
    paired = regime.rho > 0
    n = max(stages)
    margin = TIME_MARGIN if ratio else (-0.1, 0.1)
    test = functools.partial(difference_interval, paired=paired)
    counts: dict[str, int] = {}
    for e in range(experiments):
        ref, other = _draw(rng, regime, effect, n, ratio)
        at = _interval_at(ref, other, ratio=ratio, paired=paired, reps=reps, seed=e, test=test)
        _tally(counts, at, margin, ratio, stages=stages, alpha=alpha)
    return {
        "experiments": experiments,
        "effect": effect,
        "statistic": statistic,
        "regime": name or regime._asdict(),
        "stages": list(stages),
        "alpha": alpha,
        "reps": reps,
        **_rates(counts, experiments),
    }


def _interval_at(a, b, *, ratio: bool, paired: bool, reps: int, seed: int, test):
    """One experiment's ``interval_at(k, level)`` for :func:`run_rule` on the per-seed values
    ``a`` (the reference's) and ``b``: a ratio of median times by the percentile bootstrap
    (``reps`` resamples, ``seed``), or a difference of means by ``test(a, b, level)``."""
    if ratio:
        return lambda k, lv: interval(
            time_ratio, a[:k], b[:k], tie=1.0, level=lv, reps=reps, seed=seed, paired=paired
        )
    return lambda k, lv: test(a[:k], b[:k], lv)


def _tally(counts: dict[str, int], at, margin, ratio: bool, **rule) -> None:
    """Runs the rule on one experiment (``rule``: :func:`run_rule`'s stages, alpha and
    available) and counts its outcome."""
    o = run_rule(at, lambda k: margin, tie=1.0 if ratio else 0.0, **rule)
    counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1


def _rates(counts: dict[str, int], experiments: int) -> dict[str, Any]:
    decided = (counts.get(REFERENCE_AHEAD, 0) + counts.get(BASELINE_AHEAD, 0)) / experiments
    return {
        "fractions": {k: v / experiments for k, v in sorted(counts.items())},
        "ahead_either_side": decided,
        "monte_carlo_se": float(np.sqrt(decided * (1 - decided) / experiments)),
    }


def split_null(
    values: np.ndarray,
    *,
    ratio: bool,
    stages: Sequence[int] = STAGES,
    margin: tuple[float, float] = TIME_MARGIN,
    experiments: int = 1000,
    alpha: float = ALPHA,
    reps: int = REPS,
    seed: int = 0,
) -> dict[str, Any]:
    """The rule under a null built from real per-seed values: each experiment splits one
    method's seeds at random into two halves, two pseudo-methods with one law, and runs the
    rule on them (looks at the ``stages`` up to half the seeds, each at the level of all the
    ``stages``; halves resampled as pairs, as the same seeds of two methods are).  A real
    comparison's censoring, ties on the evaluation grid and heavy tails are all in the
    values.  Returns the fraction of each outcome and of "either side ahead" (the rule's
    error rate on these values), with its Monte Carlo standard error.

    Args:
      values: one method's per-seed statistic (times to a target, ``inf`` = never; or
        returns).
      ratio: a ratio of median times (else a difference of means).
      stages, margin, alpha: the rule's (the scenario's planned stages and its margin).
      experiments, reps, seed: the splits, bootstrap resamples per look, generator seed.

    Returns:
      A JSON-able dict of the fractions of each outcome.
    """
    values = np.asarray(values, np.float64)
    half = len(values) // 2
    if half < stages[0]:
        raise AnalysisError(f"{len(values)} seeds: halves of {half} are below the first look")
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    for e in range(experiments):
        perm = rng.permutation(len(values))
        a, b = values[perm[:half]], values[perm[half : 2 * half]]
        at = _interval_at(a, b, ratio=ratio, paired=True, reps=reps, seed=e, test=paired_t_interval)
        _tally(counts, at, margin, ratio, stages=stages, alpha=alpha, available=half)
    looks = [k for k in stages if k <= half]
    return {
        "experiments": experiments,
        "seeds": len(values),
        "looks": looks,
        "stages": list(stages),
        "alpha": alpha,
        "reps": reps,
        "seed": seed,
        "never_reached": int(np.sum(np.isinf(values))) if ratio else None,
        **_rates(counts, experiments),
    }


#: The known effects the simulation checks the rule's power on, per statistic: 0.8 standard
#: deviations of a return difference, a time factor e^0.4 ≈ 1.5.
EFFECTS = {"average": 0.8, "time": 0.4}
#: The test suite's smaller check: ``(experiments, seed)`` under the null and under each
#: effect, and the bootstrap resamples per look.
SUITE = {"null": (300, 0), "effect": (100, 1), "reps": 200}


def main(argv=None) -> int:
    """``python -m jaxnigt.analysis.error_rate [--experiments N | --suite]``: :func:`simulate`
    under the null and under a known effect, for both kinds of statistic in each of their
    :data:`REGIMES`, as JSON lines."""
    import argparse
    import json

    p = argparse.ArgumentParser(description=main.__doc__.split(":")[0])
    p.add_argument("--experiments", type=int, default=None, help="default 2000")
    p.add_argument("--reps", type=int, default=None, help="bootstrap resamples per look (400)")
    p.add_argument(
        "--suite",
        action="store_true",
        help="the test suite's sizes instead: 300 experiments under the null (seed 0), 100 "
        "under each effect (seed 1), 200 resamples",
    )
    args = p.parse_args(argv)
    if args.suite and (args.experiments is not None or args.reps is not None):
        p.error("--suite sets the experiments and resamples itself: give them or --suite")
    for statistic in EFFECTS:
        for regime in REGIMES["time" if statistic == "time" else "average"]:
            for effect in (0.0, EFFECTS[statistic]):
                if args.suite:
                    n, seed = SUITE["null" if effect == 0 else "effect"]
                    reps = SUITE["reps"]
                else:
                    n, seed, reps = args.experiments or 2000, 0, args.reps or 400
                r = simulate(
                    n, statistic=statistic, effect=effect, regime=regime, reps=reps, seed=seed
                )
                print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
