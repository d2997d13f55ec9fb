"""Tests for jaxnigt.run.metrics: CSV columns and rows, reading back, curves, summaries."""

import numpy as np
import pytest

from jaxnigt.algorithms.core import StepMetrics
from jaxnigt.analysis import stats, verdicts
from jaxnigt.run import metrics


def _rows():
    rows = []
    # Two seeds; eval at t = 0, 10, 20 with returns rising; seed 1 reaches 5 later.
    for seed, values in ((0, [0.0, 5.0, 6.0]), (1, [1.0, 2.0, 5.0])):
        for t, v in zip((0.0, 10.0, 20.0), values, strict=True):
            rows.append(
                {
                    "algorithm": "a",
                    "grid": 0,
                    "seed": seed,
                    "sim_time": f"{t}",
                    "eval_return": f"{v}",
                    "learning_rate": 0.1,
                    "eta": 0.5,
                }
            )
    return rows


def test_summarize_final_best_and_time_to_target():
    s = metrics.summarize(_rows(), target=5.0)["a"]
    assert s["seeds"] == 2
    assert s["final_median_return"] == pytest.approx(5.5)
    # median curve: t=0 -> 0.5, t=10 -> 3.5, t=20 -> 5.5
    assert s["best_median_return"] == pytest.approx(5.5)
    assert s["time_to_target"] == pytest.approx(20.0)
    assert s["largest_eval_gap"] == 10.0  # evaluations at 0, 10, 20
    assert metrics.summarize(_rows(), target=100.0)["a"]["time_to_target"] is None


def test_summarize_reports_the_total_worker_time_where_the_rows_have_it():
    rows = _rows()
    for r in rows:  # three workers always busy, seed 1 slower to spend it (a different cost)
        r["round"] = int(float(r["sim_time"]) // 10)
        r["worker_time"] = f"{float(r['sim_time']) * (3.0 if r['seed'] == 0 else 2.0)}"
    s = metrics.summarize(rows, target=5.0)["a"]
    # final: 60 and 40; to 5.0: seed 0 at t = 10 (30), seed 1 at t = 20 (40): upper median 40
    assert s["final_worker_time"] == 50.0 and s["worker_time_to_target"] == 40.0
    assert metrics.summarize(rows, target=100.0)["a"]["worker_time_to_target"] is None
    assert "worker_time_to_target" not in metrics.summarize(rows, target=None)["a"]
    # a run written before the column: nothing of it
    old = metrics.summarize(_rows(), target=5.0)["a"]
    assert "final_worker_time" not in old and "worker_time_to_target" not in old


def test_median_curve_is_a_step_function_of_the_seeds():
    seeds = {
        0: (np.array([0.0, 10.0]), np.array([1.0, 3.0])),
        1: (np.array([5.0]), np.array([2.0])),
    }
    xs, med = metrics.median_curve(seeds)
    np.testing.assert_array_equal(xs, [0.0, 5.0, 10.0])
    # seed 1 has no value before t = 5 (NaN is ignored by the median)
    np.testing.assert_array_equal(med, [1.0, 1.5, 2.5])
    assert metrics.time_to_target(xs, med, 2.0) == 10.0


def test_columns_follow_step_metrics():
    fields = [f for f in StepMetrics._fields if f not in ("overflow", "nonfinite", "worker_counts")]
    assert [c for c in metrics.COLUMNS if c not in (*metrics.ID_COLUMNS, "eval_return")] == fields
    i = metrics.COLUMNS.index("eval_return")
    assert metrics.COLUMNS[i - 1] == "train_return"


def test_metric_rows_drop_inactive_steps_and_format_numbers(tmp_path):
    B, R = 2, 3
    m = {c: np.full((B, R), 0.5, np.float32) for c in metrics.PER_ROUND}
    m["round"] = np.tile(np.arange(R, dtype=np.int32), (B, 1))
    m["eval_return"][:, 1] = np.nan
    m["eval_type0"] = np.full((B, R), 1.25, np.float32)
    m["active"] = np.array([[True, True, True], [True, False, False]])
    m.update(grid=np.zeros(B), seed=np.arange(B), learning_rate=np.full(B, 0.1), eta=np.ones(B))
    rows = metrics.metric_rows("x", m)
    assert [(r["seed"], r["round"]) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert rows[1]["eval_return"] == "" and rows[0]["sim_time"] == "0.5"
    metrics.write_csv(tmp_path / "metrics.csv", rows)
    back = metrics.read_metrics(tmp_path)
    header = list(back[0])
    assert header[: len(metrics.COLUMNS)] == list(metrics.COLUMNS) and header[-1] == "eval_type0"
    assert np.isnan(back[1]["eval_return"]) and back[3]["eval_type0"] == 1.25
    assert metrics.read_metrics_raw(tmp_path / "nowhere") == []
    with pytest.raises(FileNotFoundError, match="run directory"):
        metrics.read_metrics(tmp_path / "nowhere")


def test_group_curves_and_resample():
    rows = [
        {"algorithm": "a", "grid": 0, "seed": 0, "t": 0.0, "y": "1"},
        {"algorithm": "a", "grid": 0, "seed": 0, "t": 2.0, "y": ""},
        {"algorithm": "a", "grid": 0, "seed": 0, "t": 3.0, "y": "4"},
    ]
    curves = metrics.group_curves(rows, x="t", y="y")
    xs, ys = curves[("a", 0)][0]
    np.testing.assert_array_equal(xs, [0.0, 3.0])
    resampled = metrics.resample(xs, ys, np.array([-1.0, 0.0, 2.9, 3.0]))
    np.testing.assert_array_equal(resampled, [np.nan, 1.0, 1.0, 4.0])


def test_worker_count_rows_sum_each_evaluation_interval():
    B, R = 1, 6
    counts = np.array([[[0, 0], [3, 1], [2, 2], [4, 0], [1, 1], [9, 9]]], np.float32)
    m = {
        "worker_counts": counts,
        "evaluated": np.array([[True, False, True, False, True, False]]),
        "active": np.array([[True, True, True, True, True, False]]),  # step 5: after budget
        "round": np.arange(R)[None],
        "sim_time": np.arange(R, dtype=np.float32)[None] * 1.5,
    }
    m.update(grid=np.zeros(B), seed=np.zeros(B), learning_rate=np.ones(B), eta=np.ones(B))
    rows = metrics.worker_count_rows("x", m)
    assert [(r["round"], r["sim_time"], r["w0"], r["w1"]) for r in rows] == [
        (2, "3", 5, 3),  # steps 1, 2
        (4, "6", 5, 1),  # steps 3, 4
    ]
    assert (
        metrics.worker_count_rows("x", {k: v for k, v in m.items() if k != "worker_counts"}) == []
    )


def test_curve_average_is_the_time_average_of_the_step_curve():
    xs, ys = np.array([0.0, 2.0, 5.0, 20.0]), np.array([1.0, 3.0, -1.0, 100.0])
    # 1 on [0, 2), 3 on [2, 5), -1 on [5, 10): (2 + 9 - 5) / 10
    assert stats.average_return(xs, ys, 10.0) == pytest.approx(0.6)
    assert np.isnan(stats.average_return(np.array([1.0]), np.array([1.0]), 10.0))


def test_bootstrap_interval_covers_the_difference_of_means():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 0.5, 40), rng.normal(0.0, 0.5, 40)
    diff = lambda x, y: x.mean() - y.mean()
    est, low, high = verdicts.bootstrap_interval(diff, a, b, reps=500)
    assert est == pytest.approx(a.mean() - b.mean())
    assert low < est < high and 0.0 < low  # a clear difference excludes a tie
    same = verdicts.bootstrap_interval(diff, a, a.copy(), reps=500)
    assert same[1] < 0.0 < same[2]
    # deterministic given its seed
    assert verdicts.bootstrap_interval(diff, a, b, reps=200) == verdicts.bootstrap_interval(
        diff, a, b, reps=200
    )
