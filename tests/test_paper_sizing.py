"""scripts/paper/sizing.py: a third-edition scenario's budget and cadence from its look."""

import math

import pytest
from paper import sizing

INF = math.inf


@pytest.mark.parametrize(
    "x, up, down",
    [
        (1.0, 1.0, 1.0),
        (1.2, 1.5, 1.0),
        (534.0, 600.0, 500.0),
        (5595.0, 6000.0, 5000.0),
        (33.5, 40.0, 30.0),
        (0.07, 0.08, 0.06),
        (81.0, 100.0, 80.0),
    ],
)
def test_round_up_and_down_to_round_numbers(x, up, down):
    assert sizing.round_up(x) == pytest.approx(up)
    assert sizing.round_down(x) == pytest.approx(down)


def _speed(**times):
    return {"times": times, "target": {"value": -8.0}}


def test_budget_is_twice_the_slowest_median_rounded_up_and_at_most_the_look():
    # medians (upper, inf when most seeds never reach): 670, 1,058, 2,797
    speed = _speed(a=[600.0, 670.0], b=[1058.0, 900.0], c=[2797.0, 2000.0])
    assert sizing.medians(speed) == {"a": 670.0, "b": 1058.0, "c": 2797.0}
    assert sizing.budget_for(speed, look=8000.0) == 6000.0  # 2 x 2,797 -> 6,000
    assert sizing.budget_for(speed, look=5000.0) == 5000.0  # never past the look
    # a winner whose median never reaches the target: the look's budget
    assert sizing.budget_for(_speed(a=[600.0, 670.0], c=[INF, INF]), look=8000.0) == 8000.0


def test_cadence_gives_100_evaluations_and_20_before_the_fastest_median():
    speed = _speed(a=[600.0, 670.0], c=[2797.0, 2000.0])
    assert sizing.cadence(speed, 6000.0) == 30.0  # min(60, 670 / 20 = 33.5) -> 30
    assert sizing.cadence(_speed(a=[4000.0, 4000.0]), 6000.0) == 60.0  # 6000 / 100
    assert sizing.cadence(_speed(a=[INF, INF]), 800.0) == 8.0  # no finite median: budget / 100


def test_a_look_that_no_winner_holds_the_target_in_sizes_nothing():
    # the target is touched by noisy evaluations (times finite) but no winner's median
    # second-half return reaches it: the look saw no lasting improvement (point_mass_hetero)
    flat = _speed(a=[960.0, 480.0], b=[910.0, 455.0])
    flat["target"]["value"] = -31.0
    flat["levels"] = {"a": [-31.7, -30.9], "b": [-32.1, -30.5]}
    assert sizing.holding(flat) == []
    with pytest.raises(SystemExit, match="no winner of the look holds its 80 % target"):
        sizing.check_look(flat, "point_mass_hetero", 15000.0)
    # one winner that holds it is enough: the others' times (finite or not) size the budget
    flat["levels"]["a"] = [-2.5, -2.3]
    assert sizing.holding(flat) == ["a"]
    sizing.check_look(flat, "point_mass_hetero", 15000.0)
    # a look recorded before `levels` existed is not second-guessed
    sizing.check_look(_speed(a=[1.0, 2.0]), "old", 10.0)
