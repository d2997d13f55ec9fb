"""Scoring the tuning's programs: each grid point's score from its run directory, the pooled
target of a time statistic, and how fast the chosen points reach it.
:mod:`jaxnigt.studies.tuning` describes the protocol."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxnigt.analysis import run_data, stats
from jaxnigt.studies.grid import TuningError


def score_run(
    run_dir: Path, statistic: str, exps, etas, shapes: Mapping[str, Any], target=None
) -> list[dict]:
    """Every grid point of one finished tuning program, scored (the module's score); each
    point carries the program's ``shapes`` values (``{name: value}``), the program's directory
    name (``program``, under ``DIR/runs``) and its ``summary.json`` key (``method``).  A time
    statistic needs its ``target`` (:func:`pooled_target`); its points carry the average
    return as ``secondary`` (the tie rule) and the per-seed times (``inf``: not reached)."""
    run = run_data.load_run(run_dir)
    timed = statistic in stats.TIME_STATISTICS
    if timed and target is None:
        raise TuningError(f"{statistic} needs a target", param="statistic")
    points = []
    for m in run.methods.values():
        # metrics hold float32 values: report the requested grid values
        e = min(exps, key=lambda x: abs(2.0**x - m.learning_rate))
        eta = min(etas, key=lambda x: abs(x - m.eta))
        point = {
            "lr_exp": int(e),
            "learning_rate": 2.0**e,
            "eta": float(eta),
            **shapes,
            "program": Path(run_dir).name,
            "method": m.name,
        }
        if timed:
            values = m.statistic("time", run.budget, target)
            score = -stats.restricted_mean_time(values, run.budget)
            secondary = float(np.mean(m.statistic("average", run.budget)))
            point["secondary"] = secondary if math.isfinite(secondary) else -math.inf
        else:
            values = m.statistic(statistic, run.budget)
            score = float(np.mean(values))
        point.update(
            score=score if math.isfinite(score) else math.nan,
            seed_values=[float(v) for v in values],
            diverged_seeds=list(m.diverged),
        )
        points.append(point)
    return sorted(points, key=lambda p: (p["lr_exp"], p["eta"]))


def pooled_target(run_dirs: Sequence[Path], fraction: float) -> dict[str, Any]:
    """The target of a time statistic (the module's rule) on the pool of every grid point of
    the finished programs ``run_dirs``: ``{"fraction", "value", "R0", "R_best", "pool"}``
    (``value`` NaN: no point improved on the initial return)."""
    initial, levels = [], []
    for run_dir in run_dirs:
        run = run_data.load_run(run_dir)
        for m in run.methods.values():
            initial.append(m.initial())
            levels.append(float(np.nanmedian(m.statistic("second_half", run.budget))))
    initial = np.concatenate(initial)
    value = stats.targets(initial, levels, (fraction,))[fraction]
    return {
        "fraction": fraction,
        "value": value,
        "R0": float(np.nanmedian(initial)),
        "R_best": float(np.nanmax(levels)),
        "pool": [str(d) for d in run_dirs],
    }


def speed(report: Mapping[str, Any], out: Path, fraction: float = 0.8) -> dict[str, Any]:
    """How fast each winner is on the tuning seeds: the per-seed times of every algorithm's
    chosen point to the target of ``fraction`` (the target rule on the pool of every program
    the tuning ran, extensions included; ``inf``: not reached within the budget), and the
    slowest winner's upper median.  What a report budget has to leave room for: every method
    should reach the target in most seeds (docs/results.md, "Budgets and evaluations").
    ``levels``: each winner's per-seed second-half return, to tell a winner that holds the
    target from one whose noisy evaluations only touch it.  ``out``: the tuning directory."""
    names = sorted({p["program"] for r in report["algorithms"].values() for p in r["points"]})
    target = pooled_target([Path(out) / "runs" / name for name in names], fraction)
    times, levels = {}, {}
    for a, r in report["algorithms"].items():
        best = r["chosen"]
        if best is not None:
            run = run_data.load_run(Path(out) / "runs" / best["program"])
            method = run.methods[best["method"]]
            values = method.statistic("time", run.budget, target["value"])
            times[a] = [float(t) for t in values]
            levels[a] = [float(v) for v in method.statistic("second_half", run.budget)]
    medians = [float(stats.median_time(np.asarray(t))) for t in times.values()]
    return {
        "target": target,
        "times": times,
        "levels": levels,
        "slowest_median": max(medians, default=math.nan),
    }
