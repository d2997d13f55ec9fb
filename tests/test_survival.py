"""Tests for jaxnigt.analysis.survival: the Kaplan–Meier curve against a hand computation on
a censored sample, its restricted mean, and the drawing's artists."""

import math

import chex
import numpy as np
import pytest

from jaxnigt.analysis import survival


def test_the_curve_is_the_product_limit_estimate_by_hand():
    """Six seeds, budget 10: reached at 1, 3, 3, 5; two never (censored at 10).  By hand:
    at 1 one of 6 reaches -> 1 - 5/6 = 1/6; at 3 two of the 5 left -> 1 - (5/6)(3/5) = 1/2;
    at 5 one of 3 -> 1 - (1/2)(2/3) = 2/3; then flat to the budget."""
    times = np.array([3.0, 1.0, np.inf, 5.0, 3.0, 12.0])  # 12 > B: not reached by the budget
    c = survival.kaplan_meier(times, 10.0)
    assert (c["seeds"], c["censored"], c["budget"]) == (6, 2, 10.0)
    corners = dict(zip(c["time"], c["reached"], strict=True))
    chex.assert_trees_all_close(
        [corners[0.0], corners[1.0], corners[3.0], corners[5.0]], [0.0, 1 / 6, 1 / 2, 2 / 3]
    )
    assert survival.share_at(c, 0.5) == 0.0 and survival.share_at(c, 4.0) == pytest.approx(0.5)
    assert survival.share_at(c, 10.0) == pytest.approx(2 / 3)
    # the area above the curve up to B is mean(min(T, B)) = (3 + 1 + 10 + 5 + 3 + 10) / 6
    assert survival.restricted_mean(c) == pytest.approx(32 / 6)


def test_no_seed_at_the_target_is_a_flat_curve_at_zero():
    c = survival.kaplan_meier(np.array([math.inf, math.inf]), 5.0)
    assert c["reached"] == [0.0] and c["censored"] == 2
    assert survival.restricted_mean(c) == 5.0


def test_the_plot_draws_each_methods_steps_to_the_budget(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    curves = {
        "fast": survival.kaplan_meier(np.array([1.0, 2.0, 2.0, np.inf]), 4.0),
        "slow": survival.kaplan_meier(np.array([3.0, np.inf, np.inf, np.inf]), 4.0),
    }
    seen = {}
    real = plt.close
    plt.close = lambda fig: seen.setdefault("fig", fig)  # keep the figure to read its artists
    try:
        path = survival.plot(curves, tmp_path / "km.png", target=-3.0)
    finally:
        plt.close = real
    assert path.is_file() and path.stat().st_size > 0
    lines = [ln for ln in seen["fig"].axes[0].get_lines() if ln.get_label().startswith("fast")]
    chex.assert_trees_all_close(list(lines[0].get_xdata()), [0.0, 1.0, 2.0, 4.0, 4.0])
    chex.assert_trees_all_close(list(lines[0].get_ydata()), [0.0, 0.25, 0.75, 0.75, 0.75])
    assert lines[0].get_label() == "fast (3/4 seeds)"
