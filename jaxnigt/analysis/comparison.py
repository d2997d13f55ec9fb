"""Deciding a claim from run directories: the reference against every baseline of a run.

:func:`compare` reads the per-seed statistics of every method of a :class:`Run`
(:mod:`jaxnigt.analysis.run_data`), pools their targets, and decides each reference-vs-baseline
comparison and the claim's verdict; ``jaxnigt compare`` writes its result as JSON and as the
Markdown of :func:`compare_markdown`.  The definitions it uses live one concept a module:

* :mod:`jaxnigt.analysis.stats` -- the per-seed statistics of a curve (average return, second half,
  time to target, median time) and the target rule;
* :mod:`jaxnigt.analysis.looks` -- one look: restricted times, the exact test, its interval;
* :mod:`jaxnigt.analysis.verdicts` -- bootstrap intervals (second views), a claim's verdict,
  lead growth;
* :mod:`jaxnigt.analysis.run_data` -- a finished run directory read into :class:`Method` records;
* :mod:`jaxnigt.analysis.report_text` -- the text and Markdown of the results.

``--statistic`` (:data:`STATISTICS`) names the effect the decision uses
(:mod:`jaxnigt.analysis.looks`): a return statistic (difference of means over seeds,
reference minus baseline) or a time to 50 % / 80 % of the improvement, compared by each
seed's *restricted time* ``min(T, B)`` (a seed that never reaches the target counts at the
budget B), on the log scale: the ratio of geometric-mean restricted times, baseline over
reference (restricted times are heavy-tailed; the log scale finds a true speed-up more
often, :mod:`jaxnigt.analysis.looks`); or the total worker time to that target
(``worker_time_to_50`` / ``worker_time_to_80``: what reaching it cost in computing), each
seed's restricted worker time ``min(W, W_final)`` compared in the same way (a seed that never
reaches the target counts at its final total worker time).  **The decision** is
an exact randomization test of a tie (:mod:`jaxnigt.analysis.randomization`): the paired
sign-flip test when both methods ran the same seeds (:func:`paired`), the permutation test
otherwise; a side is ahead when ``p <= 1 − level``, and the effect's interval is the test
inverted at the level, so it excludes the tie exactly then.  The smallest p the test can
give at the seeds run is reported beside p (``p_min``: 1/16 at 5 paired seeds).  Each
comparison also reports the ratio of median times (descriptive), the restricted means
(RMST) difference and a paired bootstrap interval of their ratio, the difference in average return
and the ratios of median times to every target (bootstrap second views).  The targets pool
every method of the run (grid point 0 of each algorithm), unless ``target`` fixes the
statistic's target from runs the comparison does not test; ``kaplan_meier`` holds each
method's curve of the share of seeds at the target against time (:mod:`.survival`).

The names the command line, ``jaxnigt sweep`` and :mod:`jaxnigt.run.metrics` use from the
analysis are importable from here too (:data:`__all__`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxnigt.analysis import looks, survival
from jaxnigt.analysis.report_text import compare_markdown
from jaxnigt.analysis.run_data import AnalysisError, Method, Run, UnfinishedRunError, load_run
from jaxnigt.analysis.stats import (
    COMPARE_STATISTICS,
    FRACTIONS,
    RETURN_STATISTICS,
    STATISTICS,
    average_return,
    first_time,
    fraction,
    improvement_over_spread,
    median_time,
    second_half,
    targets,
    time_axis,
)
from jaxnigt.analysis.verdicts import (
    BASELINE_AHEAD,
    CLAIMS,
    IDENTICAL,
    LEVEL,
    REFERENCE_AHEAD,
    REPS,
    SEED,
    TIE,
    bootstrap_interval,
    interval,
    mean_difference,
    needed_seeds,
    time_ratio,
    verdict,
)

__all__ = [
    "CLAIMS",
    "COMPARE_STATISTICS",
    "FRACTIONS",
    "RETURN_STATISTICS",
    "STATISTICS",
    "AnalysisError",
    "Method",
    "Run",
    "UnfinishedRunError",
    "average_return",
    "bootstrap_interval",
    "compare",
    "compare_markdown",
    "first_time",
    "load_run",
    "median_time",
    "targets",
]


def _statistic_values(m: Method, statistic: str, budget: float, tg: dict) -> np.ndarray:
    if statistic in RETURN_STATISTICS:
        return m.statistic(statistic, budget)
    return m.statistic(time_axis(statistic), budget, tg[fraction(statistic)])


def paired(ref: Method, other: Method) -> bool:
    """Whether two methods' seeds are compared as pairs: they ran the same seeds (seed s gives
    every method the same initial policy and evaluation keys), so a resample draws one set of
    seeds for both (:mod:`jaxnigt.analysis.verdicts`)."""
    return tuple(ref.seeds) == tuple(other.seeds)


def decided_outcome(one: dict, level: float, identical: bool = False) -> str:
    """A single look's outcome: identical runs; a side ahead when the exact test's p is at
    most ``1 − level`` (its sign from the estimate: the look's interval, the test inverted,
    then excludes the tie); otherwise :data:`TIE`."""
    if identical:
        return IDENTICAL
    if one["p"] <= 1.0 - level:
        tie = looks.tie_of(one["kind"])
        return REFERENCE_AHEAD if one["interval"]["estimate"] > tie else BASELINE_AHEAD
    return TIE


def _comparison(ref: Method, other: Method, budget: float, tg: dict, statistic: str, kw) -> dict:
    """One reference-vs-baseline row (see :func:`compare`)."""
    ratio = statistic not in RETURN_STATISTICS
    kw = {**kw, "paired": paired(ref, other)}
    x, y = (_statistic_values(m, statistic, budget, tg) for m in (ref, other))
    censor = None
    if ratio:  # where each side's seeds are censored: the budget, or their final worker time
        censor = tuple(m.censoring(time_axis(statistic), budget) for m in (ref, other))
    one = looks.look(
        looks.TIME if ratio else looks.RETURN, x, y,
        paired=kw["paired"], level=kw["level"], budget=budget, censor=censor,
    )  # fmt: skip
    effect = one["interval"]
    identical = ref.identical_to(other)
    row = {"effect": effect, "outcome": decided_outcome(one, kw["level"], identical)}
    row.update({k: v for k, v in one.items() if k not in ("interval", "kind", "margin")})
    row["paired"] = kw["paired"]
    row["needed_seeds"] = (
        needed_seeds(effect, len(ref.seeds), ratio=ratio) if row["outcome"] == TIE else None
    )
    row["identical"] = identical
    row["decided"] = row["outcome"] in (REFERENCE_AHEAD, BASELINE_AHEAD)
    avg = [m.statistic("average", budget) for m in (ref, other)]
    row["average_return_difference"] = interval(mean_difference, *avg, **kw)
    times = {f: [m.statistic("time", budget, t) for m in (ref, other)] for f, t in tg.items()}
    row["time_to_target_ratio"] = {str(f): interval(time_ratio, *v, **kw) for f, v in times.items()}
    return row


#: ``compare`` warns when a method's largest gap between two evaluations exceeds this
#: fraction of the statistic's own scale: the reference's median time to the target (a time
#: to target is rounded up to the next evaluation), or the window of a return statistic.
GAP_WARNING = 0.1


def largest_gap(m: Method) -> float:
    """The largest simulated time between two evaluations of one seed, over ``m``'s seeds."""
    gaps = [float(np.max(np.diff(np.sort(xs)))) for xs, _ in m.curves if len(xs) > 1]
    return max(gaps) if gaps else math.nan


def _gap_warnings(methods, reference, statistic, budget, tg) -> list[str]:
    """Where a method's evaluations are too far apart for ``statistic`` (:data:`GAP_WARNING`)."""
    if statistic in RETURN_STATISTICS:
        scale = budget if statistic == "average" else budget / 2
        what = f"the window of {statistic} ({scale:g})"
    else:  # a worker-time statistic's evaluations too are apart in simulated time
        f = fraction(statistic)
        scale = float(median_time(methods[reference].statistic("time", budget, tg[f])))
        what = f"{reference}'s median time_to_{round(100 * f)} ({scale:.4g})"
    if not math.isfinite(scale):
        return []
    out = []
    for a, m in methods.items():
        g = largest_gap(m)
        if g > GAP_WARNING * scale:
            out.append(
                f"{a}'s evaluations are up to {g:.4g} apart, more than {GAP_WARNING:.0%} of "
                f"{what}: its {statistic} is resolved only to that gap (evaluate more often: "
                "eval.every_time)"
            )
    return out


def kaplan_meier_curves(methods: dict[str, Method], budget: float, tg: dict, statistic: str):
    """``{"fraction", "target", "curves": {method: curve}}``: each method's Kaplan–Meier
    curve (:func:`jaxnigt.analysis.survival.kaplan_meier`) of the times to the statistic's
    target (80 % for a return statistic); None when that target is NaN (no improvement)."""
    f = fraction(statistic) if statistic not in RETURN_STATISTICS else 0.8
    t = tg.get(f)
    if t is None or not math.isfinite(t):
        return None
    curves = {
        a: survival.kaplan_meier(m.statistic("time", budget, t), budget) for a, m in methods.items()
    }
    return {"fraction": f, "target": t, "curves": curves}


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _method_summary(m: Method, budget: float, tg: dict) -> dict[str, Any]:
    out = {
        "seeds": len(m.seeds),
        "largest_eval_gap": _finite(largest_gap(m)),
        "average_return_median": float(np.median(m.statistic("average", budget))),
        "second_half_median": float(np.median(m.statistic("second_half", budget))),
        "updates_median": float(np.median(m.updates)),
        "env_steps_median": float(np.median(m.env_steps)),
        "time_to_target": {  # None: no majority of the seeds reached it within the budget
            str(f): _finite(median_time(m.statistic("time", budget, t))) for f, t in tg.items()
        },
        "diverged_seeds": list(m.diverged),
    }
    if m.worker_times is not None:  # the total worker time, where the run recorded it
        out["final_worker_time_median"] = float(np.median(m.final_worker_time))
        out["worker_time_to_target"] = {  # None: no majority reached it (as time_to_target)
            str(f): _finite(median_time(m.statistic("worker_time", budget, t)))
            for f, t in tg.items()
        }
    for t, cs in m.per_type.items():
        out[t] = float(np.median([second_half(x, y, budget) for x, y in cs]))
    return out


def _check_compare(run: Run, reference: str, statistic: str, baselines) -> tuple[dict, list]:
    if statistic not in COMPARE_STATISTICS:
        raise AnalysisError(
            f"got {statistic!r}; expected one of {COMPARE_STATISTICS}", param="statistic"
        )
    methods = run.algorithms()
    if reference not in methods:
        raise AnalysisError(
            f"{reference!r} is not in {str(run.path)!r} (it has {', '.join(methods)})",
            param="reference",
        )
    baselines = [a for a in methods if a != reference] if baselines is None else list(baselines)
    unknown = [b for b in baselines if b not in methods or b == reference]
    if unknown or not baselines:
        raise AnalysisError(
            f"{unknown or 'none'} to compare {reference} with in {str(run.path)!r} "
            f"(it has {', '.join(methods)})",
            param="baselines",
        )
    return methods, baselines


def pooled_targets(methods: dict[str, Method], budget: float, fractions):
    """``(initial returns, second-half levels, targets)`` pooled over every method."""
    initial = np.concatenate([m.initial() for m in methods.values()])
    levels = {a: m.statistic("second_half", budget) for a, m in methods.items()}
    tg = targets(initial, [float(np.median(v)) for v in levels.values()], fractions)
    return initial, levels, tg


def _targets(methods, budget: float, fractions, statistic: str, target: float | None):
    """:func:`pooled_targets` over ``fractions`` and the statistic's own, that one replaced
    by ``target`` when it is fixed in advance."""
    if statistic not in RETURN_STATISTICS:
        fractions = sorted({*fractions, fraction(statistic)})
    initial, levels, tg = pooled_targets(methods, budget, fractions)
    if target is not None:
        if statistic in RETURN_STATISTICS:
            raise AnalysisError("a target is for a time statistic", param="target")
        tg = {**tg, fraction(statistic): float(target)}
    return initial, levels, tg


def _pool(initial: np.ndarray, levels: dict, tg: dict) -> dict[str, Any]:
    """The pooled start, best level, their ratio to the seeds' spread, and the targets."""
    return {
        "initial_median_return": float(np.nanmedian(initial)),
        "best_second_half_median": max(float(np.median(v)) for v in levels.values()),
        "improvement_over_spread": improvement_over_spread(initial, levels),
        "targets": {str(f): t for f, t in tg.items()},
    }


def compare(
    run: Run,
    reference: str,
    *,
    statistic: str = "average",
    baselines: Sequence[str] | None = None,
    claim: str = "ahead",
    fractions: Sequence[float] = FRACTIONS,
    level: float = LEVEL,
    reps: int = REPS,
    seed: int = SEED,
    target: float | None = None,
) -> dict[str, Any]:
    """The reference against every baseline of a run (grid point 0 of each algorithm).

    Per baseline: the exact test of ``statistic`` (module docstring), its effect, inverted
    interval and outcome, and second views; then the claim's :func:`verdict`.  Targets pool
    every method (:func:`targets`) unless ``target`` fixes one; the same seeds are paired
    (:func:`paired`); ``warnings`` name methods evaluated too sparsely (:data:`GAP_WARNING`).

    Args:
      run, reference: a finished run (:func:`load_run`), the claim's method; statistic: one
        of :data:`~jaxnigt.analysis.stats.COMPARE_STATISTICS` (a worker-time one needs a
        run that recorded ``worker_time``); baselines: default every other method.
      claim: ``ahead`` or ``tie``; fractions: of the improvement, the times reported;
      level: a side is ahead when p <= 1 − level; reps, seed: the second views' bootstrap.
      target: a time statistic's target fixed in advance (e.g. from tuning seeds).

    Returns:
      A JSON-able dict: targets, methods, comparisons (effect, interval, outcome), verdict.

    Raises:
      AnalysisError: a bad ``statistic``, the ``reference`` or a baseline is not in the run,
        or no baseline is left (its ``param`` names which).
    """
    methods, baselines = _check_compare(run, reference, statistic, baselines)
    budget = run.budget
    initial, levels, tg = _targets(methods, budget, fractions, statistic, target)
    kw = {"level": level, "reps": reps, "seed": seed}
    ref = methods[reference]
    rows = {b: _comparison(ref, methods[b], budget, tg, statistic, kw) for b in baselines}
    decision = verdict(list(rows.values()), claim)
    return {
        "run": str(run.path),
        "reference": reference,
        "statistic": statistic,
        "claim": claim,
        "budget": budget,
        "level": level,
        "reps": reps,
        "seed": seed,
        **_pool(initial, levels, tg),
        "algorithms": {a: _method_summary(m, budget, tg) for a, m in methods.items()},
        "target_fixed": target is not None,
        "kaplan_meier": kaplan_meier_curves(methods, budget, tg, statistic),
        "comparisons": rows,
        "verdict": decision["verdict"],
        "needed_seeds": decision["needed_seeds"],
        "paired": {b: row["paired"] for b, row in rows.items()},
        "warnings": _gap_warnings(methods, reference, statistic, budget, tg),
    }
