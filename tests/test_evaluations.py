"""Tests for jaxnigt.run.evaluations: which step of each seed an evaluation belongs to."""

import numpy as np

from jaxnigt.run import evaluations


def test_evaluation_belongs_to_each_seeds_last_active_step():
    active = np.array([[True, True, True], [True, False, False], [False, False, False]])
    returns = np.array([[1.0, 3.0, 5.0, 7.0], [2.0, 2.0, 4.0, 4.0], [9.0, 9.0, 9.0, 9.0]])
    cols = evaluations.evaluation_columns(active, returns.astype(np.float32), np.array([0, 1]), 2)
    ev = cols["eval_return"]
    np.testing.assert_array_equal(ev[0], [np.nan, np.nan, 4.0])
    np.testing.assert_array_equal(ev[1], [3.0, np.nan, np.nan])
    assert np.isnan(ev[2]).all()  # not active in this chunk: not evaluated
    # episode e has type e mod 2
    np.testing.assert_array_equal(cols["eval_type0"][0], [np.nan, np.nan, 3.0])
    np.testing.assert_array_equal(cols["eval_type1"][0], [np.nan, np.nan, 5.0])
    one = evaluations.evaluation_columns(active, returns.astype(np.float32), np.zeros(2, int), 1)
    assert set(one) == {"evaluated", "eval_return"}


def test_heterogeneous_evaluation_weights_types_by_their_workers():
    """J = (1/n) Σ_i J_i: workers [0, 1, 0] weigh type 0 by 2/3 and type 1 by 1/3, although
    evaluation episodes alternate types 0, 1, 0, 1."""
    active = np.ones((1, 2), bool)
    returns = np.array([[1.0, 10.0, 3.0, 20.0]], np.float32)  # type 0: 1, 3; type 1: 10, 20
    cols = evaluations.evaluation_columns(active, returns, np.array([0, 1, 0]), 2)
    assert cols["eval_type0"][0, 1] == 2.0 and cols["eval_type1"][0, 1] == 15.0
    np.testing.assert_allclose(cols["eval_return"][0, 1], 2 / 3 * 2.0 + 1 / 3 * 15.0, rtol=1e-6)
    np.testing.assert_array_equal(cols["evaluated"], [[False, True]])
    # balanced types: the plain mean of the episodes
    even = evaluations.evaluation_columns(active, returns, np.array([0, 1]), 2)["eval_return"]
    np.testing.assert_allclose(even[0, 1], returns.mean(), rtol=1e-6)


def test_the_row_of_time_zero_and_each_seeds_latest_evaluation():
    row = evaluations.initial_metrics(2, 3)
    assert row["active"].shape == (2, 1) and row["active"].all()
    assert row["worker_counts"].shape == (2, 1, 3) and not row["sim_time"].any()
    values = np.array([[1.0, np.nan, 3.0, np.nan], [np.nan, np.nan, np.nan, np.nan]])
    np.testing.assert_array_equal(evaluations.last_finite(values), [3.0, np.nan])
