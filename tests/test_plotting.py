"""Tests for jaxnigt.run.plots: step-function resampling and grouping of metric rows."""

import numpy as np

from jaxnigt.run.metrics import group_curves, resample


def test_resample_is_last_value_at_or_before():
    xs = np.array([0.0, 2.0, 5.0])
    ys = np.array([1.0, 3.0, 7.0])
    out = resample(xs, ys, np.array([-1.0, 0.0, 1.9, 2.0, 4.0, 5.0, 9.0]))
    np.testing.assert_array_equal(out, [np.nan, 1.0, 1.0, 3.0, 3.0, 7.0, 7.0])


def test_group_curves_skips_missing_values():
    rows = [
        {"algorithm": "a", "grid": 0, "seed": 0, "sim_time": "0", "eval_return": "1"},
        {"algorithm": "a", "grid": 0, "seed": 0, "sim_time": "1", "eval_return": ""},
        {"algorithm": "a", "grid": 0, "seed": 0, "sim_time": "2", "eval_return": "3"},
        {"algorithm": "a", "grid": 0, "seed": 1, "sim_time": "0", "eval_return": "2"},
        {"algorithm": "b", "grid": 1, "seed": 0, "sim_time": "0", "eval_return": "5"},
    ]
    g = group_curves(rows, x="sim_time", y="eval_return")
    assert set(g) == {("a", 0), ("b", 1)}
    np.testing.assert_array_equal(g[("a", 0)][0][0], [0.0, 2.0])
    np.testing.assert_array_equal(g[("a", 0)][0][1], [1.0, 3.0])
    assert set(g[("a", 0)]) == {0, 1}
