"""Tests for jaxnigt.analysis and ``jaxnigt compare``: hand-computed statistics
(jaxnigt.analysis.stats), the bootstrap against a plain numpy resampling, outcomes and verdicts
(jaxnigt.analysis.verdicts), a run directory read back (jaxnigt.analysis.run_data).

The run directories here are written by hand (no training), so nothing compiles.
"""

import dataclasses
import json
import math

import chex
import numpy as np
import pytest

from jaxnigt import analysis, cli
from jaxnigt import config as config_lib
from jaxnigt.analysis import report_text, run_data, stats, verdicts
from jaxnigt.run import metrics

# --------------------------------------------------------------------- step functions


def test_time_average_of_a_step_function_with_an_evaluation_past_the_budget():
    # 1 on [0, 2), 3 on [2, 5), -1 on [5, 12); the evaluation at 12 lies past the budget 10
    xs, ys = np.array([0.0, 2.0, 5.0, 12.0]), np.array([1.0, 3.0, -1.0, 100.0])
    assert stats.average_return(xs, ys, 10.0) == pytest.approx((2 * 1 + 3 * 3 - 5) / 10)
    assert stats.second_half(xs, ys, 10.0) == pytest.approx(-1.0)  # [5, 10]
    assert stats.time_average(xs, ys, 1.0, 6.0) == pytest.approx((1 * 1 + 3 * 3 - 1) / 5)
    # order does not matter; the value at the budget itself is outside [0, B)
    order = np.array([2, 0, 3, 1])
    assert stats.average_return(xs[order], ys[order], 10.0) == pytest.approx(0.6)
    assert stats.average_return(xs, ys, 5.0) == pytest.approx((2 + 9) / 5)
    # no value at the window's start: undefined
    assert math.isnan(stats.average_return(xs[1:], ys[1:], 10.0))
    assert math.isnan(stats.time_average(xs, ys, 4.0, 4.0))
    # jaxnigt.run.metrics re-exports the same function


def test_time_to_target_censors_a_seed_that_never_reaches_it():
    budget, target = 10.0, 5.0
    curves = [
        (np.array([0.0, 2.0, 4.0, 8.0]), np.array([0.0, 4.0, 5.0, 6.0])),  # reaches at 4
        (np.array([0.0, 3.0, 6.0, 9.0]), np.array([0.0, 1.0, 7.0, 2.0])),  # at 6
        (np.array([0.0, 5.0, 10.0, 12.0]), np.array([0.0, 2.0, 4.9, 9.0])),  # only past B
    ]
    times = np.array([stats.first_time(x, y, target, budget) for x, y in curves])
    np.testing.assert_array_equal(times, [4.0, 6.0, np.inf])
    # an evaluation exactly at the budget counts; without a budget the last one does too
    assert stats.first_time(np.array([0.0, 10.0]), np.array([0.0, 5.0]), target, 10.0) == 10
    assert stats.first_time(*curves[2], target) == 12.0
    # the censored seed counts: the upper median of [4, 6, inf] is 6 ...
    assert stats.median_time(times) == 6.0
    # ... and with two of three never reaching the target no majority did (dropping them
    # would have said 4)
    assert stats.median_time(np.array([4.0, np.inf, np.inf])) == np.inf
    assert stats.median_time(np.array([4.0, 6.0, np.inf, np.inf])) == np.inf
    assert stats.median_time(np.array([4.0, 6.0, 8.0, np.inf])) == 8.0
    chex.assert_shape(stats.median_time(np.ones((3, 5))), (3,))
    # tuning's restricted mean: a censored seed counts as the budget, so [4, 6, inf] over a
    # budget of 10 is 20/3 and a point one seed of two brings there still ranks ahead of none
    assert stats.restricted_mean_time(times, budget) == pytest.approx(20 / 3)
    assert stats.restricted_mean_time(np.array([4.0, np.inf]), budget) == 7.0
    assert stats.restricted_mean_time(np.array([np.inf, np.inf]), budget) == budget


def test_time_statistics_by_name():
    assert stats.TIME_STATISTICS == ("time_to_50", "time_to_80")
    assert [stats.fraction(s) for s in stats.TIME_STATISTICS] == list(stats.FRACTIONS)
    assert analysis.STATISTICS == ("average", "second_half", "time_to_50", "time_to_80")
    with pytest.raises(ValueError, match="'average'; expected one of"):
        stats.fraction("average")


def test_target_rule():
    initial = np.array([-30.0, -28.0, -29.0, np.nan])  # R0 = -29 (NaN: no evaluation at 0)
    t = stats.targets(initial, levels=[-10.0, -5.0], fractions=(0.5, 0.8))
    assert t == pytest.approx({0.5: -17.0, 0.8: -9.8})  # R_best = -5
    nothing = stats.targets(initial, levels=[-31.0, -29.0])  # no improvement
    assert all(math.isnan(v) for v in nothing.values())


# ------------------------------------------------------------------------------ bootstrap


def _plain_bootstrap(statistic, groups, *, seed, reps, level):
    """The resampling as the docstring states it, with a plain loop."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(reps):
        resampled = []
        for g in groups:
            resampled.append(g[rng.integers(0, len(g), len(g))])
        draws.append(statistic(*resampled))
    draws = np.array(draws)
    draws = draws[~np.isnan(draws)]
    return np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], method="nearest")


def test_bootstrap_matches_a_plain_numpy_resampling_with_the_same_seed():
    a = np.array([1.2, 0.7, 1.9, 1.1, 0.4])
    b = np.array([0.3, -0.2, 0.8, 0.1])
    est, low, high = verdicts.bootstrap_interval(
        verdicts.mean_difference, a, b, seed=7, reps=300, level=0.8
    )
    expected = _plain_bootstrap(
        lambda x, y: x.mean() - y.mean(), (a, b), seed=7, reps=300, level=0.8
    )
    assert est == pytest.approx(a.mean() - b.mean())
    np.testing.assert_allclose([low, high], expected, rtol=1e-12)
    # a ratio of median times with censored seeds; the undefined resamples are left out
    ref, base = np.array([2.0, 3.0, np.inf]), np.array([4.0, np.inf, np.inf, 6.0])
    iv = verdicts.interval(verdicts.time_ratio, ref, base, seed=3, reps=400)
    plain = _plain_bootstrap(verdicts.time_ratio, (ref, base), seed=3, reps=400, level=0.9)
    assert iv["estimate"] == np.inf  # the baseline's majority never reached it
    np.testing.assert_allclose([iv["low"], iv["high"]], plain)
    # the same seed, the same interval
    assert verdicts.bootstrap_interval(verdicts.mean_difference, a, b, seed=7, reps=300) == (
        verdicts.bootstrap_interval(verdicts.mean_difference, a, b, seed=7, reps=300)
    )


def test_time_ratio():
    assert verdicts.time_ratio(np.array([2.0, 2.0, 4.0]), np.array([6.0, 6.0, 1.0])) == 3.0
    assert verdicts.time_ratio(np.array([2.0]), np.array([np.inf])) == np.inf
    assert verdicts.time_ratio(np.array([np.inf]), np.array([3.0])) == 0.0
    # neither majority reaches the target within the budget: a tie, not undefined
    assert verdicts.time_ratio(np.array([np.inf]), np.array([np.inf])) == 1.0
    # batched over leading axes: row by row
    ref = np.array([[2.0, 3.0, np.inf], [np.inf, np.inf, 1.0], [0.0, 0.0, 5.0]])
    base = np.array([[4.0, 6.0, 1.0], [np.inf, 2.0, np.inf], [np.inf, 1.0, 0.0]])
    rows = [verdicts.time_ratio(r, b) for r, b in zip(ref, base, strict=True)]
    np.testing.assert_array_equal(verdicts.time_ratio(ref, base), rows)
    assert rows == [4 / 3, 1.0, np.inf]


def test_never_reached_on_both_sides_is_a_tie_not_a_dropped_resample():
    """Two copies of one method whose seeds mostly never reach the target: resamples where
    neither majority does are ties, so the interval keeps 1 inside; leaving them out (the
    rule before 2026-12-05) built it from the few one-sided resamples and excluded 1."""
    ref = np.array([3.0, np.inf, np.inf, np.inf, 9.0])
    base = np.array([np.inf, 2.0, 4.0, np.inf, np.inf])
    iv = verdicts.interval(verdicts.time_ratio, ref, base, tie=1.0, reps=2000)
    assert iv["estimate"] == 1.0 and iv["low"] <= 1.0 <= iv["high"] and iv["p"] > 0.1
    _, draws = verdicts.bootstrap_draws(verdicts.time_ratio, ref, base, reps=2000)
    assert not np.isnan(draws).any() and np.mean(draws == 1.0) > 0.3
    # what dropping them gave: the finite one-sided resamples alone
    old = draws[draws != 1.0]
    assert np.quantile(old, 0.05, method="nearest") == 0.0 or np.mean(np.isinf(old)) > 0.05


def test_paired_resampling_draws_one_set_of_seeds_for_every_group():
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    b = a + np.array([0.1, -0.1, 0.2, 0.0, -0.2])
    _, draws = verdicts.bootstrap_draws(
        verdicts.mean_difference, a, b, reps=300, seed=4, paired=True
    )
    rng = np.random.default_rng(4)
    idx = rng.integers(0, 5, (300, 5))
    chex.assert_trees_all_close(draws, a[idx].mean(axis=1) - b[idx].mean(axis=1), atol=1e-12)
    # the seed-to-seed spread (1 … 5) cancels: the paired interval is far narrower
    paired = verdicts.interval(verdicts.mean_difference, a, b, paired=True, reps=1000)
    apart = verdicts.interval(verdicts.mean_difference, a, b, reps=1000)
    assert paired["high"] - paired["low"] < 0.25 * (apart["high"] - apart["low"])
    with pytest.raises(ValueError, match="one size"):
        verdicts.bootstrap_draws(verdicts.mean_difference, a, b[:4], paired=True)
    # a statistic without ``batched`` is called once per resample, with the same draws
    plain = lambda x, y: float(np.mean(x) - np.mean(y))
    _, loop = verdicts.bootstrap_draws(plain, a, b, reps=300, seed=4, paired=True)
    chex.assert_trees_all_close(loop, draws, atol=1e-12)


def test_bootstrap_p_value_is_the_share_beyond_the_tie_on_the_nearer_side():
    draws = np.array([0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, np.nan, 5.0])
    assert verdicts.bootstrap_p_value(draws, 1.0) == pytest.approx(2 * 2 / 9)
    assert verdicts.bootstrap_p_value(draws, 0.0) == 0.0
    assert verdicts.bootstrap_p_value(np.full(4, 1.0), 1.0) == 1.0


# ----------------------------------------------------------------------------- verdicts


def _row(ref, base, *, identical=False, ratio=False):
    stat = verdicts.time_ratio if ratio else verdicts.mean_difference
    iv = verdicts.interval(stat, np.asarray(ref), np.asarray(base), reps=500)
    out = verdicts.outcome(iv, identical=identical, ratio=ratio)
    need = verdicts.needed_seeds(iv, len(ref), ratio=ratio) if out == verdicts.TIE else None
    return {"effect": iv, "outcome": out, "needed_seeds": need}


WIN = ([1.0, 1.1, 0.9, 1.05, 0.95], [0.0, 0.1, -0.1, 0.05, -0.05])
TIE = ([0.1, -0.2, 0.3, 0.0, 0.15], [0.0, 0.2, -0.1, 0.1, 0.05])


def test_verdict_on_crafted_comparisons():
    win, loss = _row(*WIN), _row(WIN[1], WIN[0])
    tie, same = _row(*TIE), _row(WIN[0], WIN[0], identical=True)
    assert [r["outcome"] for r in (win, loss, tie, same)] == [
        verdicts.REFERENCE_AHEAD,
        verdicts.BASELINE_AHEAD,
        verdicts.TIE,
        verdicts.IDENTICAL,
    ]
    assert verdicts.verdict([win, win])["verdict"] == "confirmed"
    assert verdicts.verdict([win, loss])["verdict"] == "refuted"
    assert verdicts.verdict([win, loss, tie])["verdict"] == "refuted"
    undecided = verdicts.verdict([win, tie])
    assert undecided["verdict"] == "inconclusive"
    assert undecided["needed_seeds"] == tie["needed_seeds"] > 5
    assert verdicts.verdict([win, same])["verdict"] == "refuted (identical runs)"
    # a claim that the methods are the same
    assert verdicts.verdict([same], "tie")["verdict"] == "confirmed (identical runs)"
    assert verdicts.verdict([tie], "tie")["verdict"] == "inconclusive"
    assert verdicts.verdict([win], "tie")["verdict"] == "refuted"
    # times: the reference faster (ratio baseline / reference above 1) is a win
    fast = _row([10.0, 11.0, 12.0], [30.0, 31.0, 33.0], ratio=True)
    assert fast["outcome"] == verdicts.REFERENCE_AHEAD
    with pytest.raises(ValueError, match="claim"):
        verdicts.verdict([win], "better")


def test_needed_seeds_by_hand():
    iv = {"estimate": 0.1, "low": -0.1, "high": 0.3}  # half-width 0.2 at 5 seeds
    assert verdicts.needed_seeds(iv, 5) == 20  # 5 (0.2 / 0.1)^2
    ratio = {"estimate": 2.0, "low": 0.5, "high": 8.0}  # log: est ln 2, half-width 2 ln 2
    assert verdicts.needed_seeds(ratio, 5, ratio=True) == 20
    assert verdicts.needed_seeds({"estimate": 0.0, "low": -1.0, "high": 1.0}, 5) is None
    assert verdicts.needed_seeds({"estimate": 1.0, "low": 0.5, "high": math.inf}, 5) is None


def test_holm_step_down_by_hand():
    # m = 4 at 0.10: thresholds 0.025, 0.0333, 0.05, 0.10 for the sorted p-values
    p = {"a": 0.02, "b": 0.03, "c": 0.2, "d": 0.04}
    assert verdicts.holm(p) == {"a": True, "b": True, "c": False, "d": True}
    # the step-down stops at the first p above its threshold, even if a later one is small
    assert verdicts.holm({"a": 0.04, "b": 0.045, "c": 0.09}) == dict.fromkeys("abc", False)
    assert verdicts.holm({"a": 0.001, "b": None, "c": math.nan}) == {
        "a": True,
        "b": False,
        "c": False,
    }
    assert verdicts.holm({"a": 0.001, "b": 0.06}, alpha=0.05) == {"a": True, "b": False}
    # adjusted: 4·0.02, 3·0.03, 2·0.04, max(0.09, 1·0.2): monotone in the sorted order
    adjusted = verdicts.holm_adjusted(p)
    assert adjusted == pytest.approx({"a": 0.08, "b": 0.09, "d": 0.09, "c": 0.2})
    assert verdicts.holm_adjusted({"a": 0.01, "b": None}) == {"a": 0.02, "b": None}


def test_lead_growth():
    ref, base = np.array([2.0, 2.1, 1.9]), np.array([1.0, 1.1, 0.9])
    # lead 1 per 10 units of improvement, then 3 per 10: it grows by 0.2
    grown = verdicts.lead_growth((ref, base, 10.0), (ref + 2, base, 10.0), reps=300)
    assert grown["lead_difference"]["estimate"] == pytest.approx(0.2)
    assert grown["verdict"] == "confirmed" and grown["needed_seeds"] is None
    shrunk = verdicts.lead_growth((ref + 2, base, 10.0), (ref, base, 10.0), reps=300)
    assert shrunk["verdict"] == "refuted"


def test_lead_growth_resamples_the_seeds_of_both_scenarios_jointly():
    """Constructed correlated data: seed s is as good in both scenarios and for both methods
    (a shared seed effect much larger than the noise), as the same initial policy makes it.
    Resampling the four groups' seeds jointly cancels the seed effect, so the interval of
    the growth is narrower than independent resampling gives."""
    rng = np.random.default_rng(5)
    seed_effect = rng.normal(0.0, 3.0, 10)
    noise = lambda: rng.normal(0.0, 0.2, 10)
    groups = [
        seed_effect + 1 + noise(),
        seed_effect + noise(),
        seed_effect + 2 + noise(),
        seed_effect + noise(),
    ]
    small, large = (groups[0], groups[1], 1.0), (groups[2], groups[3], 1.0)
    joint = verdicts.lead_growth(small, large, paired=True, reps=1000)["lead_difference"]
    apart = verdicts.lead_growth(small, large, reps=1000)["lead_difference"]
    assert joint["estimate"] == pytest.approx(apart["estimate"])
    assert joint["high"] - joint["low"] < 0.5 * (apart["high"] - apart["low"])
    assert joint["low"] > 0  # the growth of 1 is found once the seed effect cancels
    times = [np.exp(g / 3) for g in groups]
    speed = lambda **kw: verdicts.speed_lead_growth(
        (times[0], times[1]), (times[2], times[3]), reps=1000, **kw
    )["log_lead_difference"]
    assert speed(paired=True)["high"] - speed(paired=True)["low"] < (
        speed()["high"] - speed()["low"]
    )


def test_speed_lead_growth_is_the_growth_of_the_log_time_ratio():
    ref = np.array([1.0, 1.0, 1.0])
    # the baseline takes 2x the reference's time, then 4x: the log lead grows by log 2
    grown = verdicts.speed_lead_growth((ref, 2 * ref), (3 * ref, 12 * ref), reps=300)
    assert grown["log_lead_difference"]["estimate"] == pytest.approx(math.log(2))
    assert grown["verdict"] == "confirmed" and grown["needed_seeds"] is None
    shrunk = verdicts.speed_lead_growth((ref, 4 * ref), (ref, 2 * ref), reps=300)
    assert shrunk["log_lead_difference"]["estimate"] == pytest.approx(-math.log(2))
    assert shrunk["verdict"] == "refuted"
    # a baseline that never reaches the target in the large scenario (censored): the lead
    # there is infinite, the growth too
    censored = verdicts.speed_lead_growth((ref, 2 * ref), (ref, np.full(3, np.inf)), reps=300)
    assert censored["log_lead_difference"]["estimate"] == math.inf
    assert censored["verdict"] == "confirmed"
    # never reached by either method in either scenario: no growth is seen (0), not NaN
    never = np.full(3, np.inf)
    assert verdicts.log_lead_difference(never, never, ref, never) == math.inf
    assert verdicts.log_lead_difference(ref, never, ref, never) == 0.0
    # noisy times that overlap: undecided
    rng = np.random.default_rng(0)
    noisy = [rng.uniform(1.0, 3.0, 5) for _ in range(4)]
    tie = verdicts.speed_lead_growth((noisy[0], noisy[1]), (noisy[2], noisy[3]), reps=300)
    assert tie["verdict"] == "inconclusive"
    assert tie["log_lead_difference"]["low"] < 0 < tie["log_lead_difference"]["high"]


# --------------------------------------------------------------------- run directories

CONFIG = {
    "name": "handmade",
    "algorithms": ["rennala_nigt", "sync_nigt", "afedpg"],
    "seeds": 3,
    "budget": 10.0,
    "env": {"name": "point_mass"},
    "cluster": {"n": 2},
}


def _write_run(path, curves, *, done=True, per_update=None, worker=None, **config):
    """A run directory by hand: ``curves`` is ``{algorithm: [(times, returns), ...]}``;
    ``worker``: ``{algorithm: rate}``, a total worker time of ``rate × sim_time`` in every
    row (None: no ``worker_time`` column, as a run written before it); ``config``: top-level
    config values over :data:`CONFIG` (``first_seed`` numbers the seeds)."""
    path.mkdir(parents=True)
    cfg = config_lib.from_dict({**CONFIG, "algorithms": list(curves), **config})
    (path / "config.yaml").write_text(config_lib.dump(cfg))
    rows, summary = [], {}
    for algorithm, seeds in curves.items():
        for s, (xs, ys) in enumerate(seeds, cfg.first_seed):
            for r, (x, y) in enumerate(zip(xs, ys, strict=True)):
                ids = {"algorithm": algorithm, "grid": 0, "learning_rate": 0.1, "eta": 0.5}
                rows.append(
                    {
                        **ids,
                        "seed": s,
                        "round": r,
                        "sim_time": x,
                        "eval_return": y,
                        "env_steps": 10 * r,
                        "comms": 4 * r,
                        "grads": 4.0 if r else float("nan"),
                    }
                )
                if worker is not None:
                    rows[-1]["worker_time"] = worker[algorithm] * x
        summary[algorithm] = {"seeds": len(seeds)}
        if per_update and algorithm in per_update:
            summary[algorithm]["trajectories_per_update"] = per_update[algorithm]
    metrics.write_csv(path / "metrics.csv", rows)
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "done.json").write_text(json.dumps(list(curves) if done else []))
    return path


T = [0.0, 2.0, 4.0, 6.0, 8.0, 11.0]  # the last evaluation past the budget 10


def _curve(values):
    return (T, values)


FAST = [
    _curve([-10, -6, -3, -2, -2, -2]),
    _curve([-10, -5, -3, -2, -1, -1]),
    _curve([-10, -7, -4, -2, -2, -2]),
]
SLOW = [
    _curve([-10, -10, -9, -7, -5, 0]),
    _curve([-10, -9, -9, -8, -6.5, -5]),
    _curve([-10, -10, -10, -9, -8, 0]),
]


def test_load_run_reads_curves_updates_and_initial_returns(tmp_path):
    run = run_data.load_run(
        _write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": SLOW}, per_update={"afedpg": 2})
    )
    assert run.budget == 10.0 and list(run.algorithms()) == ["rennala_nigt", "afedpg"]
    fast, slow = run.algorithms()["rennala_nigt"], run.algorithms()["afedpg"]
    assert fast.seeds == (0, 1, 2) and fast.diverged == ()
    np.testing.assert_array_equal(fast.initial(), [-10.0] * 3)
    # rounds for a round-based method, the trajectories used (4 per step, 5 steps) over
    # trajectories_per_update for a per-arrival one
    np.testing.assert_array_equal(fast.updates, [5, 5, 5])
    np.testing.assert_array_equal(slow.updates, [10, 10, 10])
    # seed 0: -10·2 - 6·2 - 3·2 - 2·4 (over [0, 10]) / 10
    assert fast.statistic("average", 10.0)[0] == pytest.approx(-4.6)
    assert not fast.identical_to(slow) and fast.identical_to(fast)


def test_compare_a_clear_win_and_identical_runs(tmp_path):
    # three paired seeds, the reference ahead on each: the sign-flip test's p is 2 / 2^3, its
    # smallest possible, and above 0.10: no decision, and the interval is unbounded
    three = analysis.load_run(_write_run(tmp_path / "3", {"rennala_nigt": FAST, "afedpg": SLOW}))
    row = analysis.compare(three, "rennala_nigt", reps=300)["comparisons"]["afedpg"]
    assert row["p"] == row["p_min"] == 0.25 and row["outcome"] == verdicts.TIE
    assert (row["effect"]["low"], row["effect"]["high"]) == (-math.inf, math.inf)
    # six seeds (each curve twice): p = 2 / 2^6 < 0.10 decides
    fast, slow = FAST * 2, SLOW * 2
    run = analysis.load_run(
        _write_run(tmp_path / "r", {"rennala_nigt": fast, "sync_nigt": fast, "afedpg": slow})
    )
    result = analysis.compare(run, "rennala_nigt", reps=300)
    rows = result["comparisons"]
    assert rows["afedpg"]["p"] == pytest.approx(2 / 2**6) and rows["afedpg"]["exact"]
    assert rows["sync_nigt"]["outcome"] == verdicts.IDENTICAL
    assert rows["afedpg"]["outcome"] == verdicts.REFERENCE_AHEAD
    assert result["verdict"] == "refuted (identical runs)"
    # R0 = -10; R_best = the best median second half: rennala's seeds over [5, 10] average
    # (-3 - 2·2 - 2·2) / 5 = -2.2, -1.8 and -2.4 -> -2.2; the 50 % target is -6.1
    assert result["targets"]["0.5"] == pytest.approx(-6.1)
    assert result["best_second_half_median"] == pytest.approx(-2.2)
    assert result["algorithms"]["rennala_nigt"]["time_to_target"]["0.5"] == 2.0  # [2, 2, 4]
    # afedpg's seeds reach -6.1 at 8, never (-5 only at 11 > B) and never: censored, so no
    # majority reached it
    assert result["algorithms"]["afedpg"]["time_to_target"]["0.5"] is None
    # the 80 % target, -3.76: every rennala seed reaches it by the budget, no afedpg seed does
    km = result["kaplan_meier"]
    assert km["fraction"] == 0.8 and km["target"] == pytest.approx(-3.76)
    assert km["curves"]["afedpg"]["censored"] == 6 and km["curves"]["afedpg"]["reached"] == [0.0]
    assert km["curves"]["rennala_nigt"]["censored"] == 0
    assert km["curves"]["rennala_nigt"]["reached"][-1] == 1.0
    only = analysis.compare(run, "rennala_nigt", baselines=["afedpg"], reps=300)
    assert only["verdict"] == "confirmed"
    for bad in ({"reference": "malenia_nigt"}, {"reference": "rennala_nigt", "baselines": []}):
        with pytest.raises(analysis.AnalysisError):
            analysis.compare(run, **{"baselines": None, **bad})


def test_compare_command_prints_a_row_per_baseline_and_writes_files(tmp_path, capsys):
    d = _write_run(
        tmp_path / "r", {"rennala_nigt": FAST * 2, "sync_nigt": SLOW * 2, "afedpg": SLOW * 2}
    )
    assert cli.main(["compare", str(d)]) == 0
    out = capsys.readouterr().out
    first = out.split("\n\n")[1]  # the comparisons' table (the Kaplan–Meier one follows)
    table = [line for line in first.splitlines() if line.startswith("| ")][1:]
    assert [line.split(" | ")[0] for line in table] == ["| sync_nigt", "| afedpg"]
    assert "rennala_nigt ahead" in table[0] and "Verdict" in out and "confirmed" in out
    written = json.loads((d / "compare.json").read_text())
    assert written["verdict"] == "confirmed" and (d / "compare.md").is_file()
    assert (d / "compare_kaplan_meier.png").stat().st_size > 0  # beside the table
    assert "| rennala_nigt | 6 of 6 |" in out  # the seeds at the target, per method
    assert cli.main(["compare", str(d), "--statistic", "time_to_50"]) == 0
    assert json.loads((d / "compare.json").read_text())["statistic"] == "time_to_50"


def test_compare_pairs_methods_that_ran_the_same_seeds_and_says_so(tmp_path, capsys):
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": SLOW})
    assert cli.main(["compare", str(d), "--statistic", "time_to_50"]) == 0
    out = capsys.readouterr().out
    assert "Paired: rennala_nigt and afedpg ran the same seeds" in out
    assert "never reaches the target counts at the budget B" in out
    written = json.loads((d / "compare.json").read_text())
    assert written["paired"] == {"afedpg": True}
    row = written["comparisons"]["afedpg"]
    assert row["paired"] and 0.0 <= row["effect"]["p"] <= 1.0
    # methods of other seeds (the reference's seeds 0-2, the baseline's 3-5) are not paired
    run = analysis.load_run(d)
    other = run.algorithms()["afedpg"]
    moved = dataclasses.replace(other, seeds=(3, 4, 5))
    run = dataclasses.replace(run, methods={**run.methods, "afedpg": moved})
    result = analysis.compare(run, "rennala_nigt", reps=200)
    assert result["paired"] == {"afedpg": False}
    assert "Not paired: afedpg ran other seeds" in analysis.compare_markdown(result)


def test_compare_decides_on_the_total_worker_time_to_a_target(tmp_path, capsys):
    """rennala_nigt (FAST) reaches the 80 % target (-3.76) sooner, at 4, 4 and 6, but with
    every worker busy at a rate of 4 (worker time 16, 16, 24); afedpg (SLOW) never reaches
    it by the budget 10 and is censored at its final total worker time, 1 × 11 (its last
    step, past the budget): the cheaper one, though the slower, on six paired seeds."""
    fast, slow = FAST * 2, SLOW * 2
    rates = {"rennala_nigt": 4.0, "afedpg": 1.0}
    d = _write_run(tmp_path / "r", {"rennala_nigt": fast, "afedpg": slow}, worker=rates)
    run = analysis.load_run(d)
    rennala, afedpg = run.algorithms()["rennala_nigt"], run.algorithms()["afedpg"]
    np.testing.assert_array_equal(rennala.final_worker_time, [44.0] * 6)
    target = -3.76
    np.testing.assert_allclose(rennala.statistic("worker_time", 10.0, target), [16, 16, 24] * 2)
    assert np.all(np.isinf(afedpg.statistic("worker_time", 10.0, target)))
    np.testing.assert_array_equal(afedpg.censoring("worker_time", 10.0), [11.0] * 6)
    np.testing.assert_array_equal(afedpg.censoring("time", 10.0), [10.0] * 6)
    result = analysis.compare(run, "rennala_nigt", statistic="worker_time_to_80", reps=300)
    row = result["comparisons"]["afedpg"]
    # the ratio of geometric-mean restricted worker times, baseline / reference
    assert row["effect"]["estimate"] == pytest.approx(11 / (16 * 16 * 24) ** (1 / 3))
    assert row["p"] == pytest.approx(2 / 2**6) and row["outcome"] == verdicts.BASELINE_AHEAD
    assert row["reached"] == {"reference": 6, "baseline": 0, "seeds": 6}
    assert row["rmst"] == {"reference": pytest.approx(56 / 3), "baseline": 11.0}
    assert result["verdict"].startswith("refuted")
    summary = result["algorithms"]
    assert summary["rennala_nigt"]["worker_time_to_target"]["0.8"] == 16.0  # upper median
    assert summary["afedpg"]["worker_time_to_target"]["0.8"] is None
    assert summary["afedpg"]["final_worker_time_median"] == 11.0
    # by simulated time the same seeds put the reference ahead
    timed = analysis.compare(run, "rennala_nigt", statistic="time_to_80", reps=300)
    assert timed["comparisons"]["afedpg"]["outcome"] == verdicts.REFERENCE_AHEAD
    # seeds added in stages take it too: each look tests the restricted worker times
    staged = analysis.sequential.compare_sequential(
        run, "rennala_nigt", statistic="worker_time_to_80", stages=(6,), reps=300
    )
    look = staged["comparisons"]["afedpg"]["looks"][-1]
    assert look["values"]["baseline"] == [11.0] * 6
    assert look["values"]["reference"] == [16.0, 16.0, 24.0] * 2
    # the command line: the statistic, its words, the JSON
    assert cli.main(["compare", str(d), "--statistic", "worker_time_to_80"]) == 0
    out = capsys.readouterr().out
    assert "restricted total worker times min(W, W_final) to 80 %" in out
    assert "at its final total worker time" in out and "afedpg ahead" in out
    written = json.loads((d / "compare.json").read_text())
    assert written["statistic"] == "worker_time_to_80"


def test_a_run_without_worker_times_is_refused_for_a_worker_time_statistic(tmp_path, capsys):
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": SLOW})
    run = analysis.load_run(d)
    assert run.algorithms()["afedpg"].worker_times is None
    with pytest.raises(analysis.AnalysisError, match="no worker_time column") as e:
        analysis.compare(run, "rennala_nigt", statistic="worker_time_to_50")
    assert e.value.param == "statistic"
    summary = analysis.compare(run, "rennala_nigt", reps=200)["algorithms"]["afedpg"]
    assert "worker_time_to_target" not in summary
    assert cli.main(["compare", str(d), "--statistic", "worker_time_to_50"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and not (d / "compare.json").exists()
    assert err[0].startswith("jaxnigt: error: --statistic: rennala_nigt: its metrics.csv has no ")


def test_compare_reports_each_methods_largest_evaluation_gap_and_warns(tmp_path):
    """The reference's median time to 50 % is 2 (FAST); a baseline evaluated only at 0 and 8
    resolves its time to 8 units: more than 10 % of the reference's time, so compare warns."""
    sparse = [([0.0, 8.0, 11.0], [-10.0, -4.0, -2.0])] * 3
    run = analysis.load_run(_write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": sparse}))
    result = analysis.compare(run, "rennala_nigt", statistic="time_to_50", reps=200)
    assert result["algorithms"]["afedpg"]["largest_eval_gap"] == 8.0
    assert result["algorithms"]["rennala_nigt"]["largest_eval_gap"] == 3.0
    assert any(w.startswith("afedpg's evaluations are up to 8 apart") for w in result["warnings"])
    assert "Warning: afedpg's evaluations" in analysis.compare_markdown(result)
    # a return statistic's scale is its window: gaps of 8 in a budget of 10 are too sparse too
    avg = analysis.compare(run, "rennala_nigt", statistic="average", reps=200)
    assert len(avg["warnings"]) == 2


@pytest.mark.parametrize(
    "argv, what",
    [
        (["--reference", "malenia_nigt"], "--reference: 'malenia_nigt' is not in"),
        (["--baselines", "sync_nigt,nope"], "--baselines: 'nope' is not in"),
        (["--baselines", ","], "--baselines: got no name; expected A,B,... of"),
        (["--baselines", "rennala_nigt"], "--baselines: 'rennala_nigt' is the reference"),
        (["--out", "table.txt"], "--out: got 'table.txt'; expected FILE, FILE.json or FILE.md"),
    ],
)
def test_compare_errors_are_one_line_and_write_nothing(tmp_path, capsys, argv, what):
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "sync_nigt": SLOW})
    assert cli.main(["compare", str(d), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: ") and what in err[0], err
    assert not (d / "compare.json").exists() and not (d / "compare.md").exists()


def test_an_unknown_baseline_is_named_with_the_runs_methods(tmp_path, capsys):
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "sync_nigt": SLOW, "afedpg": SLOW})
    assert cli.main(["compare", str(d), "--baselines", "afedpg,nope,other"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"jaxnigt: error: --baselines: 'nope', 'other' are not in {str(d)!r}; the run's "
        "methods: rennala_nigt, sync_nigt, afedpg"
    ]
    assert not (d / "compare.json").exists()


def test_compare_merges_only_seed_blocks_of_one_config(tmp_path, capsys):
    """Runs that differ in more than the seed fields are not seed blocks of one config: the
    command names the keys and writes nothing; true blocks merge."""
    a = _write_run(tmp_path / "a", {"rennala_nigt": FAST, "afedpg": SLOW})
    other = _write_run(
        tmp_path / "b",
        {"rennala_nigt": FAST, "afedpg": SLOW},
        first_seed=3,
        env={"name": "lqr1d"},
        cluster={"n": 8},
    )
    assert cli.main(["compare", str(a), str(other)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "are not seed blocks of one config" in err[0], err
    assert "differ in cluster.n, env.name (" in err[0], err
    assert not (a / "compare.json").exists() and not (other / "compare.json").exists()
    block = _write_run(
        tmp_path / "c",
        {"rennala_nigt": FAST, "afedpg": SLOW},
        first_seed=3,
        name="second_block",
        checkpoint_every=2,
    )
    assert cli.main(["compare", str(a), str(block)]) == 0
    assert json.loads((a / "compare.json").read_text())["algorithms"]["afedpg"]["seeds"] == 6


def test_compare_prints_its_table_where_it_cannot_write_and_takes_out(
    tmp_path, capsys, monkeypatch
):
    """A run on a read-only mount: the table is printed, one line says what could not be
    written and where else to write it (--out FILE)."""
    import errno
    import os
    import tempfile

    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": SLOW})
    mkstemp = tempfile.mkstemp

    def read_only(*a, dir=None, prefix="", suffix="", **kw):
        if str(dir) == str(d):
            name = os.path.join(str(dir), f"{prefix}x{suffix}")
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), name)
        return mkstemp(*a, dir=dir, prefix=prefix, suffix=suffix, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert cli.main(["compare", str(d)]) == 2
    out, err = capsys.readouterr()
    assert "| afedpg" in out and "Verdict" in out
    assert err.strip().splitlines() == [
        f"jaxnigt: error: cannot write the comparison: {str(d / 'compare.json')!r}: "
        "Read-only file system; pass --out FILE to write them elsewhere"
    ]
    assert sorted(p.name for p in d.iterdir()) == [
        "checkpoints",
        "config.yaml",
        "metrics.csv",
        "summary.json",
    ]
    for given in ("cmp", "cmp.json", "cmp.md"):
        assert cli.main(["compare", str(d), "--out", str(tmp_path / given)]) == 0
        said = capsys.readouterr().out.strip().splitlines()[-1]
        km = tmp_path / "cmp_kaplan_meier.png"
        assert said == f"[jaxnigt] wrote {tmp_path / 'cmp.json'}, {tmp_path / 'cmp.md'} and {km}"
        assert json.loads((tmp_path / "cmp.json").read_text())["reference"] == "rennala_nigt"
        assert (tmp_path / "cmp.md").read_text().startswith(out.strip().splitlines()[0])


def test_compare_refuses_a_missing_or_unfinished_run(tmp_path, capsys):
    assert cli.main(["compare", str(tmp_path / "nowhere")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "sync_nigt": SLOW}, done=False)
    assert cli.main(["compare", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not finished" in err[0], err
    assert err[0].endswith(f"resume its run to finish it with `jaxnigt run CONFIG --resume {d}`")


def test_analysis_errors_name_the_parameter_not_the_flag(tmp_path):
    """The library says which parameter is at fault (``param``); the command line maps it to
    its flag (jaxnigt.cli.reports)."""
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "sync_nigt": SLOW})
    run = analysis.load_run(d)
    for kw, param in (({"statistic": "median"}, "statistic"), ({"baselines": ["x"]}, "baselines")):
        with pytest.raises(analysis.AnalysisError) as caught:
            analysis.compare(run, "rennala_nigt", **kw)
        assert caught.value.param == param and str(caught.value).startswith(f"{param}: ")
    with pytest.raises(analysis.AnalysisError, match=r"^reference: 'impala' is not in"):
        analysis.compare(run, "impala")
    unfinished = _write_run(tmp_path / "u", {"rennala_nigt": FAST, "sync_nigt": SLOW}, done=False)
    with pytest.raises(analysis.UnfinishedRunError) as caught:
        analysis.load_run(unfinished)
    assert caught.value.path == unfinished and caught.value.param is None


def test_analysis_keeps_the_names_its_importers_use():
    """The command line and jaxnigt sweep import these from jaxnigt.analysis (loaded on first
    use from analysis.comparison): the very objects of the modules that define them."""
    assert analysis.load_run is run_data.load_run and analysis.Method is run_data.Method
    assert analysis.AnalysisError is run_data.AnalysisError
    assert analysis.compare_markdown is report_text.compare_markdown
    assert analysis.targets is stats.targets and analysis.median_time is stats.median_time
    assert analysis.first_time is stats.first_time and analysis.FRACTIONS == stats.FRACTIONS
    assert analysis.bootstrap_interval is verdicts.bootstrap_interval
    assert analysis.CLAIMS == verdicts.CLAIMS and "time_to_50" in analysis.STATISTICS
    from jaxnigt.analysis import comparison

    assert set(comparison.__all__) <= set(vars(comparison))
    assert all(getattr(analysis, name) is getattr(comparison, name) for name in comparison.__all__)


def test_no_improvement_says_why_the_targets_are_nan(tmp_path, capsys):
    """Every method falls from its start: no target exists, and compare says so in one line
    instead of printing blank times."""
    worse = [_curve([-10, -11, -12, -12, -13, -13])] * 3
    run_dir = _write_run(tmp_path / "r", {"rennala_nigt": worse, "afedpg": worse[::-1]})
    result = analysis.compare(analysis.load_run(run_dir), "rennala_nigt", reps=100)
    assert all(math.isnan(t) for t in result["targets"].values())
    why = stats.no_target_reason(result["initial_median_return"], result["best_second_half_median"])
    assert why.startswith("no method improved on its start: the best second-half median")
    assert f"Note: {why}." in report_text.compare_markdown(result)
    assert cli.main(["compare", str(run_dir)]) == 0
    assert "no method improved on its start" in capsys.readouterr().out
    assert stats.no_target_reason(-10.0, -9.0) is None
    fine = analysis.compare(
        analysis.load_run(_write_run(tmp_path / "f", {"rennala_nigt": FAST, "afedpg": SLOW})),
        "rennala_nigt",
        reps=100,
    )
    assert "Note:" not in report_text.compare_markdown(fine)


def test_compare_refuses_seed_blocks_run_on_different_contents_of_one_trace(tmp_path, capsys):
    """``config.yaml`` names the trace file only: blocks run before and after an edit of it
    were merged as one config.  Their ``trace.sha256`` records tell them apart."""
    trace = tmp_path / "down.csv"
    trace.write_text("2,1.5,0\n2,6,1\n")
    cluster = {"n": 2, "power": f"trace:{trace}"}
    a = _write_run(tmp_path / "a", {"rennala_nigt": FAST, "afedpg": SLOW}, cluster=cluster)
    b = _write_run(
        tmp_path / "b", {"rennala_nigt": FAST, "afedpg": SLOW}, cluster=cluster, first_seed=3
    )
    (a / "trace.sha256").write_text(f"{'a' * 64}  {trace}\n")
    (b / "trace.sha256").write_text(f"{'b' * 64}  {trace}\n")
    assert analysis.load_run(a).trace_sha256 == "a" * 64
    assert cli.main(["compare", str(a), str(b)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"jaxnigt: error: {str(b)!r} and {str(a)!r} are not seed blocks of one config: they "
        f"ran on different contents of the power trace {str(trace)!r} (sha256 {'a' * 16} and "
        f"{'b' * 16}, as their trace.sha256 records)"
    ]
    assert not (a / "compare.json").exists()
    (b / "trace.sha256").write_text(f"{'a' * 64}  {trace}\n")
    assert cli.main(["compare", str(a), str(b)]) == 0


def test_compare_and_plot_never_write_over_a_runs_own_files(tmp_path, capsys):
    """``compare RUN --out RUN/summary.json`` replaced the run's summary with the comparison;
    ``plot --out RUN/curves.png`` its curves."""
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": SLOW})
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    for argv, own in (
        (["compare", str(d), "--out", str(d / "summary.json")], d / "summary.json"),
        (["compare", str(d), "--out", str(d / "summary.md")], d / "summary.json"),
        (["plot", str(d), "--out", str(d / "curves.png")], d / "curves.png"),
    ):
        assert cli.main(argv) == 2
        captured = capsys.readouterr()
        assert captured.err.strip().splitlines() == [
            f"jaxnigt: error: --out: {str(own)!r} is a run directory's own file (written by "
            "its run only); choose another FILE"
        ]
        assert captured.out == ""
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("damage", ["cut", "garbage", "no_eval_return"])
def test_an_unreadable_metrics_file_is_one_line_naming_it(tmp_path, capsys, damage):
    """A metrics.csv cut mid-row ended compare and plot in a TypeError; a garbage one, or one
    without eval_return, said the reference was not in the run ("it has ")."""
    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": SLOW})
    path = d / "metrics.csv"
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    if damage == "cut":
        path.write_text("".join(lines[:5]) + lines[5][: len(lines[5]) // 3])
        header = len(lines[0].split(","))
        cells = len(lines[5][: len(lines[5]) // 3].split(","))
        problem = f"line 6: {cells} cells, the header {header} columns (a file cut mid-row?)"
    elif damage == "garbage":
        path.write_bytes(b"\x00garbage\nmore,garbage\n")
        problem = "is not a metrics file a run wrote: no column 'algorithm' in its header (line 1)"
    else:
        path.write_text(text.replace("eval_return", "eval_returns", 1))
        problem = (
            "is not a metrics file a run wrote: no column 'eval_return' in its header (line 1)"
        )
    for argv in (["compare", str(d)], ["plot", str(d), "--out", str(tmp_path / "p.png")]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"jaxnigt: error: {str(path)!r} {problem}"], err
    assert not (d / "compare.json").exists() and not (tmp_path / "p.png").exists()


def test_compare_of_a_run_being_written_names_the_writer(tmp_path, capsys):
    """Not "unfinished: resume it" while a process writes it: as ``run --overwrite`` says."""
    import os

    from jaxnigt.run import run_dir

    d = _write_run(tmp_path / "r", {"rennala_nigt": FAST, "afedpg": SLOW}, done=False)
    with run_dir.run_lock(d):
        assert cli.main(["compare", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"jaxnigt: error: {str(d)!r} is being written by another jaxnigt process (pid "
        f"{os.getpid()}; lock {str(d / run_dir.LOCK)!r}); wait for it to end or stop it first"
    ]
    assert not (d / "compare.json").exists()
