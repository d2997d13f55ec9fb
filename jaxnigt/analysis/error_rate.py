"""The staged rule's error rate and power (the fifth edition's rule), simulated on per-seed
values whose law is known and on nulls split from real per-seed values.

**The rule** (:func:`staged_rule`): looks at the planned ``stages`` (default 5, 10, 20, 40
seeds, on seeds ``0 … k − 1`` of both methods); only the *decisive* looks
(:func:`jaxnigt.analysis.looks.decisive_stages`: those whose smallest attainable p is at most
``alpha / K``, K their number) decide anything, each at level ``alpha / K``.  At a decisive
look (:func:`jaxnigt.analysis.looks.look`, ``intervals=False``): ``p ≤ alpha / K`` → the side
the estimate favours is ahead; else ``tost_p ≤ alpha / K`` → "equivalent within the margin";
else the next look.  Undecided after the last look made.  The tests are the looks module's,
not reimplemented here.

**Synthetic comparisons** (:func:`simulate`, :class:`Regime`).  Times: ``log T_ref`` and
``log T_base`` bivariate normal with spread ``sigma`` and correlation ``rho`` (paired seeds);
under an effect the baseline's times are ``speedup`` × the reference's law (a log shift).  The
budget B is fixed in advance, as the rule fixes its target before any data: the quantile of the
baseline's time law at ``1 − censored`` (so that share of the baseline's seeds never reaches
the target; with ``censored = 0``, B is infinite).  Times are rounded up to the evaluation grid
(multiples of ``grid × B``; with no budget, of ``grid ×`` the law's 99.9th percentile) and
those above B are never reached (``inf``).  Returns: normal values of spread ``sigma`` and
correlation ``rho``, the reference's shifted by ``effect``.  Each experiment ``e`` draws from
``default_rng([seed, e])``, so the rates do not depend on how the experiments are split
between processes.

**Rates.** The share of each outcome, "a side ahead" (the error rate under a null, the power
under an effect), and per look the share decided there and the share "ahead" by then (the
error of the rule stopped at that look), each with its Monte Carlo standard error
``sqrt(r (1 − r) / N)``.  For times the true ratio of restricted means (the rule's estimand;
censoring pulls it towards 1) is given beside the time law's ratio, so an "equivalent"
verdict can be judged against the estimand it is about.

``python -m jaxnigt.cli.error_rate --suite [--out FILE] [--workers N]`` runs the grid
(:func:`suite`) and prints JSON lines; ``--small`` is the test suite's version.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxnigt.analysis import looks
from jaxnigt.analysis.run_data import AnalysisError
from jaxnigt.analysis.sequential import (
    ALPHA,
    EQUIVALENT,
    STAGES,
    TIME_MARGIN,
    UNDECIDED,
    exact_outcome,
)
from jaxnigt.analysis.verdicts import BASELINE_AHEAD, REFERENCE_AHEAD

#: The synthetic return claims' equivalence margin (a difference; the suite's returns have
#: spread 1, so a quarter of it).
RETURN_MARGIN = (-0.25, 0.25)
AHEAD = (REFERENCE_AHEAD, BASELINE_AHEAD)


class Regime(NamedTuple):
    """A synthetic law of per-seed values (module docstring).

    Attributes:
      sigma: the spread of log-times (or of returns).
      rho: the correlation of a seed's values across the two methods.
      censored: the share of the baseline's seeds that never reach the target (times).
      grid: evaluations every this share of the budget (times rounded up: ties), or 0.
    """

    sigma: float = 0.5
    rho: float = 0.0
    censored: float = 0.0
    grid: float = 0.0


PLAIN = Regime()  # lognormal times of spread 0.5 (or N(0, 0.5²) returns), independent


def budget_of(regime: Regime, speedup: float = 1.0) -> float:
    """The budget B: the baseline's time law's quantile at ``1 − censored`` (inf at 0)."""
    from scipy import stats as sps

    if regime.censored <= 0:
        return math.inf
    return float(speedup * math.exp(regime.sigma * sps.norm.ppf(1.0 - regime.censored)))


def draw(rng: np.random.Generator, regime: Regime, n: int, *, kind: str, effect: float):
    """One experiment's ``(reference, baseline, budget)``: n seeds of each (module
    docstring); ``effect`` is the speedup (times) or the reference's shift (returns)."""
    common, own = rng.normal(size=n), rng.normal(size=(2, n))
    z = regime.sigma * (math.sqrt(regime.rho) * common + math.sqrt(1.0 - regime.rho) * own)
    if kind == looks.RETURN:
        return z[0] + effect, z[1], None
    times = np.exp(z + np.array([[0.0], [math.log(effect)]]))
    budget = budget_of(regime, effect)
    if regime.grid:
        unit = (
            budget if math.isfinite(budget) else budget_of(regime._replace(censored=1e-3), effect)
        )
        times = np.ceil(times / (regime.grid * unit)) * (regime.grid * unit)
    times = np.where(times > budget, np.inf, times)
    return times[0], times[1], budget


def staged_rule(
    kind: str,
    reference: np.ndarray,
    baseline: np.ndarray,
    *,
    stages: Sequence[int] = STAGES,
    alpha: float = ALPHA,
    margin: tuple[float, float] | None,
    budget: float | None = None,
    paired: bool = True,
    available: int | None = None,
) -> tuple[str, int]:
    """The rule (module docstring) on per-seed values: ``(outcome, seeds at the last look
    made)`` (0 when no look was made).  The decisive looks and their level are set by every
    planned stage; with ``available`` seeds only the looks up to it are made."""
    p_min = looks.paired_p_min if paired else looks.independent_p_min
    decisive = looks.decisive_stages(stages, alpha, p_min)
    available = len(reference) if available is None else available
    seeds = 0
    for k in decisive:
        if k > available:
            break
        lv = alpha / len(decisive)
        r = looks.look(
            kind, reference[:k], baseline[:k], paired=paired, level=1.0 - lv,
            margin=margin, budget=budget, intervals=False,
        )  # fmt: skip
        seeds = k
        outcome = exact_outcome(r, looks.tie_of(kind), lv)  # the rule's own decision
        if outcome != UNDECIDED:
            return outcome, k
    return UNDECIDED, seeds


def _rates(outcomes: Sequence[tuple[str, int]], stages: Sequence[int]) -> dict[str, Any]:
    """Each outcome's share, "a side ahead" and per look (module docstring), with SEs."""
    n = len(outcomes)
    se = lambda r: float(math.sqrt(r * (1.0 - r) / n)) if n else 0.0
    names = (REFERENCE_AHEAD, BASELINE_AHEAD, EQUIVALENT, UNDECIDED)
    fractions = {o: sum(1 for x, _ in outcomes if x == o) / n for o in names}
    ahead = fractions[REFERENCE_AHEAD] + fractions[BASELINE_AHEAD]
    per_look, by = {}, 0.0
    for k in stages:
        here = sum(1 for x, s in outcomes if x in AHEAD and s == k) / n
        by += here
        eq = sum(1 for x, s in outcomes if x == EQUIVALENT and s == k) / n
        per_look[str(k)] = {"ahead": here, "ahead_by": by, "ahead_by_se": se(by), "equivalent": eq}
    return {"fractions": fractions, "ahead_either_side": ahead, "monte_carlo_se": se(ahead),
            "equivalent_se": se(fractions[EQUIVALENT]), "per_look": per_look,
            "mean_seeds": float(np.mean([s for _, s in outcomes])) if n else 0.0}  # fmt: skip


def true_rmst_ratio(regime: Regime, speedup: float, draws: int = 400_000) -> float:
    """The law's ratio of restricted means, baseline over reference (grid included), from
    ``draws`` pairs of ``default_rng(12345)``: the rule's estimand in the regime."""
    rng = np.random.default_rng(12345)
    ref, base, budget = draw(rng, regime, draws, kind=looks.TIME, effect=speedup)
    return float(looks.restricted(base, budget).mean() / looks.restricted(ref, budget).mean())


def _experiments(spec: dict[str, Any], start: int, stop: int) -> list[tuple[str, int]]:
    """Experiments ``start … stop − 1`` of one :func:`simulate` spec (a process's share)."""
    regime, kind, n = Regime(**spec["regime"]), spec["kind"], max(spec["stages"])
    rule = {k: spec[k] for k in ("stages", "alpha", "paired", "available")}
    rule["margin"] = tuple(spec["margin"]) if spec["margin"] is not None else None
    out = []
    for e in range(start, stop):
        rng = np.random.default_rng([spec["seed"], e])
        ref, base, budget = draw(rng, regime, n, kind=kind, effect=spec["effect"])
        out.append(staged_rule(kind, ref, base, budget=budget, **rule))
    return out


def spec_of(
    experiments: int,
    *,
    kind: str = looks.TIME,
    effect: float | None = None,
    regime: Regime = PLAIN,
    stages: Sequence[int] = STAGES,
    alpha: float = ALPHA,
    margin: tuple[float, float] | str | None = "default",
    paired: bool = True,
    available: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """A JSON-able description of one :func:`simulate` (its arguments, defaults filled)."""
    if effect is None:
        effect = 1.0 if kind == looks.TIME else 0.0
    if isinstance(margin, str):
        margin = TIME_MARGIN if kind == looks.TIME else RETURN_MARGIN
    p_min = looks.paired_p_min if paired else looks.independent_p_min
    decisive = looks.decisive_stages(stages, alpha, p_min)
    return {"experiments": experiments, "kind": kind, "effect": effect,
            "regime": Regime(*regime)._asdict(), "stages": list(stages),
            "decisive": list(decisive), "alpha": alpha,
            "look_alpha": alpha / len(decisive) if decisive else None,
            "margin": None if margin is None else list(margin), "paired": paired,
            "available": available, "seed": seed}  # fmt: skip


def finish(spec: dict[str, Any], outcomes: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """A spec's row: the spec, its rates and (times) the true ratios."""
    row = {**spec, **_rates(outcomes, spec["stages"])}
    if spec["kind"] != looks.TIME:
        return {**row, "true_difference": spec["effect"]}
    rmst = true_rmst_ratio(Regime(**spec["regime"]), spec["effect"])
    return {**row, "true_time_ratio": spec["effect"], "true_rmst_ratio": rmst}


def simulate(experiments: int, **kwargs: Any) -> dict[str, Any]:
    """The rule on ``experiments`` synthetic comparisons (module docstring).

    Args:
      experiments: synthetic comparisons to run.
      kind: ``"time"`` or ``"return"``.
      effect: the speedup of the reference (times: the baseline's times are ``effect`` ×;
        default 1, the null) or its shift (returns; default 0).
      regime: a :class:`Regime`.
      stages, alpha: the rule's planned looks and its error.
      margin: the equivalence margin (default :data:`TIME_MARGIN` or :data:`RETURN_MARGIN`;
        None: no equivalence).
      paired: the same seeds of both methods (the sign-flip test), else the permutation test.
      available: make only the looks up to this many seeds (their level still set by every
        planned stage).
      seed: the experiments' generator seed.

    Returns:
      A JSON-able dict: the arguments, the outcomes' shares, "a side ahead" and per look
      (with Monte Carlo standard errors), the mean seeds used, and for times the true ratio
      of restricted means.
    """
    spec = spec_of(experiments, **kwargs)
    return finish(spec, _experiments(spec, 0, experiments))


def split_null(
    values: np.ndarray,
    *,
    ratio: bool,
    stages: Sequence[int] = STAGES,
    margin: tuple[float, float] = TIME_MARGIN,
    experiments: int = 1000,
    alpha: float = ALPHA,
    reps: int | None = None,
    seed: int = 0,
    budget: float | None = None,
) -> dict[str, Any]:
    """The rule under a null built from real per-seed values: each experiment splits one
    method's seeds at random into two halves, two pseudo-methods of one law, and runs
    :func:`staged_rule` on them as paired seeds (its looks at the ``stages`` up to half the
    seeds, their level set by every planned stage).  A real comparison's censoring, ties on
    the evaluation grid and heavy tails are all in the values.  The two halves of a split are
    different seeds, so their pairs are independent (correlation 0); correlated pairs (the
    same seeds of two methods) are covered by :func:`simulate`'s grid.

    Args:
      values: one method's per-seed statistic (times to a target, ``inf`` = never reached;
        or returns).
      ratio: times (restricted times, :data:`jaxnigt.analysis.looks.TIME`), else returns.
      stages, margin, alpha: the rule's (the scenario's planned stages and its margin).
      experiments, seed: the splits and their generator seed (``default_rng(seed)``).
      reps: ignored (the exact tests draw no resamples); kept for callers of the fourth
        edition's signature.
      budget: the budget B of times (default: the largest finite time, or 1 when none).

    Returns:
      A JSON-able dict: the shares of each outcome, of "a side ahead" (the rule's error rate
      on these values) and per look, with Monte Carlo standard errors.
    """
    del reps
    values = np.asarray(values, np.float64)
    half = len(values) // 2
    if half < stages[0]:
        raise AnalysisError(f"{len(values)} seeds: halves of {half} are below the first look")
    kind, p_min = (looks.TIME if ratio else looks.RETURN), looks.paired_p_min
    if ratio and budget is None:
        finite = values[np.isfinite(values)]
        budget = float(finite.max()) if finite.size else 1.0
    rng = np.random.default_rng(seed)
    outcomes = []
    for _ in range(experiments):
        perm = rng.permutation(len(values))
        a, b = values[perm[:half]], values[perm[half : 2 * half]]
        rule = {"stages": stages, "alpha": alpha, "margin": margin, "available": half}
        outcomes.append(staged_rule(kind, a, b, budget=budget if ratio else None, **rule))
    due = [k for k in stages if k <= half]
    return {"experiments": experiments, "seeds": len(values), "looks": due,
            "decisive": [k for k in looks.decisive_stages(stages, alpha, p_min) if k <= half],
            "stages": list(stages), "alpha": alpha, "seed": seed,
            "budget": budget if ratio else None,
            "never_reached": int(np.sum(np.isinf(values))) if ratio else None,
            **_rates(outcomes, due)}  # fmt: skip


#: The issue's point-3 regime (log-time spread 1.3, pair correlation 0.5, evaluations every
#: 2 % of the budget); its power is checked at 30 % and 60 % of the baseline censored.
POINT3 = Regime(sigma=1.3, rho=0.5, grid=0.02)
SPEEDUP = 1.5
STAGED_20, STAGED_40, SINGLE_20 = (5, 10, 20), (5, 10, 20, 40), (20,)


def suite(small: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The grid's ``(part, spec)`` pairs: nulls of times over spread × correlation ×
    censoring × grid (looks to 20 seeds, 1,000 experiments each; to 40 seeds, 350 each, on
    the 2 % grid at spreads 0.5 and 1.3), the point-3 power (a single look at 20 seeds, and
    the staged rule to 20 and to 40) with the single look's null, equivalence at and beyond
    the margin's end, and return claims.  ``small``: the test suite's few regimes."""
    r, heavy = looks.RETURN, Regime(1.3, 0.9, 0.7, 0.02)
    if small:
        return [
            ("null", spec_of(400, regime=heavy, stages=STAGED_20)),
            ("null", spec_of(400, regime=POINT3._replace(censored=0.3), stages=STAGED_20)),
            ("null", spec_of(400, regime=PLAIN, stages=STAGED_20)),
            ("null", spec_of(200, regime=heavy, stages=STAGED_40)),
            ("power", spec_of(300, regime=POINT3._replace(censored=0.6), effect=SPEEDUP,
                              stages=SINGLE_20, seed=1)),
            ("null", spec_of(400, kind=r, regime=Regime(1.0, 0.5), stages=STAGED_20)),
        ]  # fmt: skip
    out = []
    for sigma, rho, censored, grid in itertools.product(
        (0.5, 0.9, 1.3), (0.0, 0.5, 0.9), (0.0, 0.3, 0.7), (0.0, 0.02)
    ):
        reg = Regime(sigma, rho, censored, grid)
        out.append(("null", spec_of(1000, regime=reg, stages=STAGED_20)))
        if grid and sigma != 0.9:
            out.append(("null", spec_of(350, regime=reg, stages=STAGED_40)))
    for censored in (0.3, 0.6):
        reg = POINT3._replace(censored=censored)
        if censored == 0.6:
            out += [("null", spec_of(1000, regime=reg, stages=STAGED_20)),
                    ("null", spec_of(350, regime=reg, stages=STAGED_40))]  # fmt: skip
        out.append(("null", spec_of(4000, regime=reg, stages=SINGLE_20)))
        for stages, n in ((SINGLE_20, 4000), (STAGED_20, 4000), (STAGED_40, 500)):
            out.append(("power", spec_of(n, regime=reg, effect=SPEEDUP, stages=stages, seed=1)))
    for sigma, speedup in itertools.product((0.5, 1.3), (1.25, SPEEDUP)):
        spec = spec_of(1000, regime=Regime(sigma, 0.5), effect=speedup, stages=STAGED_20, seed=2)
        out.append(("equivalence", spec))
    out.append(("equivalence", spec_of(300, regime=Regime(0.5, 0.5), effect=1.25,
                                       stages=STAGED_40, seed=2)))  # fmt: skip
    for rho in (0.0, 0.5, 0.9):
        reg = Regime(1.0, rho)
        out += [("null", spec_of(2000, kind=r, regime=reg, stages=STAGED_20)),
                ("null", spec_of(300, kind=r, regime=reg, stages=STAGED_40)),
                ("equivalence", spec_of(1000, kind=r, regime=reg, effect=0.25,
                                        stages=STAGED_20, seed=2))]  # fmt: skip
    out.append(("power", spec_of(1000, kind=r, regime=Regime(1.0, 0.5), effect=0.8,
                                 stages=STAGED_20, seed=1)))  # fmt: skip
    return out


def run_suite(specs, workers: int = 1, chunk: int = 50, emit=None) -> list[dict[str, Any]]:
    """Each spec's row (:func:`finish`, with its ``part``), its experiments in chunks of
    ``chunk`` over ``workers`` processes; ``emit(row)`` as each row completes."""
    jobs = [(i, a, min(a + chunk, s["experiments"]))
            for i, (_, s) in enumerate(specs)
            for a in range(0, s["experiments"], chunk)]  # fmt: skip
    args = [(specs[i][1], a, b) for i, a, b in jobs]
    pool = None
    if workers > 1:
        import multiprocessing

        pool = multiprocessing.get_context("fork").Pool(workers)
    results = pool.imap(_job, args) if pool else map(_job, args)
    rows, done = [], {}
    try:
        for (i, _, b), outcomes in zip(jobs, results, strict=True):
            done.setdefault(i, []).extend(outcomes)
            if b == specs[i][1]["experiments"]:
                rows.append({"part": specs[i][0], **finish(specs[i][1], done.pop(i))})
                _ = emit and emit(rows[-1])
    finally:
        _ = pool and pool.close()
    return rows


def _job(args):
    return _experiments(*args)


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The worst null rate of "a side ahead" (overall, and by any look), and for every power
    and equivalence row its shares of "reference ahead" and "equivalent" beside the truth."""
    brief = lambda r: {k: r[k] for k in ("kind", "regime", "stages", "experiments", "effect")}
    nulls = [r for r in rows if r["part"] == "null"]
    worst = max(nulls, key=lambda r: r["ahead_either_side"])
    by = [(r, k, v) for r in nulls for k, v in r["per_look"].items()]
    w, k, v = max(by, key=lambda x: x[2]["ahead_by"])
    others = [{**brief(r), "part": r["part"], "reference_ahead": r["fractions"][REFERENCE_AHEAD],
               "ahead_se": r["monte_carlo_se"], "equivalent": r["fractions"][EQUIVALENT],
               "equivalent_se": r["equivalent_se"], "mean_seeds": r["mean_seeds"],
               **{t: r[t] for t in ("true_rmst_ratio", "true_difference") if t in r}}
              for r in rows if r["part"] != "null"]  # fmt: skip
    return {
        "worst_null": {**brief(worst), "rate": worst["ahead_either_side"],
                       "se": worst["monte_carlo_se"]},
        "worst_null_by_look": {**brief(w), "look": int(k), "rate": v["ahead_by"],
                               "se": v["ahead_by_se"]},
        "null_rows": len(nulls),
        "effects": others,
    }  # fmt: skip
