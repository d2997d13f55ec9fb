"""Tests for jaxnigt.analysis.error_rate: the staged rule (exact sign-flip looks, decisive
looks at alpha / K, TOST equivalence) simulated on synthetic and on split real-like values
(the test suite's sizes; the full grid is ``python -m jaxnigt.cli.error_rate --suite``)."""

import json
import math

import numpy as np
import pytest

from jaxnigt.analysis import error_rate, run_data
from jaxnigt.analysis.sequential import EQUIVALENT, UNDECIDED
from jaxnigt.analysis.verdicts import BASELINE_AHEAD, REFERENCE_AHEAD


def bound(n: int, level: float = 0.10) -> float:
    """The level plus 3 Monte Carlo standard errors of a rate at the level."""
    return level + 3 * math.sqrt(level * (1 - level) / n)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small suite, run once through the command line, its JSON file read back."""
    out = tmp_path_factory.mktemp("sim") / "simulation.json"
    from jaxnigt.cli import error_rate as command  # python -m jaxnigt.cli.error_rate

    assert command.main(["--small", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_the_small_suites_nulls_hold_the_level_at_every_look_and_overall(small):
    """Identical laws: "a side ahead" at most 10 % plus 3 Monte Carlo SEs overall and by
    every look, in regimes that include heavy censoring (70 %), evaluation-grid ties and
    pair correlation 0.9, to 20 and to 40 seeds; the 5-seed look decides nothing."""
    assert small["command"] == "python -m jaxnigt.cli.error_rate --small --out " + str(
        small["command"].split()[-1]
    )
    nulls = [r for r in small["rows"] if r["part"] == "null"]
    heavy = {"sigma": 1.3, "rho": 0.9, "censored": 0.7, "grid": 0.02}
    assert {tuple(r["stages"]) for r in nulls if r["regime"] == heavy} == {
        (5, 10, 20),
        (5, 10, 20, 40),
    }
    for r in nulls:
        assert r["ahead_either_side"] <= bound(r["experiments"])
        for look in r["per_look"].values():
            assert look["ahead_by"] <= bound(r["experiments"])
        assert r["per_look"]["5"] == {"ahead": 0.0, "ahead_by": 0.0, "ahead_by_se": 0.0,
                                      "equivalent": 0.0}  # fmt: skip
        assert sum(r["fractions"].values()) == pytest.approx(1.0)
    assert small["summary"]["worst_null"]["rate"] == max(r["ahead_either_side"] for r in nulls)


def test_the_single_20_seed_look_finds_a_15x_speedup_with_60_percent_censored(small):
    """Point 3 (log-time spread 1.3, ρ = 0.5, 2 % grid, 60 % of the baseline censored, 20
    paired seeds, two-sided 10 %): the fourth edition's test found the 1.5x speed-up 3 % of
    the time; the exact test finds it more often, beyond 3 Monte Carlo SEs."""
    (power,) = [r for r in small["rows"] if r["part"] == "power"]
    assert power["stages"] == [20] and power["look_alpha"] == pytest.approx(0.10)
    assert power["regime"] == {"sigma": 1.3, "rho": 0.5, "censored": 0.6, "grid": 0.02}
    found = power["fractions"][REFERENCE_AHEAD]
    assert found - 3 * power["monte_carlo_se"] > 0.03
    assert power["fractions"][BASELINE_AHEAD] <= 0.02
    assert 1.0 < power["true_rmst_ratio"] < 1.5  # censoring pulls the estimand towards 1


def test_the_10_seed_looks_null_rate_is_the_sign_flip_tests_exact_size():
    """Continuous symmetric differences: every sign pattern is equally likely, so the
    10-seed look at alpha / K = 0.1 / 3 rejects with probability floor(2^9 / 30) / 2^9 =
    17 / 512 (≤ 1/30) exactly; the first decisive look of 5/10/20/40 is 10."""
    spec = error_rate.spec_of(1, stages=(5, 10, 20, 40))
    assert spec["decisive"] == [10, 20, 40] and spec["look_alpha"] == pytest.approx(0.1 / 3)
    exact = math.floor(2**9 / 30) / 2**9
    assert exact == 17 / 512 <= 0.1 / 3
    n = 3000
    r = error_rate.simulate(
        n, stages=(5, 10, 20, 40), available=10, regime=error_rate.Regime(1.0, 0.3)
    )
    assert r["mean_seeds"] == 10
    assert abs(r["per_look"]["10"]["ahead"] - exact) <= 3.5 * math.sqrt(exact * (1 - exact) / n)


def test_the_rule_on_hand_made_values():
    """All ten baseline times longer: p = 2/1024 at the 10-seed look (reference ahead);
    identical values (or all never reached): equivalent at 10; 5 seeds: no decisive look."""
    ref = np.arange(1.0, 41.0)
    rule = error_rate.staged_rule
    kw = {"stages": (5, 10, 20, 40), "margin": (0.8, 1.25), "budget": 100.0}
    assert rule("time", ref, ref * 1.5, **kw) == (REFERENCE_AHEAD, 10)
    assert rule("time", ref * 1.5, ref, **kw) == (BASELINE_AHEAD, 10)
    assert rule("time", ref, ref.copy(), **kw) == (EQUIVALENT, 10)
    never = np.full(40, np.inf)
    assert rule("time", never, never, **kw) == (EQUIVALENT, 10)
    assert rule("time", ref, ref * 1.5, **kw, available=9) == (UNDECIDED, 0)
    assert rule("return", ref, ref - 1, stages=(10,), margin=None) == (REFERENCE_AHEAD, 10)


def test_the_synthetic_law_censors_the_baselines_share_on_the_grid():
    """B is the baseline's quantile at 1 − censored: that share of its seeds never reaches the
    target, fewer of a 1.5x faster reference's; finite times lie on the 2 % grid of B; with no
    censoring B is infinite and the restricted-mean ratio is the speed-up itself."""
    regime = error_rate.Regime(1.3, 0.5, 0.6, 0.02)
    rng = np.random.default_rng(0)
    ref, base, budget = error_rate.draw(rng, regime, 20000, kind="time", effect=1.5)
    assert np.isinf(base).mean() == pytest.approx(0.6, abs=0.015)
    assert np.isinf(ref).mean() < 0.5
    steps = base[np.isfinite(base)] / (0.02 * budget)
    assert np.allclose(steps, np.round(steps)) and steps.max() <= 50 + 1e-9
    assert error_rate.budget_of(error_rate.Regime(1.3)) == math.inf
    assert error_rate.true_rmst_ratio(error_rate.Regime(0.5, 0.5), 1.5) == pytest.approx(
        1.5, rel=0.01
    )


def test_a_null_split_from_real_values_counts_the_rules_errors():
    """Values with most seeds never reaching the target (as AFedPG's at n = 100): halves of
    one method's seeds are two pseudo-methods of one law; the rule rarely separates them.
    The fourth edition's call (with ``reps``) still works."""
    rng = np.random.default_rng(2)
    times = np.where(rng.uniform(size=40) < 0.55, np.inf, np.round(rng.lognormal(3, 1, 40)))
    r = error_rate.split_null(times, ratio=True, experiments=200, reps=200, seed=1)
    assert r["looks"] == [5, 10, 20] and r["decisive"] == [10, 20]
    assert r["never_reached"] == int(np.isinf(times).sum())
    assert r["budget"] == times[np.isfinite(times)].max()
    assert r["ahead_either_side"] <= bound(200)
    assert sum(r["fractions"].values()) == pytest.approx(1.0)
    returns = rng.normal(0.0, 1.0, 20)
    small = error_rate.split_null(
        returns, ratio=False, stages=(5, 10, 20), margin=(-0.1, 0.1), experiments=50
    )
    assert (
        small["looks"] == [5, 10]
        and small["decisive"] == [10]
        and 0 <= small["ahead_either_side"] <= 1
    )
    with pytest.raises(run_data.AnalysisError, match="below the first look"):
        error_rate.split_null(returns[:8], ratio=False)
