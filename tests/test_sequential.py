"""Tests for jaxnigt.analysis.sequential: the looks, the margins, the verdicts, seed blocks
merged, the command line, and the rule's error rate and power by simulation (small here; the
full size is ``python -m jaxnigt.cli.error_rate``, on the results page)."""

import json

import numpy as np
import pytest
from scipy import stats as sps

from jaxnigt import cli
from jaxnigt import config as config_lib
from jaxnigt.analysis import run_data, sequential, verdicts
from jaxnigt.run import metrics

CONFIG = {"env": {"name": "lqr1d"}, "cluster": {"n": 2}, "budget": 10.0}
T = [0.0, 2.0, 4.0, 6.0, 8.0, 11.0]


def _write(path, curves, first_seed=0):
    """A finished run directory by hand: ``curves`` is ``{algorithm: [returns per seed]}``."""
    path.mkdir(parents=True)
    raw = {
        **CONFIG,
        "algorithms": list(curves),
        "first_seed": first_seed,
        "seeds": len(next(iter(curves.values()))),
    }
    (path / "config.yaml").write_text(config_lib.dump(config_lib.from_dict(raw)))
    rows = []
    for algorithm, seeds in curves.items():
        for s, ys in enumerate(seeds):
            for r, (x, y) in enumerate(zip(T, ys, strict=True)):
                rows.append(
                    {
                        "algorithm": algorithm,
                        "grid": 0,
                        "learning_rate": 0.1,
                        "eta": 0.5,
                        "seed": first_seed + s,
                        "round": r,
                        "sim_time": x,
                        "eval_return": y,
                        "env_steps": 10 * r,
                        "comms": 4 * r,
                        "grads": 4.0 if r else float("nan"),
                    }
                )
    metrics.write_csv(path / "metrics.csv", rows)
    (path / "summary.json").write_text(json.dumps({a: {} for a in curves}))
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "done.json").write_text(json.dumps(list(curves)))
    return path


def _curves(rng, level, seeds):
    """Returns that rise from -10 to ``level`` (per seed: plus noise)."""
    out = []
    for _ in range(seeds):
        end = level + rng.normal(0, 0.3)
        out.append([-10.0, *np.linspace(-8, end, 5).tolist()])
    return out


def test_look_level_is_bonferroni_over_the_looks():
    assert sequential.look_level(4) == pytest.approx(0.975)
    assert sequential.look_level(1, 0.05) == pytest.approx(0.95)
    with pytest.raises(run_data.AnalysisError):
        sequential.look_level(0)
    assert sequential.parse_stages("5,10,20") == (5, 10, 20)
    for bad in ("10,5", "1,5", "5,5", "five"):
        with pytest.raises(run_data.AnalysisError, match="increasing"):
            sequential.parse_stages(bad)


def test_a_look_decides_by_the_tie_and_the_margin():
    iv = lambda lo, hi: {"estimate": (lo + hi) / 2, "low": lo, "high": hi}
    m = (0.8, 1.25)
    assert sequential.decide(iv(1.1, 1.5), 1.0, m) == verdicts.REFERENCE_AHEAD
    assert sequential.decide(iv(0.5, 0.9), 1.0, m) == verdicts.BASELINE_AHEAD
    assert sequential.decide(iv(0.85, 1.2), 1.0, m) == sequential.EQUIVALENT
    assert sequential.decide(iv(0.7, 1.2), 1.0, m) == sequential.UNDECIDED


def test_the_rule_stops_at_its_first_decisive_look_and_maps_to_a_verdict():
    widths = {5: 2.0, 10: 1.0, 20: 0.2, 40: 0.1}  # the interval narrows as seeds come in
    seen = []

    def at(k, level):
        seen.append((k, level))
        return {"estimate": 0.5, "low": 0.5 - widths[k], "high": 0.5 + widths[k]}

    r = sequential.run_rule(at, lambda k: (-0.1, 0.1), tie=0.0)
    assert r["outcome"] == verdicts.REFERENCE_AHEAD and r["seeds"] == 20
    assert [k for k, _ in seen] == [5, 10, 20] and {lv for _, lv in seen} == {0.975}
    assert sequential.claim_verdict("ahead", r) == "confirmed"
    assert sequential.claim_verdict("tie", r) == "refuted"
    tie = sequential.run_rule(
        lambda k, lv: {"estimate": 0.0, "low": -0.05, "high": 0.05}, lambda k: (-0.1, 0.1), tie=0.0
    )
    assert tie["seeds"] == 5 and sequential.claim_verdict("tie", tie) == "confirmed (equivalent)"
    assert sequential.claim_verdict("ahead", tie) == sequential.EQUIVALENT
    open_ = sequential.run_rule(
        lambda k, lv: {"estimate": 0.0, "low": -1.0, "high": 1.0},
        lambda k: (-0.1, 0.1),
        tie=0.0,
        stages=(5, 10),
    )
    assert sequential.claim_verdict("ahead", open_) == "undecided at 10 seeds"


def test_welch_interval_matches_scipys():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 1.0, 7), rng.normal(0.0, 2.0, 5)
    iv = sequential.welch_interval(a, b, 0.975)
    ref = sps.ttest_ind(a, b, equal_var=False).confidence_interval(0.975)
    assert iv["estimate"] == pytest.approx(a.mean() - b.mean())
    assert (iv["low"], iv["high"]) == pytest.approx((ref.low, ref.high))


def test_paired_t_interval_matches_scipys_and_the_p_values_their_tests():
    rng = np.random.default_rng(4)
    common = rng.normal(0.0, 3.0, 6)
    a, b = common + rng.normal(0.5, 0.3, 6), common + rng.normal(0.0, 0.3, 6)
    iv = sequential.paired_t_interval(a, b, 0.975)
    ref = sps.ttest_rel(a, b)
    assert (iv["low"], iv["high"]) == pytest.approx(tuple(ref.confidence_interval(0.975)))
    assert iv["p"] == pytest.approx(ref.pvalue)
    welch = sequential.welch_interval(a, b, 0.975)
    assert welch["p"] == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue)
    # the seed effect (spread 3) cancels in the pairs: far narrower than Welch's
    assert iv["high"] - iv["low"] < 0.3 * (welch["high"] - welch["low"])
    same = sequential.difference_interval(a, b, 0.9, paired=True)
    assert same == sequential.paired_t_interval(a, b, 0.9)


def test_a_comparisons_p_value_is_bonferroni_over_its_planned_looks():
    looks = [{"interval": {"p": 0.2}}, {"interval": {"p": 0.01}}]
    assert sequential.rule_p_value(looks, 4) == pytest.approx(0.04)
    assert sequential.rule_p_value([{"interval": {"p": 0.5}}], 3) == 1.0
    assert sequential.rule_p_value([{"interval": {"estimate": 1.0}}], 3) is None
    at = lambda k, lv: {"estimate": 1.0, "low": 0.5, "high": 2.0, "p": 0.3}
    r = sequential.run_rule(at, lambda k: (0.8, 1.25), tie=1.0, stages=(5, 10))
    assert r["p"] == pytest.approx(0.6)


def test_seed_blocks_merge_into_one_run_and_a_look_takes_the_first_seeds(tmp_path):
    rng = np.random.default_rng(0)
    whole = {"rennala_nigt": _curves(rng, -1.0, 6), "afedpg": _curves(rng, -6.0, 6)}
    first = {a: c[:4] for a, c in whole.items()}
    second = {a: c[4:] for a, c in whole.items()}
    runs = [
        run_data.load_run(_write(tmp_path / "b", second, first_seed=4)),
        run_data.load_run(_write(tmp_path / "a", first)),
    ]
    merged = sequential.merge_runs(runs)
    together = run_data.load_run(_write(tmp_path / "w", whole))
    for name, m in merged.algorithms().items():
        other = together.algorithms()[name]
        assert m.seeds == tuple(range(6)) and m.identical_to(other)
        np.testing.assert_array_equal(m.updates, other.updates)
        head = sequential.first_seeds(m, 4)
        assert head.seeds == (0, 1, 2, 3) and len(head.curves) == 4
    with pytest.raises(run_data.AnalysisError, match="two of the runs"):
        sequential.merge_runs([runs[0], runs[0]])


def test_compare_sequential_and_its_command(tmp_path, capsys):
    rng = np.random.default_rng(1)
    curves = {
        "rennala_nigt": _curves(rng, -1.0, 10),
        "sync_nigt": _curves(rng, -1.0, 10),
        "afedpg": _curves(rng, -6.0, 10),
    }
    run = run_data.load_run(_write(tmp_path / "r", curves))
    r = sequential.compare_sequential(
        run, "rennala_nigt", statistic="average", reps=200, stages=(5, 10)
    )
    clear = r["comparisons"]["afedpg"]
    # 5 paired seeds can give no p below 1/16 > 0.10 / 1: the look at 5 decides nothing, the
    # look at 10 (the one decisive look, at 0.10) decides
    assert clear["decisive"] == [10] and clear["looks"][0]["outcome"] == sequential.NOT_DECISIVE
    assert clear["verdict"] == "confirmed" and clear["seeds"] == 10
    same = r["comparisons"]["sync_nigt"]
    assert same["verdict"] in (sequential.EQUIVALENT, "undecided at 10 seeds")
    assert same["looks"][0]["margin"][1] == pytest.approx(-same["looks"][0]["margin"][0])
    argv = ["compare", str(tmp_path / "r"), "--sequential", "5,10", "--baselines", "afedpg"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "| afedpg | 10 |" in out and "**confirmed**" in out
    assert (tmp_path / "r" / "sequential.json").is_file()
    assert cli.main([*argv[:3], "10,5"]) == 2
    assert "--sequential" in capsys.readouterr().err


def test_the_level_is_set_by_every_planned_look_even_before_its_seeds_exist():
    seen = []

    def at(k, level):
        seen.append((k, level))
        return {"estimate": 0.0, "low": -1.0, "high": 1.0}

    r = sequential.run_rule(at, lambda k: (-0.1, 0.1), tie=0.0, available=12)
    assert seen == [(5, 0.975), (10, 0.975)]  # four planned looks, two of them due
    assert (
        r["open"] and sequential.claim_verdict("ahead", r) == "open at 10 seeds (next look at 20)"
    )
    with pytest.raises(run_data.AnalysisError, match="fewer than the first stage"):
        sequential.run_rule(at, lambda k: (-0.1, 0.1), tie=0.0, available=3)


def _timed(path, reached, seeds, first_seed=0):
    """A run whose seed s of each method first reaches the 80 % target at ``reached[m](s)``
    (returns -10 before, -1 from then on, on the grid T; never when past the budget 10)."""
    curves = {
        m: [[-10.0 if x < at(s) else -1.0 for x in T] for s in range(seeds)]
        for m, at in reached.items()
    }
    return run_data.load_run(_write(path, curves, first_seed))


@pytest.mark.parametrize("seeds, decided", [(5, False), (10, True)])
def test_five_paired_seeds_cannot_decide_and_ten_can(tmp_path, seeds, decided):
    """The reference reaches the target first on every seed (at 2 or 4 against 6 or 8).  At
    5 paired seeds the exact sign-flip test's p is 2 / 2^5 = 1/16, never less, above the
    0.10 / 3 of the rule's decisive looks: no decision.  At 10 seeds p = 2 / 2^10 decides."""
    run = _timed(
        tmp_path / "r",
        {"rennala_nigt": lambda s: 2.0 + 2 * (s % 2), "afedpg": lambda s: 6.0 + 2 * (s % 2)},
        seeds,
    )
    one = sequential.compare_sequential(
        run, "rennala_nigt", statistic="time_to_80", stages=(5, 10, 20, 40)
    )["comparisons"]["afedpg"]
    first = one["looks"][0]
    assert first["p"] == pytest.approx(1 / 16) and first["p_min"] == pytest.approx(1 / 16)
    assert first["outcome"] == sequential.NOT_DECISIVE and one["decisive"] == [10, 20, 40]
    if decided:
        assert one["verdict"] == "confirmed" and one["seeds"] == 10
        assert one["looks"][-1]["p"] == pytest.approx(2 / 2**10)
        assert one["looks"][-1]["interval"]["low"] > 1.0
        assert one["p"] == pytest.approx(3 * 2 / 2**10)  # Bonferroni over the decisive looks
    else:
        assert one["verdict"] == "open at 5 seeds (next look at 10)" and one["p"] is None
    # the plain compare (one look): p never below the smallest its seeds allow
    row = analysis_compare(run)["comparisons"]["afedpg"]
    assert row["p"] >= row["p_min"] == pytest.approx(2 / 2**seeds)


def analysis_compare(run):
    from jaxnigt import analysis

    return analysis.compare(run, "rennala_nigt", statistic="time_to_80", reps=100)
