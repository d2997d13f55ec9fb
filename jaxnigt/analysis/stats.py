"""The per-seed statistics of evaluation curves and the target rule: one definition of each.

Pure functions of numpy arrays.  :mod:`jaxnigt.analysis` (``jaxnigt compare``),
:mod:`jaxnigt.studies.tuning`, ``jaxnigt sweep``'s table and the results pipeline
(``scripts/paper``) use these definitions and no others.  The two that a run's own summary
reports, a seed's time to a target (:func:`first_time`) and the method's over its seeds
(:func:`median_time`), are defined below the run, in :mod:`jaxnigt.run.curves`, and named
here: the training loop imports nothing of the analysis.

**Curves.** A seed's evaluations ``(t_j, R_j)`` (simulated time, evaluation return) are a
step function of simulated time: ``R_j`` holds from ``t_j`` until the next evaluation.  The
budget ``B`` is the config's simulated-time budget; every method's last update is the first
one past ``B``, so its last evaluation may lie past ``B``: it is ignored (outside the window).

**Per-seed statistics.**

* *average return*: the time average of the step function over ``[0, B]`` (the area under
  the curve / B: rewards both speed and level; needs an evaluation at time 0, which every
  run has);
* *second half*: its time average over ``[B/2, B]`` (the level a method holds);
* *time to target*: the first evaluation time ``t_j <= B`` with ``R_j >= target``; a seed
  that does not reach the target by ``B`` is *censored* at the budget: its time is
  ``+inf`` ("later than B"), so it still counts (it is never dropped) and every median or
  quantile of the times stays exact (a seed's *updates* are counted by
  :mod:`jaxnigt.analysis.run_data`).

**Target rule** (:func:`targets`).  ``target(f) = R0 + f (R_best − R0)`` with ``R0`` the
median over every seed of every method in the pool of the return at time 0 (the common
initial policy) and ``R_best`` the best, over the methods in the pool, of the median over
seeds of the second-half statistic (the best level reached, not a single noisy evaluation).
The pool is every method of the run directory (grid point 0), or of every point of a sweep
so that the points share their targets.  With no improvement (R_best <= R0) the targets are
NaN: never reached.  A method's time to target is the *upper median*
over its seeds of the per-seed times (:func:`median_time`): the first time by which more
than half of the seeds have reached the target (the median for an odd number of seeds);
``inf`` when no majority reaches it within the budget.

**Time statistics by name.** ``time_to_50`` / ``time_to_80`` (:data:`TIME_STATISTICS`): the
time to the target of that fraction (:func:`fraction`).  Compared between methods by the
ratio of median times (:mod:`jaxnigt.analysis.verdicts`); scored in tuning, on two or three seeds,
by the *restricted mean time* (:func:`restricted_mean_time`): the mean over seeds of
``min(time, B)``, a censored seed counting as the budget (the restricted mean survival time of
survival analysis: unlike a median of two seeds it still ranks a point that one seed of two
brings to the target).

**Worker time to a target** (``worker_time_to_50`` / ``worker_time_to_80``,
:data:`WORKER_TIME_STATISTICS`; ``jaxnigt compare`` only): the same first evaluation at or
above the target within the budget (in simulated time), measured in *total worker time*
(``metrics.csv``'s ``worker_time``: the sum over workers of their computing time by then) --
what reaching the target cost in computing, beside how long it took.  A seed that does not
reach it by ``B`` is censored at its *final* total worker time (its last step's): its
restricted value is ``min(W, W_final)`` as a time's is ``min(T, B)``.  The time axis a
statistic measures on is :func:`time_axis`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

# Defined below the run, which reports a time to a target in its summary; named here with
# the rest of the statistics (``stats.first_time``), hence the explicit re-exports.
from jaxnigt.run.curves import first_time as first_time
from jaxnigt.run.curves import median_time as median_time

FRACTIONS = (0.5, 0.8)
#: The return statistics by name (``Method.statistic`` of :mod:`jaxnigt.analysis.run_data`): the
#: average return over ``[0, B]`` and the second-half return over ``[B/2, B]``.
RETURN_STATISTICS = ("average", "second_half")
#: The time statistics by name: the time to the target of each fraction of :data:`FRACTIONS`.
TIME_STATISTICS = tuple(f"time_to_{round(100 * f)}" for f in FRACTIONS)
#: Every statistic by name: what ``jaxnigt compare --statistic`` and ``jaxnigt tune
#: --statistic`` take (a difference of means for the return statistics, a ratio of median
#: times for the time statistics).
STATISTICS = RETURN_STATISTICS + TIME_STATISTICS
#: The total worker time to the target of each fraction (a time on another axis; the module
#: docstring), which ``jaxnigt compare`` decides on too.
WORKER_TIME_STATISTICS = tuple(f"worker_{s}" for s in TIME_STATISTICS)
#: What ``jaxnigt compare --statistic`` takes: :data:`STATISTICS` and the worker times.
COMPARE_STATISTICS = STATISTICS + WORKER_TIME_STATISTICS

Curve = tuple[np.ndarray, np.ndarray]  # (times, returns) of one seed's evaluations


def time_average(xs: np.ndarray, ys: np.ndarray, start: float, end: float) -> float:
    """Time average over ``[start, end]`` of the step function through ``(xs, ys)``.

    Each value holds from its ``x`` until the next one; values at or past ``end`` are
    ignored.  NaN when the curve has no value at ``start`` (its first ``x`` is later) or the
    window is empty.

    Example: ``xs = [0, 2, 5, 20]``, ``ys = [1, 3, -1, 100]`` over ``[0, 10]`` is
    ``(2·1 + 3·3 + 5·(−1)) / 10 = 0.6``.
    """
    order = np.argsort(xs, kind="stable")
    xs, ys = np.asarray(xs, np.float64)[order], np.asarray(ys, np.float64)[order]
    if not end > start or xs.size == 0 or xs[0] > start:
        return float("nan")
    keep = xs < end
    xs, ys = xs[keep], ys[keep]
    lo = np.maximum(xs, start)
    hi = np.minimum(np.append(xs[1:], end), end)
    widths = np.clip(hi - lo, 0.0, None)
    return float(np.sum(widths * ys) / (end - start))


def average_return(xs: np.ndarray, ys: np.ndarray, budget: float) -> float:
    """The *average return* of one seed: :func:`time_average` over ``[0, budget]``."""
    return time_average(xs, ys, 0.0, budget)


def second_half(xs: np.ndarray, ys: np.ndarray, budget: float) -> float:
    """The *second-half* statistic of one seed: :func:`time_average` over ``[B/2, B]``."""
    return time_average(xs, ys, budget / 2, budget)


def restricted_mean_time(times: np.ndarray, budget: float) -> float:
    """The mean over seeds of ``min(time, budget)`` (``inf`` = censored counts as the budget)."""
    return float(np.mean(np.minimum(np.asarray(times, np.float64), budget)))


def fraction(statistic: str) -> float:
    """The target fraction of a time statistic: ``time_to_80`` (or ``worker_time_to_80``)
    -> 0.8.

    Raises:
      ValueError: not a time statistic.
    """
    timed = (*TIME_STATISTICS, *WORKER_TIME_STATISTICS)
    if statistic not in timed:
        raise ValueError(f"got {statistic!r}; expected one of {timed}")
    return int(statistic.rsplit("_", 1)[1]) / 100


def time_axis(statistic: str) -> str:
    """What a time statistic measures the time to its target in.

    Args:
      statistic: one of :data:`TIME_STATISTICS` or :data:`WORKER_TIME_STATISTICS`.

    Returns:
      ``time`` (simulated time) or ``worker_time`` (the total worker time): the name of the
      per-seed statistic of :meth:`jaxnigt.analysis.run_data.Method.statistic`.

    Raises:
      ValueError: not a time statistic.
    """
    fraction(statistic)  # a time statistic, or ValueError
    return "worker_time" if statistic in WORKER_TIME_STATISTICS else "time"


def targets(
    initial: np.ndarray, levels: Sequence[float], fractions: Sequence[float] = FRACTIONS
) -> dict[float, float]:
    """``{f: R0 + f (R_best − R0)}`` (the module's target rule).

    Args:
      initial: the pool's returns at time 0, every seed of every method (NaN ignored).
      levels: per method of the pool, the median over its seeds of the second-half statistic.
      fractions: the fractions f of the improvement.

    Returns NaN targets (never reached) when R_best <= R0: there is no improvement.
    """
    r0 = float(np.nanmedian(np.asarray(initial, np.float64)))
    best = float(np.max(levels))
    if not best > r0:  # no improvement to take a fraction of: no target is meaningful
        return {f: math.nan for f in fractions}
    return {f: r0 + f * (best - r0) for f in fractions}


def no_target_reason(r0: float, best: float) -> str | None:
    """Why the targets of :func:`targets` are NaN (None when they are not): one line."""
    if best > r0:
        return None
    return (
        f"no method improved on its start: the best second-half median return ({best:.4g}) "
        f"is not above the initial median ({r0:.4g}), so the targets (fractions of the "
        "improvement) are NaN and no time to a target exists; run longer, or evaluate more "
        "often (eval.every_time)"
    )


def improvement_over_spread(initial: np.ndarray, levels: Mapping[str, np.ndarray]) -> float:
    """(R_best − R0) / the seed spread: the median over methods of the 20 %–80 % range of the
    per-seed second-half statistic (``levels``: method -> per-seed values).  Well above 1:
    the curves have left the initial band."""
    r0 = float(np.nanmedian(np.asarray(initial, np.float64)))
    best = max(float(np.median(v)) for v in levels.values())
    spread = float(np.median([np.subtract(*np.quantile(v, [0.8, 0.2])) for v in levels.values()]))
    return (best - r0) / spread if spread > 0 else math.inf
