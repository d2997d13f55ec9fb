"""scripts/paper/adastop_check.py: the AdaStop cross-check's adapter on constructed data: which
side AdaStop's decision names, no side between identical agents, and censored times as the
restricted time (the budget)."""

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("adastop")  # the optional `paper` extra

from paper import adastop_check

from jaxnigt.analysis.run_data import Method, Run

FEW = 100  # permutations: enough for n = 5 at alpha 0.05 over two interims, and fast


def _adastop(values, K=2, alpha=0.05):
    return adastop_check.adastop(values, K, alpha=alpha, B=FEW)["comparisons"]


def test_clearly_different_agents_are_decided_on_the_right_side():
    rng = np.random.default_rng(0)
    good, bad = rng.normal(3.0, 1.0, size=10), rng.normal(0.0, 1.0, size=10)
    ahead = _adastop({"ref": good, "base": bad})["base"]
    assert ahead["decision"] == "larger" and ahead["ahead"] == adastop_check.REFERENCE
    assert ahead["seeds"] == 5  # decided at the first interim
    behind = _adastop({"ref": bad, "base": good})["base"]
    assert behind["decision"] == "smaller" and behind["ahead"] == adastop_check.BASELINE
    # the reference against two baselines: each comparison on its own side
    both = _adastop({"ref": good, "worse": bad, "better": good + 3.0})
    assert both["worse"]["ahead"] == "reference" and both["better"]["ahead"] == "baseline"


def test_identical_agents_get_no_side():
    values = np.random.default_rng(1).normal(size=10)
    r = adastop_check.adastop({"ref": values, "base": values.copy()}, 2, alpha=0.05, B=FEW)
    row = r["comparisons"]["base"]
    assert row["decision"] == "equal" and row["ahead"] is None and row["seeds"] == 10
    assert [t["decisions"]["base"] for t in r["trace"]] == ["continue", "equal"]
    # the same distribution (not the same draws): still no side at these values
    other = np.random.default_rng(2).normal(size=10)
    assert _adastop({"ref": values, "base": other})["base"]["ahead"] is None
    # fewer seeds than K interims need: undecided, AdaStop would continue
    early = _adastop({"ref": values[:5], "base": values[:5].copy()})["base"]
    assert (early["decision"], early["seeds"], early["ahead"]) == ("continue", 5, None)


def test_times_are_restricted_to_the_budget_and_negated():
    t = adastop_check.restricted_time(np.array([10.0, math.inf, 250.0]), budget=200.0)
    np.testing.assert_array_equal(t, [-10.0, -200.0, -200.0])


def _method(name: str, times, budget: float) -> Method:
    """Seeds whose return jumps from 0 to 1 at ``times`` (``inf``: never)."""
    curves = []
    for x in times:
        xs = np.array([0.0, x, budget] if math.isfinite(x) else [0.0, budget])
        ys = np.array([0.0, 1.0, 1.0] if math.isfinite(x) else [0.0, 0.0])
        curves.append((xs, ys))
    k = len(times)
    z = np.zeros(k)
    return Method(name, name, 0, 0.1, 0.1, tuple(range(k)), tuple(curves), {}, z, z, z, ())


def test_a_time_statistic_reaches_adastop_as_the_negated_restricted_time():
    budget = 100.0
    fast = [5.0, 6.0, 7.0, 8.0, 9.0, 5.5, 6.5, 7.5, 8.5, 9.5]
    slow = [40.0, math.inf, 45.0, 42.0, math.inf, 41.0, 43.0, 44.0, math.inf, 46.0]
    third = [20.0] * 10
    run = Run(
        Path("constructed"),
        None,
        budget,
        {n: _method(n, t, budget) for n, t in (("ref", fast), ("base", slow), ("other", third))},
    )
    values = adastop_check.per_seed(run, "ref", ["ref", "base"], "time_to_80")
    np.testing.assert_array_equal(values["ref"], [-x for x in fast])
    np.testing.assert_array_equal(values["base"], [-min(x, budget) for x in slow])
    assert values.keys() == {"ref", "base"}  # the other method only pools the target
    once = adastop_check.per_seed(run, "ref", ["ref", "base"], "time_to_80", final_target=True)
    np.testing.assert_array_equal(once["base"], values["base"])  # one target here
    # the faster reference has the larger mean: AdaStop names it ahead
    assert _adastop(values)["base"]["ahead"] == adastop_check.REFERENCE


def test_agreement_and_the_page():
    assert adastop_check.fourth_direction("reference ahead") == "reference"
    assert adastop_check.fourth_direction("baseline ahead") == "baseline"
    assert adastop_check.fourth_direction("equivalent within the margin") is None
    assert adastop_check.adastop_alpha(0.10) == pytest.approx(0.05)
    row = {
        "decision": "larger",
        "seeds": 15,
        "ahead": "reference",
        "nominal": {"decision": "larger", "seeds": 10, "ahead": "reference"},
        "final_target": {"decision": "larger", "seeds": 15, "ahead": "reference"},
        "stability": 1.0,
        "agree": True,
        "fourth": {"verdict": "confirmed", "seeds": 40, "ahead": "reference", "same_data": True},
    }
    result = {
        "scenario": "s",
        "reference": "r",
        "statistic": "time_to_80",
        "cap": 40,
        "stability_seeds": 20,
        "comparisons": {"b": row},
    }
    page = adastop_check.markdown([result], "python scripts/paper adastop s")
    assert "`python scripts/paper adastop s`" in page
    assert (
        "| s | r vs b | time_to_80 | confirmed (40 seeds) | r ahead (larger, 15 seeds) "
        "| yes | r ahead (larger, 10 seeds) | same | 1.00 |"
    ) in page
