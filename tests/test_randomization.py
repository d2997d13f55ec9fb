"""Tests for jaxnigt.analysis.randomization against independent references: brute-force
enumeration of every sign pattern or split, and scipy.stats.permutation_test."""

import itertools
import math

import chex
import numpy as np
import pytest
from scipy import stats as sps

from jaxnigt.analysis import randomization as rz


def _brute_sign_flip(d, alternative):
    """Every one of the 2^n sign patterns, counted one by one."""
    s = d.sum()
    sums = np.array([np.dot(signs, d) for signs in itertools.product((1, -1), repeat=d.size)])
    tol = 1e-9 * np.abs(d).sum()
    if alternative == "greater":
        return np.mean(sums >= s - tol)
    if alternative == "less":
        return np.mean(sums <= s + tol)
    return min(1.0, np.mean(np.abs(sums) >= abs(s) - tol))


@pytest.mark.parametrize("alternative", rz.ALTERNATIVES)
@pytest.mark.parametrize("n", [2, 6, 11])
def test_sign_flip_p_is_the_share_of_all_sign_patterns(n, alternative):
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.3, 1.0, n), 1)  # rounded: ties between sums are counted too
    p = rz.sign_flip_p(d, alternative)
    assert p == pytest.approx(_brute_sign_flip(d, alternative), abs=1e-12)
    # and what scipy's exact paired permutation test gives on the same pairs
    x, y = d + 5.0, np.full(n, 5.0)
    ref = sps.permutation_test(
        (x, y), lambda a, b, axis: np.mean(a - b, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=np.inf, alternative=alternative,
    ).pvalue  # fmt: skip
    assert p == pytest.approx(ref, abs=1e-12)


def test_the_smallest_p_is_two_in_two_to_the_n_and_zeros_do_not_count():
    assert rz.smallest_p(5) == rz.sign_flip_p(np.ones(5)) == 1 / 16
    assert rz.smallest_p(5, "greater") == rz.sign_flip_p(np.ones(5), "greater") == 1 / 32
    with_zeros = rz.sign_flip_test(np.array([1.0, 2, 0, 0, 3]))
    assert with_zeros["p"] == with_zeros["p_min"] == 2 / 2**3 and with_zeros["exact"]
    assert rz.sign_flip_p(np.zeros(4)) == 1.0


def test_forty_pairs_are_exact_and_more_are_monte_carlo_with_a_standard_error():
    d = np.arange(1.0, 41.0)
    assert rz.sign_flip_test(d)["p"] == pytest.approx(2 / 2**40)  # the one extreme pattern
    # two halves of a permuted order give the same exact p (meet in the middle is symmetric)
    rng = np.random.default_rng(0)
    e = rng.normal(0.2, 1.0, 40)
    assert rz.sign_flip_p(e) == pytest.approx(rz.sign_flip_p(e[::-1]), abs=1e-12)
    many = rz.sign_flip_test(rng.normal(0.0, 1.0, 45))
    assert not many["exact"] and many["draws"] == rz.DRAWS and many["p_se"] > 0
    assert many["p"] >= 1 / (1 + many["draws"])  # never 0: the observed sign pattern counts


def test_a_monte_carlo_p_near_its_level_is_settled_with_more_draws():
    rng = np.random.default_rng(3)
    d = rng.normal(0.3, 1.0, 45)
    loose = rz.sign_flip_test(d)
    settled = rz.sign_flip_test(d, level=loose["p"])  # a level right at the p: must add draws
    assert settled["draws"] > loose["draws"]
    assert abs(settled["p"] - loose["p"]) > 3 * settled["p_se"] or settled["draws"] == rz.MAX_DRAWS


def test_the_independent_permutation_test_is_every_split_counted():
    x, y = np.array([3.0, 5.0, 4.0, 6.0]), np.array([1.0, 2.0, 2.5, 4.5])
    pooled = np.concatenate([x, y])
    observed = x.mean() - y.mean()
    diffs = []
    for pick in itertools.combinations(range(8), 4):
        rest = [i for i in range(8) if i not in pick]
        diffs.append(pooled[list(pick)].mean() - pooled[rest].mean())
    diffs = np.array(diffs)
    got = rz.permutation_test(x, y, "greater")
    assert got["exact"] and got["p"] == pytest.approx(np.mean(diffs >= observed - 1e-12))
    assert got["p_min"] == pytest.approx(1 / math.comb(8, 4))


@pytest.mark.parametrize("paired", [True, False])
def test_an_inverted_interval_excludes_the_tie_exactly_when_the_test_rejects(paired):
    rng = np.random.default_rng(7)
    x = rng.lognormal(0.0, 0.5, 12)
    y = x * 1.6 * rng.lognormal(0.0, 0.2, 12)
    level = 0.95
    iv = rz.ratio_interval(x, y, level, paired=paired)
    p_tie = rz.ratio_test(x, y, 1.0, paired=paired)["p"]
    assert (iv["low"] > 1.0) == (p_tie <= 1 - level)
    # at the interval's ends the test sits at its level (from inside)
    for end in (iv["low"], iv["high"]):
        inside = end * (1.0 + 1e-3 if end == iv["low"] else 1.0 - 1e-3)
        assert rz.ratio_test(x, y, inside, paired=paired)["p"] > 1 - level
    shift = rz.shift_interval(y, x, level, paired=paired)
    chex.assert_trees_all_close(shift["estimate"], float(y.mean() - x.mean()))
    assert shift["low"] < shift["estimate"] < shift["high"]


def test_five_pairs_give_no_finite_interval_at_a_level_they_cannot_reach():
    x, y = np.arange(1.0, 6.0), np.arange(1.0, 6.0) * 2
    iv = rz.ratio_interval(x, y, 0.975, paired=True)
    assert (iv["low"], iv["high"]) == (0.0, math.inf) and iv["estimate"] == 2.0
    assert rz.shift_interval(y, x, 0.975, paired=True)["low"] == -math.inf


def test_tost_is_the_larger_of_its_two_one_sided_p_values():
    rng = np.random.default_rng(2)
    x = rng.normal(0.0, 0.1, 10)
    y = x + rng.normal(0.0, 0.01, 10)
    at = lambda v, alt: rz.difference_test(x, y, paired=True, shift=v, alternative=alt)
    wide = rz.tost(at, (-1.0, 1.0))
    assert wide["p"] == max(wide["p_low"], wide["p_high"]) == pytest.approx(2 / 2**10 / 2)
    narrow = rz.tost(at, (-1e-6, 1e-6))
    assert narrow["p"] > 0.05


def test_a_seed_at_the_target_at_time_zero_gives_a_finite_ratio_interval():
    """A restricted time of 0 on both sides of a pair (both at the target at once)."""
    x = np.array([0.0, 1, 2, 3, 4, 5, 6, 7])
    y = np.array([0.0, 2, 3, 5, 6, 8, 9, 11])
    iv = rz.ratio_interval(x, y, 0.9, paired=True)
    assert iv["estimate"] == pytest.approx(44 / 28)
    assert 1.0 < iv["low"] < iv["estimate"] < iv["high"] < math.inf


def test_a_two_sided_monte_carlo_p_has_the_variance_of_twice_a_share():
    """p = 2 q with q a share of N draws: Var p = 4 q (1 - q) / N = p (2 - p) / N."""
    rng = np.random.default_rng(5)
    d = rng.normal(0.1, 1.0, 45)
    two = rz.sign_flip_test(d)
    assert two["p_se"] == pytest.approx(math.sqrt(two["p"] * (2 - two["p"]) / two["draws"]))
    one = rz.sign_flip_test(d, "greater")
    assert one["p_se"] == pytest.approx(math.sqrt(one["p"] * (1 - one["p"]) / one["draws"]))
    with pytest.raises(ValueError, match="alternative"):
        rz.sign_flip_test(d, "Greater")
