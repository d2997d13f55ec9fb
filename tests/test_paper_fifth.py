"""Tests for scripts/paper/fifth.py: the fifth edition's caps and fixed targets, its analysis
of stored blocks under the rule, the stability re-decision and the split null."""

import itertools
import json
import math

import numpy as np
import pytest
from paper import fifth, fourth

from jaxnigt.analysis import looks, sequential


def test_caps_and_blocks_raise_reacher_to_40_and_locomotion_to_20():
    assert fifth.blocks("reacher_sqrt")[-1] == (20, 40)
    assert fifth.blocks("hopper_sqrt_dim")[-1] == (10, 20)
    assert fifth.blocks("point_mass_sqrt")[-1] == (20, 40)
    assert set(fifth.names()) <= set(fourth.SCENARIOS)


def test_the_target_is_the_tuning_looks_and_an_outage_scenario_takes_its_bases():
    third = json.loads((fourth.THIRD_DOCS / "point_mass_sqrt_dim.json").read_text())
    look = third["sizing"]["look_target"]
    t = fifth.fixed_target("point_mass_sqrt_dim")
    assert t["value"] == look["value"] and t["from"] == "point_mass_sqrt_dim"
    assert t["value"] == pytest.approx(t["R0"] + t["fraction"] * (t["R_best"] - t["R0"]))
    assert fifth.fixed_target("point_mass_sqrt_dim_outages") == {**t}


def test_a_stored_scenario_is_decided_by_the_exact_rule_at_its_decisive_looks(tmp_path):
    """point_mass_hetero: 10 stored seeds; the look at 5 decides nothing (1/16 > 0.10/3);
    the look at 10's p is the share of the 2^10 sign patterns of the per-seed differences
    (counted one by one here) at least as far from 0 as the observed sum."""
    r = fifth.analyze("point_mass_hetero", tmp_path)
    row = r["comparisons"]["afedpg"]
    assert row["decisive"] == [10, 20, 40]
    assert row["looks"][0]["outcome"] == sequential.NOT_DECISIVE
    last = row["looks"][-1]
    x, y = (np.asarray(last["values"][k]) for k in ("reference", "baseline"))
    d = x - y
    sums = np.array([np.dot(signs, d) for signs in itertools.product((1, -1), repeat=d.size)])
    assert last["p"] == pytest.approx(np.mean(np.abs(sums) >= abs(d.sum()) - 1e-9))
    assert last["p"] <= 0.10 / 3 and d.mean() > 0
    assert row["verdict"] == "confirmed" and row["seeds"] == 10
    km = r["kaplan_meier"]
    assert km["target"] == fifth.fixed_target("point_mass_hetero")["value"] and km["seeds"] == 10
    # the stability check re-decides the deciding look from its values under other seeds
    assert fifth.decide_again(last, looks.RETURN, row["level"], seed=7) == last["outcome"]
    # decided at 10: no later block is needed for it
    assert not fifth.needs_stage("point_mass_hetero", (10, 20), tmp_path)


def test_the_json_holds_infinities_as_strings_and_reads_them_back(tmp_path):
    data = {"a": [math.inf, -math.inf, 1.5], "b": {"c": np.float64(2.0)}}
    text = json.dumps(fifth._finite(data))
    assert "Infinity" not in text and "NaN" not in text
    assert fifth.unfinite(json.loads(text)) == {"a": [math.inf, -math.inf, 1.5], "b": {"c": 2.0}}


def test_the_split_null_of_real_seeds_errs_at_most_at_its_level(tmp_path):
    """AFedPG's 40 seeds at n = 100, times to the fixed target (many never reached), split at
    random into pseudo-methods of 20: a side ahead at most 10 % + 3 Monte Carlo errors."""
    r = fifth.null("point_mass_n100", experiments=100, out=tmp_path)
    afedpg = r["methods"]["afedpg"]
    assert r["seeds"] == 40
    assert afedpg["ahead_either_side"] <= 0.10 + 3 * math.sqrt(0.10 * 0.90 / 100)
