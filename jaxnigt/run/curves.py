"""A seed's time to a target and the method's over its seeds: what a run's summary reports.

Pure functions of numpy arrays, importing nothing of jaxnigt.  The run's summary
(:func:`jaxnigt.run.metrics.summarize`) reports its time to a target with them, and the
analysis of finished runs (:mod:`jaxnigt.analysis.stats`, which names them among its
statistics of curves and defines the rest) uses these same definitions: each is written once,
here, below both.

A seed's evaluations ``(t_j, R_j)`` are a step function of simulated time.  Its time to a
target is its first evaluation time at or above the target within the budget, ``inf``
(*censored*) when it has none, so a seed that never gets there still counts; a method's time
is the upper median of its seeds' times.
"""

from __future__ import annotations

import math

import numpy as np


def first_time(xs: np.ndarray, ys: np.ndarray, target: float, budget: float = math.inf) -> float:
    """One seed's time to ``target``: the first ``x <= budget`` with ``y >= target``.

    Args:
      xs: the seed's evaluation times.
      ys: its evaluation returns, one per time.
      target: the return to reach.
      budget: the last time that counts (default: none).

    Returns:
      The smallest such ``x``; ``inf`` (censored) when the target is not reached within the
      budget.
    """
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    hit = np.nonzero((ys >= target) & (xs <= budget))[0]
    return float(np.min(xs[hit])) if hit.size else math.inf


def median_time(times: np.ndarray) -> float:
    """The upper median of per-seed times: the first time by which more than half the seeds
    have reached the target.

    Args:
      times: ``[..., seeds]`` per-seed times (``inf`` = censored).

    Returns:
      ``[...]``: the element of rank ``seeds // 2`` of each row in increasing order (the
      median for an odd number of seeds); ``inf`` when no majority reached the target.
    """
    times = np.sort(np.asarray(times, np.float64), axis=-1)
    return times[..., times.shape[-1] // 2]
