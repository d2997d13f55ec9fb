"""How a third-edition scenario's report budget and evaluation cadence come from its look.

The look tunes every method at a generous budget; its ``speed`` record (the winners' per-seed
times to the look's 80 % target, pooled over every program of the look, and their
second-half returns) sizes the rest: :func:`budget_for` is about :data:`BUDGET_FACTOR` times
the slowest winner's upper median time, rounded up to a round number and at most the look's
budget; :func:`cadence` gives at least :data:`MIN_EVALS` evaluations per budget and
:data:`BEFORE_TARGET` before the fastest winner's median time.  :func:`check_look` refuses a
look in which no winner holds the target (its times would measure noise).
"""

from __future__ import annotations

import math

import numpy as np

from jaxnigt.analysis import stats

LOOK_EVALS = 64  # evaluations over a look's budget
MIN_EVALS = 100  # evaluations per report budget, at least
BEFORE_TARGET = 20  # evaluations before the fastest winner's median time to the target, at least
BUDGET_FACTOR = 2.0  # the budget: about this many times the slowest winner's median time


def rule() -> str:
    """The sizing rule in words, as ``sizing.json`` records it."""
    return (
        f"budget = round_up({BUDGET_FACTOR:g} x slowest median time to the look's 80 % target), "
        f"at most the look's; every_time = round_down(min(budget / {MIN_EVALS}, fastest median"
        f" / {BEFORE_TARGET}))"
    )


def round_up(x: float) -> float:
    """The smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 (× 10^k) that is ≥ ``x`` > 0."""
    k = math.floor(math.log10(x))
    for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * 10**k >= x * (1 - 1e-12):
            return float(m * 10**k)
    raise AssertionError(x)  # pragma: no cover (10 · 10^k > x always)


def round_down(x: float) -> float:
    """The largest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 (× 10^k) that is ≤ ``x`` > 0."""
    k = math.floor(math.log10(x))
    return float(max(m * 10**k for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8) if m * 10**k <= x))


def medians(speed: dict) -> dict[str, float]:
    """Each winner's upper median time to the look's target (``inf``: most seeds never)."""
    return {a: float(stats.median_time(np.asarray(t, float))) for a, t in speed["times"].items()}


def holding(speed: dict) -> list[str]:
    """The winners whose median second-half return over the tuning seeds is at or above the
    look's target: they *hold* it.  A winner below it touched the target, if at all, with a
    noisy evaluation.  A look that none holds saw no lasting improvement, and its times
    measure noise (``speed["levels"]``: each winner's per-seed second-half returns)."""
    target = speed["target"]["value"]
    if not math.isfinite(target):  # no improvement in the pool: nothing to hold
        return []
    return [a for a, v in speed.get("levels", {}).items() if np.median(v) >= target]


def check_look(speed: dict, name: str, look: float) -> None:
    """Refuses to size a budget from a look that no winner holds the target in (:func:`holding`)."""
    if "levels" in speed and not holding(speed):
        levels = {a: round(float(np.median(v)), 3) for a, v in speed["levels"].items()}
        raise SystemExit(
            f"third: {name}: no winner of the look holds its 80 % target "
            f"({speed['target']['value']:.4g}; median second-half returns {levels}): the look's "
            f"budget {look:g} saw no lasting improvement, so its times to the target are noise. "
            "Give the scenario a longer look (Scenario.look)."
        )


def budget_for(speed: dict, look: float) -> float:
    """About :data:`BUDGET_FACTOR` × the slowest winner's median time to the target,
    rounded up, at most the look's budget (which it is when that median is infinite)."""
    slowest = max(medians(speed).values())
    if not math.isfinite(slowest):
        return float(look)
    return min(float(look), round_up(BUDGET_FACTOR * slowest))


def cadence(speed: dict, budget: float) -> float:
    """``eval.every_time``: at least :data:`MIN_EVALS` evaluations per budget and
    :data:`BEFORE_TARGET` before the fastest winner's median time, rounded down."""
    fastest = min(medians(speed).values())
    every = budget / MIN_EVALS
    if math.isfinite(fastest):
        every = min(every, fastest / BEFORE_TARGET)
    return round_down(every)
