"""Tests for jaxnigt.analysis.looks: restricted times, the median convention, the decisive
looks, and one look's fields against hand computations."""

import math

import chex
import numpy as np
import pytest

from jaxnigt.analysis import looks


def test_a_never_reached_seed_counts_at_the_budget():
    chex.assert_trees_all_close(
        looks.restricted(np.array([2.0, np.inf, 7.0, 12.0]), 10.0), np.array([2.0, 10, 7, 10])
    )


def test_the_median_ratio_uses_the_mean_of_the_two_middle_values():
    # reference medians: (2 + 4) / 2 = 3; baseline: (6 + 8) / 2 = 7
    assert looks.median_ratio(np.array([1.0, 2, 4, 9]), np.array([5.0, 6, 8, 9])) == 7 / 3
    assert looks.median_ratio(np.array([math.inf] * 2), np.array([math.inf] * 2)) == 1.0
    assert looks.median_ratio(np.array([1.0, 2.0]), np.array([1.0, math.inf])) == math.inf


@pytest.mark.parametrize(
    "stages, decisive",
    [((5, 10, 20, 40), (10, 20, 40)), ((5, 10), (10,)), ((5, 10, 20), (10, 20)), ((3, 4), ())],
)
def test_alpha_is_split_over_the_looks_that_can_reach_it(stages, decisive):
    got = looks.decisive_stages(stages, 0.10, looks.paired_p_min)
    assert got == decisive
    for k in got:  # every decisive look can reach its share of alpha
        assert looks.paired_p_min(k) <= 0.10 / len(got)


def test_a_time_look_tests_restricted_times_and_reports_rmst():
    """Budget 10; the reference reaches the target at 1, 2, 3, 4, 5, 6; the baseline at 3,
    never, 5, 6, never, 9: restricted 3, 10, 5, 6, 10, 9 (mean 43/6); the reference's mean is
    21/6: the RMST ratio is 43/21.  The effect is the ratio of geometric means,
    (3·10·5·6·10·9 / 6!)^(1/6) = 112.5^(1/6); every log ratio positive: p = 2 / 2^6."""
    ref = np.array([1.0, 2, 3, 4, 5, 6])
    base = np.array([3.0, np.inf, 5, 6, np.inf, 9])
    one = looks.look("time", ref, base, paired=True, level=0.9, margin=(0.8, 1.25), budget=10.0)
    assert one["interval"]["estimate"] == pytest.approx(112.5 ** (1 / 6))
    assert one["rmst_ratio"]["estimate"] == pytest.approx(43 / 21)
    assert one["p"] == pytest.approx(2 / 2**6) == one["p_min"]
    assert one["rmst"] == pytest.approx({"reference": 21 / 6, "baseline": 43 / 6})
    assert one["reached"] == {"reference": 6, "baseline": 4, "seeds": 6}
    assert one["interval"]["low"] > 1.0  # p = 1/32 <= 0.10: the inverted interval excludes 1
    assert one["tost_p"] > 0.10  # 2.2x is no equivalence within [0.8, 1.25]
    assert one["rmst_difference"]["estimate"] == pytest.approx(22 / 6)


def test_a_return_look_is_the_mean_difference_and_its_equivalence():
    x = np.array([1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98, 1.01, 0.99])
    one = looks.look("return", x, x - 0.001, paired=True, level=0.9, margin=(-0.5, 0.5))
    assert one["interval"]["estimate"] == pytest.approx(0.001)
    assert one["tost_p"] == pytest.approx(1 / 2**10)  # both one-sided tests at their extreme
