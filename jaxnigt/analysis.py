"""Deciding a claim from run directories: one definition of every statistic jaxnigt reports.

Everything here is a pure function of numpy arrays, except :func:`load_run`, which reads a
run directory (``config.yaml``, ``summary.json``, ``metrics.csv``) into them.  ``jaxnigt
compare``, ``jaxnigt tune`` (:mod:`jaxnigt.tuning`), ``jaxnigt sweep``'s table and
``scripts/results.py`` all use these definitions and no others.

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
  quantile of the times stays exact;
* *updates*: at the seed's last step, ``comms / trajectories_per_update`` for the methods
  whose ``summary.json`` entry has ``trajectories_per_update`` (the per-arrival methods
  update every that many trajectories, and every trajectory is one exchange), the step count
  otherwise (a round is one update).

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

**Effects.** For the return statistics: the difference of means over seeds, reference minus
baseline (> 0: the reference is ahead).  For times to target: the ratio baseline / reference
of the median times (> 1: the reference is faster; ``inf`` when only the reference's majority
reached the target, undefined when neither did).

**Intervals** (:func:`bootstrap_interval`).  A percentile bootstrap at level 0.9 with 2,000
resamples from ``numpy.random.default_rng(seed)`` (seed 0): in every resample each group's
seeds (each method's, each scenario's) are drawn with replacement, independently of the other
groups (the runs of different methods are separate programs), in the order resample by
resample, group by group; the interval is the 5 % and 95 % quantiles of the resampled
statistic (``method="nearest"``, so two infinite draws never interpolate to NaN); resamples
where the statistic is undefined (NaN) are left out.

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

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

LEVEL = 0.9
REPS = 2000
SEED = 0
FRACTIONS = (0.5, 0.8)
#: ``--statistic`` values: the return statistics (difference of means) and the times to
#: 50 % / 80 % of the improvement (ratio of median times).
STATISTICS = ("average", "second_half", "time_to_50", "time_to_80")
RETURN_STATISTICS = ("average", "second_half")
IDENTICAL, REFERENCE_AHEAD, BASELINE_AHEAD, TIE = (
    "identical runs",
    "reference ahead",
    "baseline ahead",
    "tie not excluded",
)
CLAIMS = ("ahead", "tie")

Curve = tuple[np.ndarray, np.ndarray]  # (times, returns) of one seed's evaluations


class AnalysisError(ValueError):
    """A run directory cannot be analysed as asked; the message names the problem."""


# ------------------------------------------------------------------------ step functions


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


def first_time(xs: np.ndarray, ys: np.ndarray, target: float, budget: float = math.inf) -> float:
    """One seed's time to ``target``: the first ``x <= budget`` with ``y >= target``
    (``inf``: censored, not reached within the budget)."""
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    hit = np.nonzero((ys >= target) & (xs <= budget))[0]
    return float(np.min(xs[hit])) if hit.size else math.inf


def median_time(times: np.ndarray) -> float:
    """The upper median of per-seed times (``[..., seeds]``, ``inf`` = censored): the first
    time by which more than half the seeds have reached the target."""
    times = np.sort(np.asarray(times, np.float64), axis=-1)
    return times[..., times.shape[-1] // 2]


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


# ------------------------------------------------------------------------------ intervals


def bootstrap_interval(
    statistic: Callable[..., float],
    *groups: np.ndarray,
    level: float = LEVEL,
    reps: int = REPS,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """``(estimate, low, high)``: ``statistic(*groups)`` and its percentile bootstrap interval.

    Each group is a per-seed array (leading seed axis).  Resample ``r`` draws, for each
    group in order, ``len(g)`` indices with replacement (``rng.integers(0, len(g), len(g))``,
    ``rng = numpy.random.default_rng(seed)``); the interval is the ``(1 ∓ level)/2``
    quantiles (``method="nearest"``) of the resampled statistic, NaN resamples left out
    (NaN bounds when every resample is NaN).  ``statistic`` may return ``±inf``.
    """
    rng = np.random.default_rng(seed)
    groups = tuple(np.asarray(g) for g in groups)
    est = float(statistic(*groups))
    draws = np.array(
        [statistic(*(g[rng.integers(0, len(g), len(g))] for g in groups)) for _ in range(reps)],
        np.float64,
    )
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return est, float("nan"), float("nan")
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], method="nearest")
    return est, float(low), float(high)


def mean_difference(reference: np.ndarray, baseline: np.ndarray) -> float:
    """Mean over seeds of ``reference`` minus that of ``baseline``."""
    return float(np.mean(reference) - np.mean(baseline))


def time_ratio(reference: np.ndarray, baseline: np.ndarray) -> float:
    """``median_time(baseline) / median_time(reference)`` of per-seed times (``inf`` when
    only the reference's majority reached the target, NaN when neither did)."""
    ref, other = float(median_time(reference)), float(median_time(baseline))
    if math.isinf(ref) and math.isinf(other):
        return math.nan
    if ref == 0:
        return 1.0 if other == 0 else math.inf
    return other / ref


def interval(statistic, *groups, **kw) -> dict[str, float]:
    """:func:`bootstrap_interval` as ``{"estimate", "low", "high"}``."""
    est, low, high = bootstrap_interval(statistic, *groups, **kw)
    return {"estimate": est, "low": low, "high": high}


# -------------------------------------------------------------------------------- verdicts


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


def lead_growth(
    small: tuple[np.ndarray, np.ndarray, float],
    large: tuple[np.ndarray, np.ndarray, float],
    **kw,
) -> dict[str, Any]:
    """Does the reference's lead over a baseline grow from scenario ``small`` to ``large``?

    Each argument is ``(reference, baseline, improvement)``: the per-seed statistic of both
    methods in that scenario and its improvement R_best − R0 (:func:`targets`), held fixed.
    A scenario's lead is the difference of means divided by its improvement, so that
    scenarios with different returns compare; the effect is lead(large) − lead(small), its
    interval bootstraps the four groups of seeds independently.  Confirmed when the interval
    is above 0, refuted below, otherwise inconclusive (with :func:`needed_seeds`).
    """
    (r_s, b_s, scale_s), (r_l, b_l, scale_l) = small, large

    def growth(rs, bs, rl, bl):
        return mean_difference(rl, bl) / scale_l - mean_difference(rs, bs) / scale_s

    iv = interval(growth, r_s, b_s, r_l, b_l, **kw)
    decided = iv["low"] > 0 or iv["high"] < 0
    result = "confirmed" if iv["low"] > 0 else "refuted" if iv["high"] < 0 else "inconclusive"
    seeds = min(len(r_s), len(b_s), len(r_l), len(b_l))
    return {
        "lead_difference": iv,
        "needed_seeds": None if decided else needed_seeds(iv, seeds),
        "verdict": result,
    }


def improvement_over_spread(initial: np.ndarray, levels: Mapping[str, np.ndarray]) -> float:
    """(R_best − R0) / the seed spread: the median over methods of the 20 %–80 % range of the
    per-seed second-half statistic (``levels``: method -> per-seed values).  Well above 1:
    the curves have left the initial band."""
    r0 = float(np.nanmedian(np.asarray(initial, np.float64)))
    best = max(float(np.median(v)) for v in levels.values())
    spread = float(np.median([np.subtract(*np.quantile(v, [0.8, 0.2])) for v in levels.values()]))
    return (best - r0) / spread if spread > 0 else math.inf


# ---------------------------------------------------------------------------- run data


@dataclasses.dataclass(frozen=True)
class Method:
    """One algorithm at one grid point of a run: its seeds' curves and per-seed counts.

    Attributes:
      name: its ``summary.json`` key (``algorithm``, or ``algorithm[grid=g]``).
      algorithm, grid, learning_rate, eta: what ran.
      seeds: the seed indices, in order; every per-seed array below follows it.
      curves: per seed, its evaluations ``(sim_time, eval_return)``.
      per_type: ``eval_type{v}`` -> per-seed curves (heterogeneous runs).
      updates, env_steps, end_time: ``[seeds]`` at each seed's last step.
      diverged: seeds marked diverged (``on_nonfinite: mark``) or that stopped before the
        budget.
    """

    name: str
    algorithm: str
    grid: int
    learning_rate: float
    eta: float
    seeds: tuple[int, ...]
    curves: tuple[Curve, ...]
    per_type: dict[str, tuple[Curve, ...]]
    updates: np.ndarray
    env_steps: np.ndarray
    end_time: np.ndarray
    diverged: tuple[int, ...]

    def statistic(self, name: str, budget: float, target: float | None = None) -> np.ndarray:
        """``[seeds]`` per-seed values of ``average``, ``second_half`` or ``time`` (to
        ``target``)."""
        if name == "time":
            return np.array([first_time(x, y, target, budget) for x, y in self.curves])
        per_seed = {"average": average_return, "second_half": second_half}[name]
        return np.array([per_seed(x, y, budget) for x, y in self.curves])

    def initial(self) -> np.ndarray:
        """``[seeds]`` return at time 0 (NaN for a seed without an evaluation there)."""
        return np.array([y[0] if x.size and x[0] == 0.0 else np.nan for x, y in self.curves])

    def identical_to(self, other: Method) -> bool:
        """Whether both have the same seeds with the same evaluation curves."""
        return self.seeds == other.seeds and all(
            np.array_equal(x1, x2) and np.array_equal(y1, y2)
            for (x1, y1), (x2, y2) in zip(self.curves, other.curves, strict=True)
        )


@dataclasses.dataclass(frozen=True)
class Run:
    """A run directory's methods (:class:`Method` by ``summary.json`` key) and budget."""

    path: Path
    config: Any
    budget: float
    methods: dict[str, Method]

    def algorithms(self) -> dict[str, Method]:
        """Grid point 0 of every algorithm, by name, in the run's order."""
        return {m.algorithm: m for m in self.methods.values() if m.grid == 0}


def load_run(run_dir: str | Path) -> Run:
    """Reads a finished run directory (config.yaml, summary.json, metrics.csv) into a
    :class:`Run`.

    Raises:
      AnalysisError: not a run directory, not finished, or without a simulated-time budget.
    """
    from jaxnigt import checkpoint, results
    from jaxnigt import config as config_lib

    run_dir = Path(run_dir)
    for name in ("config.yaml", "summary.json", "metrics.csv"):
        if not (run_dir / name).is_file():
            raise AnalysisError(f"{str(run_dir)!r} is not a run directory (no {name})")
    try:
        cfg = config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml"))
    except config_lib.ConfigError as e:
        raise AnalysisError(f"{str(run_dir)!r}: {e}") from None
    if not checkpoint.finished(run_dir):
        missing = set(cfg.algorithms) - set(checkpoint.done_algorithms(run_dir))
        raise AnalysisError(
            f"{str(run_dir)!r} is not finished ({', '.join(sorted(missing))} not done); "
            f"continue it with `jaxnigt run CONFIG --resume {run_dir}`"
        )
    if cfg.budget is None:
        raise AnalysisError(f"{str(run_dir)!r}: the run has no simulated-time budget")
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = results.read_metrics(run_dir)
    curves = results.group_curves(rows, x="sim_time", y="eval_return")
    types = sorted(k for k in (rows[0] if rows else {}) if k.startswith("eval_type"))
    per_type = {t: results.group_curves(rows, x="sim_time", y=t) for t in types}
    methods = {}
    for (algorithm, grid), seeds in curves.items():
        name = algorithm if grid == 0 else f"{algorithm}[grid={grid}]"
        mine = [r for r in rows if r["algorithm"] == algorithm and r["grid"] == grid]
        methods[name] = _method(name, algorithm, grid, mine, seeds, per_type, summary, cfg)
    return Run(run_dir, cfg, float(cfg.budget), methods)


def _method(name, algorithm, grid, rows, seeds, per_type, summary, cfg) -> Method:
    order = sorted(seeds)
    last = {}
    for r in rows:
        if r["seed"] not in last or r["round"] >= last[r["seed"]]["round"]:
            last[r["seed"]] = r
    entry = summary.get(name, {})
    # an algorithm's fact: summary.json records it on its grid point 0 entry
    per_update = summary.get(algorithm, {}).get("trajectories_per_update")
    updates = [
        last[s]["round"] if per_update is None else last[s]["comms"] / per_update for s in order
    ]
    end = np.array([last[s]["sim_time"] for s in order])
    # a seed that stopped before the budget (and the step cap) did not finish: diverged
    capped = np.array([cfg.max_rounds is not None and last[s]["round"] >= cfg.max_rounds
                       for s in order])  # fmt: skip
    stopped = {s for s, t, c in zip(order, end, capped, strict=True) if t < cfg.budget and not c}
    return Method(
        name=name,
        algorithm=algorithm,
        grid=grid,
        learning_rate=float(rows[0]["learning_rate"]),
        eta=float(rows[0]["eta"]),
        seeds=tuple(order),
        curves=tuple(seeds[s] for s in order),
        per_type={t: tuple(c[(algorithm, grid)][s] for s in order) for t, c in per_type.items()},
        updates=np.array(updates, np.float64),
        env_steps=np.array([last[s]["env_steps"] for s in order], np.float64),
        end_time=end,
        diverged=tuple(sorted(stopped | set(entry.get("diverged_seeds", ())))),
    )


# -------------------------------------------------------------------------------- compare


def _statistic_values(m: Method, statistic: str, budget: float, tg: dict) -> np.ndarray:
    if statistic in RETURN_STATISTICS:
        return m.statistic(statistic, budget)
    return m.statistic("time", budget, tg[_fraction(statistic)])


def _fraction(statistic: str) -> float:
    return int(statistic.removeprefix("time_to_")) / 100


def _comparison(ref: Method, other: Method, budget: float, tg: dict, statistic: str, kw) -> dict:
    """One reference-vs-baseline row (see :func:`compare`)."""
    ratio = statistic not in RETURN_STATISTICS
    effect = interval(
        time_ratio if ratio else mean_difference,
        _statistic_values(ref, statistic, budget, tg),
        _statistic_values(other, statistic, budget, tg),
        **kw,
    )
    identical = ref.identical_to(other)
    row = {"effect": effect, "outcome": outcome(effect, identical=identical, ratio=ratio)}
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


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _method_summary(m: Method, budget: float, tg: dict) -> dict[str, Any]:
    out = {
        "seeds": len(m.seeds),
        "average_return_median": float(np.median(m.statistic("average", budget))),
        "second_half_median": float(np.median(m.statistic("second_half", budget))),
        "updates_median": float(np.median(m.updates)),
        "env_steps_median": float(np.median(m.env_steps)),
        "time_to_target": {  # None: no majority of the seeds reached it within the budget
            str(f): _finite(median_time(m.statistic("time", budget, t))) for f, t in tg.items()
        },
        "diverged_seeds": list(m.diverged),
    }
    for t, cs in m.per_type.items():
        out[t] = float(np.median([second_half(x, y, budget) for x, y in cs]))
    return out


def _check_compare(run: Run, reference: str, statistic: str, baselines) -> tuple[dict, list]:
    if statistic not in STATISTICS:
        raise AnalysisError(f"--statistic: got {statistic!r}; expected one of {STATISTICS}")
    methods = run.algorithms()
    if reference not in methods:
        raise AnalysisError(
            f"--reference {reference}: not in {str(run.path)!r} (it has {', '.join(methods)})"
        )
    baselines = [a for a in methods if a != reference] if baselines is None else list(baselines)
    unknown = [b for b in baselines if b not in methods or b == reference]
    if unknown or not baselines:
        raise AnalysisError(
            f"baselines: {unknown or 'none'} to compare {reference} with in {str(run.path)!r} "
            f"(it has {', '.join(methods)})"
        )
    return methods, baselines


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
) -> dict[str, Any]:
    """The reference against every baseline of a run (grid point 0 of each algorithm).

    Per baseline: the effect of ``statistic`` with its interval, the row's :func:`outcome`,
    the seeds a tie would need; also the difference in average return and the ratios of times
    to the targets (second views).  Then the claim's :func:`verdict` over all rows.  The
    targets pool every method of the run (:func:`targets`).  Returns a JSON-able dict.

    Raises:
      AnalysisError: the reference or a baseline is not in the run, or no baseline is left.
    """
    methods, baselines = _check_compare(run, reference, statistic, baselines)
    budget = run.budget
    if statistic not in RETURN_STATISTICS:
        fractions = sorted({*fractions, _fraction(statistic)})
    initial = np.concatenate([m.initial() for m in methods.values()])
    levels = {a: m.statistic("second_half", budget) for a, m in methods.items()}
    tg = targets(initial, [float(np.median(v)) for v in levels.values()], fractions)
    kw = {"level": level, "reps": reps, "seed": seed}
    rows = {b: _comparison(methods[reference], methods[b], budget, tg, statistic, kw)
            for b in baselines}  # fmt: skip
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
        "initial_median_return": float(np.nanmedian(initial)),
        "best_second_half_median": max(float(np.median(v)) for v in levels.values()),
        "improvement_over_spread": improvement_over_spread(initial, levels),
        "targets": {str(f): t for f, t in tg.items()},
        "algorithms": {a: _method_summary(m, budget, tg) for a, m in methods.items()},
        "comparisons": rows,
        "verdict": decision["verdict"],
        "needed_seeds": decision["needed_seeds"],
    }


STATISTIC_TEXT = {
    "average": "difference in average return over [0, B] (reference − baseline)",
    "second_half": "difference in second-half return over [B/2, B] (reference − baseline)",
    "time_to_50": "ratio of the times to 50 % of the improvement (baseline / reference)",
    "time_to_80": "ratio of the times to 80 % of the improvement (baseline / reference)",
}


def fmt(iv: Mapping[str, float], digits: int = 2) -> str:
    """``estimate [low, high]`` (``∞`` for infinite values)."""

    def f(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        return "∞" if v == math.inf else "−∞" if v == -math.inf else f"{v:.{digits}f}"

    return f"{f(iv['estimate'])} [{f(iv['low'])}, {f(iv['high'])}]"


def outcome_text(row: Mapping[str, Any], reference: str, baseline: str) -> str:
    """A row's outcome with the method names (and the seeds a tie would need)."""
    text = row["outcome"]
    if text == REFERENCE_AHEAD:
        return f"{reference} ahead"
    if text == BASELINE_AHEAD:
        return f"{baseline} ahead"
    if text == TIE and row.get("needed_seeds"):
        return f"{TIE} (≈{row['needed_seeds']} seeds)"
    return text


def verdict_text(result: Mapping[str, Any]) -> str:
    """The verdict with the seeds an inconclusive one would need."""
    text = result["verdict"]
    if result.get("needed_seeds"):
        text += f" (≈{result['needed_seeds']} seeds)"
    return text


def compare_markdown(result: Mapping[str, Any]) -> str:
    """:func:`compare`'s result as Markdown: one row per baseline, then the verdict."""
    ref, stat = result["reference"], result["statistic"]
    pct = f"{result['level'] * 100:g} %"
    seeds = result["algorithms"][ref]["seeds"]
    extra = [] if stat == "average" else [f"Δ average return [{pct} CI]"]
    extra += [] if stat == "time_to_50" else [f"time to 50 %: ratio [{pct} CI]"]
    head = ["baseline", f"effect [{pct} CI]", "outcome", *extra, "updates (ref. / baseline)"]
    lines = [
        f"Reference `{ref}`; effect: {STATISTIC_TEXT[stat]}, {pct} bootstrap interval over "
        f"{seeds} seeds ({result['reps']} resamples, seed {result['seed']}); budget "
        f"{result['budget']:g}; targets R0 + f (R_best − R0) = "
        + ", ".join(f"{float(f) * 100:g} %: {t:.3g}" for f, t in result["targets"].items())
        + ".",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    updates = lambda a: f"{result['algorithms'][a]['updates_median']:,.0f}"
    for b, row in result["comparisons"].items():
        cells = [b, fmt(row["effect"]), outcome_text(row, ref, b)]
        if stat != "average":
            cells.append(fmt(row["average_return_difference"]))
        if stat != "time_to_50":
            cells.append(fmt(row["time_to_target_ratio"]["0.5"]))
        lines.append("| " + " | ".join([*cells, f"{updates(ref)} / {updates(b)}"]) + " |")
    claim = "ahead of every baseline" if result["claim"] == "ahead" else "tied with the baselines"
    lines += ["", f"Verdict ({ref} {claim}): **{verdict_text(result)}**"]
    return "\n".join(lines)
