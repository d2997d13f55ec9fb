"""Tests for jaxnigt.studies.tuning and ``jaxnigt tune``: parsing, the tie rule, the self-extending
grid (on a scorer by hand), algorithm traits, bad requests, the shape hyperparameters (M,
msync_m, ringmaster_R: their tie rule and write-back, the runs faked; their programs:
tests/test_programs.py) and two tiny point_mass tunings.

The point_mass tunings share one program shape (6 = grid points × seeds, one η, one M), so
the three programs they run compile once.
"""

import json
import math
from pathlib import Path

import chex
import numpy as np
import pytest
import yaml

from jaxnigt import algorithms, cli
from jaxnigt import config as config_lib
from jaxnigt.analysis import run_data
from jaxnigt.studies import programs, tuning

# ---------------------------------------------------------------------------- parsing


def test_parse_grids():
    assert tuning.parse_lr_exp("-14:-2") == tuple(range(-14, -1))
    assert tuning.parse_lr_exp("-14:-2:4") == (-14, -10, -6, -2)
    assert tuning.parse_lr_exp("-6,-10,-8") == (-10, -8, -6)
    assert tuning.parse_numbers("0.1,0.001", "eta", float, 0.0, 1.0) == (0.001, 0.1)
    assert tuning.parse_seeds("100,101,102") == (100, 101, 102)
    for text in ("", "-2:-14", "a:b", "1:2:0", ","):
        with pytest.raises(tuning.TuningError, match=r"^lr_exp: ") as caught:
            tuning.parse_lr_exp(text)
        assert caught.value.param == "lr_exp"
    for text, what in (("", "empty"), ("0", r"\(0, 1\]"), ("-0.1", r"\(0, 1\]"), ("x", "numbers")):
        with pytest.raises(tuning.TuningError, match=what):
            tuning.parse_numbers(text, "eta", float, 0.0, 1.0)
    with pytest.raises(tuning.TuningError, match=r"^M: got 0; .*> 0"):
        tuning.parse_numbers("20,0", "M", int, 0, math.inf)
    with pytest.raises(tuning.TuningError, match=r"^seeds: .*consecutive") as caught:
        tuning.parse_seeds("100,102")
    assert caught.value.param == "seeds" and str(caught.value) == f"seeds: {caught.value.reason}"


# -------------------------------------------------------------------- selection, by hand


def _point(e, score, eta=0.1, M=20, diverged=()):
    return {"lr_exp": e, "eta": eta, "M": M, "score": score, "diverged_seeds": list(diverged)}


def test_choose_applies_the_tie_rule_and_drops_diverged_points():
    best = tuning.choose([_point(-6, 1.0), _point(-8, 1.0 - 1e-9), _point(-4, 0.5)])
    assert best["lr_exp"] == -8  # a tie goes to the smaller α
    tied_eta = [_point(-6, 1.0, eta=0.01), _point(-6, 1.0, eta=0.1)]
    assert tuning.choose(tied_eta)["eta"] == 0.1  # then to the larger η
    tied_M = [_point(-6, 1.0, M=50), _point(-6, 1.0, M=20)]
    assert tuning.choose(tied_M)["M"] == 20  # then to the smaller M
    points = [_point(-6, 9.0, diverged=[1]), _point(-8, math.nan), _point(-10, -3.0)]
    assert tuning.choose(points)["lr_exp"] == -10
    assert tuning.choose([_point(-6, 9.0, diverged=[0])]) is None


def _scorer(optimum, calls):
    """``run_points`` of a made-up score -(e - optimum)^2 (one η), recording each program."""

    def run_points(M, exps):
        calls.append((M, list(exps)))
        return [_point(e, -float((e - optimum) ** 2), M=M) for e in exps]

    return run_points


def test_search_with_an_interior_optimum_runs_the_grid_once():
    calls = []
    out = tuning.search(_scorer(-5, calls), [-8, -6, -4, -2], [20, 30], log=lambda _: None)
    assert calls == [(20, [-8, -6, -4, -2]), (30, [-8, -6, -4, -2])]
    # -6 and -4 tie (score -1): the smaller α; M 20 and 30 tie: the smaller M
    assert (out["chosen"]["lr_exp"], out["chosen"]["M"]) == (-6, 20)
    assert out["interior"] and out["extensions"] == 0


def test_search_extends_the_grid_while_the_winner_sits_at_an_edge():
    calls, logs = [], []
    out = tuning.search(_scorer(-5, calls), [-12, -10], [20], log=logs.append)
    # -10 wins at the high edge: -8, -6; then -6 at the edge: -4, -2; then -6 (tied with -4)
    assert [c[1] for c in calls] == [[-12, -10], [-8, -6], [-4, -2]]
    assert out["lr_exp"] == [-12, -10, -8, -6, -4, -2]
    assert out["chosen"]["lr_exp"] == -6 and out["interior"] and out["extensions"] == 2
    assert len(logs) == 2 and "high edge" in logs[0]
    # downwards, at the grid's spacing
    calls = []
    out = tuning.search(_scorer(-20, calls), [-9, -6, -3], [20], log=lambda _: None)
    assert [c[1] for c in calls] == [[-9, -6, -3], [-15, -12], [-21, -18], [-27, -24]]
    assert out["chosen"]["lr_exp"] == -21 and out["interior"] and out["extensions"] == 3


def test_search_is_bounded():
    calls = []
    out = tuning.search(_scorer(-40, calls), [-4, -2], [20], max_extensions=2, log=lambda _: None)
    assert [c[1] for c in calls] == [[-4, -2], [-8, -6], [-12, -10]]
    assert out["extensions"] == 2 and out["chosen"]["lr_exp"] == -12 and not out["interior"]
    # never above α = 1
    calls = []
    out = tuning.search(_scorer(5, calls), [-2, 0], [20], log=lambda _: None)
    assert len(calls) == 1 and out["chosen"]["lr_exp"] == 0 and not out["interior"]
    # a grid of one α is a fixed α
    out = tuning.search(_scorer(5, []), [-3], [20], log=lambda _: None)
    assert out["extensions"] == 0 and not out["interior"]


def _race(first_rounds=None):
    """Two searches through :func:`tuning.drive` with made-up jobs: "slow" (one program,
    interior optimum) whose jobs finish only when nothing else is left, and "fast" (two
    programs, optimum below its grid: two extensions).  Returns the event log."""
    events, jobs, done = [], {}, []
    optimum = {"slow": -5, "fast": -11}

    def submit(key, program, exps):
        jobs[len(jobs)] = (key, program, list(exps))
        events.append(("submit", key, min(exps)))
        return len(jobs) - 1

    def wait():
        left = [i for i in jobs if i not in done]
        i = next((i for i in left if jobs[i][0] == "fast"), left[0])
        done.append(i)
        events.append(("done", jobs[i][0], min(jobs[i][2])))
        return [i]

    def score(key, ids):
        events.append(("score", key))
        return [
            _point(e, -float((e - optimum[key]) ** 2), M=jobs[i][1])
            for i in ids
            for e in jobs[i][2]
        ]

    def steps(key, grid, programs):
        return tuning.search_steps(grid, programs, log=lambda _: None, name=key)

    searches = {"slow": steps("slow", [-6, -4], [20]), "fast": steps("fast", [-6, -4], [20, 30])}
    out = tuning.drive(searches, submit, wait, score, first_rounds=first_rounds)
    return out, events


def test_drive_goes_on_with_each_search_as_its_own_programs_finish():
    out, events = _race()
    assert out["fast"]["chosen"]["lr_exp"] == -12 and out["fast"]["extensions"] == 2
    assert out["slow"]["chosen"]["lr_exp"] == -6 and out["slow"]["extensions"] == 1
    # both of fast's extensions were submitted before slow's first program finished
    slow_done = events.index(("done", "slow", -6))
    assert events.index(("submit", "fast", -10)) < events.index(("submit", "fast", -14))
    assert events.index(("submit", "fast", -14)) < slow_done
    assert events[:3] == [("submit", "slow", -6), ("submit", "fast", -6), ("submit", "fast", -6)]


def test_drive_scores_no_first_round_before_every_first_round_is_done():
    calls = []

    def first_rounds():
        calls.append(len(calls))

    out, events = _race(first_rounds)
    assert calls == [0]  # once
    first_score = next(i for i, e in enumerate(events) if e[0] == "score")
    assert events.index(("done", "slow", -6)) < first_score
    assert out["fast"]["chosen"]["lr_exp"] == -12  # the same searches, in another order


# ----------------------------------------------------------------- algorithm traits


def test_traits_live_with_the_algorithms():
    t = {name: algorithms.traits(name) for name in algorithms.NAMES}
    link = {a for a, x in t.items() if "link" in x.cluster_options}
    events = {"afedpg", "afedpg_vanilla", "asgd", "ringmaster_pg", "ringleader_nigt", "a3c"}
    assert link == events | {"ringleader_pg", "impala", "seed_rl"}
    assert {a for a, x in t.items() if "allreduce" in x.cluster_options} == {
        "rennala_nigt",
        "rennala_pg",
        "msync_nigt",
        "mindflayer_nigt",
        "mindflayer_pg",
    }
    assert {a for a, x in t.items() if "M" in x.tuned_shapes} == {
        "rennala_nigt",
        "rennala_pg",
        "malenia_nigt",
        "mindflayer_nigt",  # M: the expected successful gradients a round (its attempts)
        "mindflayer_pg",
    }
    shapes = {
        a: x.tuned_shapes for a, x in t.items() if x.tuned_shapes and "M" not in x.tuned_shapes
    }
    assert shapes == {"msync_nigt": ("msync_m",), "ringmaster_pg": ("ringmaster_R",)}
    assert {a for a, x in t.items() if "eta" in x.step_sizes} == {
        "rennala_nigt",
        "malenia_nigt",
        "sync_nigt",
        "msync_nigt",
        "mindflayer_nigt",
        "ringleader_nigt",
        "ringleader_round_nigt",
        "afedpg",
        "afedpg_vanilla",
    }
    overflow = {a for a, x in t.items() if x.overflow}
    overflowing = {"malenia_nigt", "ringleader_round_nigt", "ringleader_round_pg", "impala"}
    assert overflow == overflowing | {"seed_rl"}
    assert "malenia_capacity" in t["malenia_nigt"].overflow
    # the built algorithm carries the same traits
    from tasks import match_setup

    setup = match_setup(h=[1.0, 2.0], kappa=0.0, M=2)
    for name in ("rennala_nigt", "malenia_nigt", "afedpg", "sync_pg"):
        built = algorithms.get(name)(setup, config_lib.HParams(async_wave=1))
        assert built.traits == t[name], name


# --------------------------------------------------------------------- the command line

# point_mass, two equal workers, no communication: a round of M = 4 takes 2 time units, so
# the budget is ~75 updates; α = 2^-3 clearly beats 2^-6 (too small) and 2^0 (too large).
TINY = """
name: tiny_tune
algorithms: [rennala_nigt, sync_pg]
seeds: 2
budget: 150.0
env: {name: point_mass}
cluster: {n: 2, h: equal, kappa: 0.0}
hparams: {M: 4, learning_rate: 0.05, eta: 0.5}
eval: {every: 10, episodes: 4}
checkpoint_every: 0
"""


@pytest.fixture
def tiny(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    return cfg


@pytest.mark.parametrize(
    "flags, what",
    [
        (["--eta", ""], "--eta"),
        (["--eta", "0"], "--eta"),
        (["--eta", "0.1,-1"], "--eta"),
        (["--M", "0"], "--M"),
        (["--msync-m", "2,0"], "--msync-m: got 0; every value must be > 0"),
        (["--msync-m", "1.5"], "--msync-m: got '1.5'; expected comma-separated integers"),
        (["--msync-m", ","], "--msync-m: got ','; the grid is empty"),
        (["--ringmaster-R", "-3"], "--ringmaster-R: got -3; every value must be > 0"),
        (["--ringmaster-R", "x"], "--ringmaster-R: got 'x'; expected comma-separated integers"),
        (["--lr-exp=-2:-14"], "--lr-exp"),
        (["--lr-exp="], "--lr-exp"),
        (["--tune-seeds", "0,1"], "--tune-seeds: starts at 0, the config's own seed"),
        (["--tune-seeds", "100,102"], "--tune-seeds: got '100,102'; expected consecutive"),
        (["--algorithms", "rennala_nigt,bogus"], "--algorithms: unknown 'bogus'"),
        (["--algorithms", ","], "--algorithms"),
        (["--algorithms", "impala", "--M", "2,4"], "--M: impala tunes no M; the algorithms that"),
        (["--algorithms", "impala,afedpg", "--msync-m", "2"], "--msync-m: none of impala, afedpg"),
        (["--set", "cluster.n=0"], "cluster.n"),
        (["--set", "cluster"], "--set: got 'cluster'; expected KEY=VALUE"),
        (["--max-extensions", "-1"], "--max-extensions: got -1"),
        (["--jobs", "0"], "--jobs: got 0; expected >= 1"),
        (["--resume"], "--resume: "),  # no tuning directory to resume
    ],
)
def test_bad_tune_requests_exit_2_with_one_line_and_write_nothing(tiny, capsys, flags, what):
    out = tiny.parent / "out"
    assert cli.main(["tune", str(tiny), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: ") and what in err[0], err
    assert not out.exists()


def test_tune_an_interior_optimum_writes_the_tuned_config(tiny, capsys):
    out = tiny.parent / "out"
    argv = ["tune", str(tiny), "--out", str(out), "--algorithms", "rennala_nigt"]
    argv += ["--lr-exp=-6:0:3", "--eta", "0.5", "--no-progress"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "chosen: α = 2^-3, η = 0.5" in printed and "interior" in printed
    report = json.loads((out / "tuning.json").read_text())
    r = report["algorithms"]["rennala_nigt"]
    assert r["lr_exp"] == [-6, -3, 0] and r["interior"] and r["extensions"] == 0
    scores = {p["lr_exp"]: p["score"] for p in r["points"]}
    assert scores[-3] > max(scores[-6], scores[0])
    assert report["tune_seeds"] == [100, 101]
    tuned = yaml.safe_load((out / "tuned.yaml").read_text())
    assert tuned["per_algorithm"]["rennala_nigt"] == {"learning_rate": 0.125, "eta": 0.5}
    cfg = config_lib.from_dict(tuned)  # the report seeds stay the config's
    assert cfg.hparams_for("rennala_nigt").learning_rate == 0.125
    assert (cfg.seed, cfg.seeds) == (0, 2)
    assert cfg.hparams_for("sync_pg").learning_rate == 0.05  # not tuned: kept
    # the tuning programs ran on the tuning seeds
    program = out / "runs" / "rennala_nigt_lr-6..0" / "config.yaml"
    assert yaml.safe_load(program.read_text())["seed"] == 100
    # the same directory again: refused without --resume; kept with it
    assert cli.main(argv) == 2
    capsys.readouterr()
    assert cli.main([*argv, "--resume"]) == 0
    assert "finished earlier with this config; kept" in capsys.readouterr().out


def test_parallel_jobs_give_the_tuning_of_one_process(tiny, tmp_path, capfd):
    """``jobs=2``: the round's two programs run in two child processes at once (their lines
    carry the program's name); the winners and every score are those of ``jobs=1``."""
    raw = config_lib.read_yaml(tiny)
    run = {"grid": tuning.Grid(lr_exp=(-6, -3, 0), eta=(0.5,)), "progress": False}
    one = tuning.tune(raw, tmp_path / "one", log=lambda _: None, **run)
    capfd.readouterr()
    two = tuning.tune(raw, tmp_path / "two", jobs=2, log=print, **run)
    printed = capfd.readouterr().out
    assert "[rennala_nigt_lr-6..0] [jaxnigt] rennala_nigt:" in printed
    assert "[sync_pg_lr-6..0] [jaxnigt] sync_pg:" in printed
    for a in ("rennala_nigt", "sync_pg"):
        r1, r2 = one["algorithms"][a], two["algorithms"][a]
        assert r1["lr_exp"] == r2["lr_exp"] and r1["runs"] != r2["runs"]
        assert [p["diverged_seeds"] for p in r1["points"]] == [
            p["diverged_seeds"] for p in r2["points"]
        ]
        chex.assert_trees_all_close(
            np.nan_to_num([p["seed_values"] for p in r1["points"]], nan=-1e9),
            np.nan_to_num([p["seed_values"] for p in r2["points"]], nan=-1e9),
            rtol=1e-5,
            atol=1e-5,
        )
    r1, r2 = one["algorithms"]["rennala_nigt"], two["algorithms"]["rennala_nigt"]
    assert r1["chosen"]["lr_exp"] == r2["chosen"]["lr_exp"] == -3
    with pytest.raises(tuning.TuningError, match="got 0; expected >= 1"):
        tuning.tune(raw, tmp_path / "three", jobs=0, **run)
    assert not (tmp_path / "three").exists()


def test_tune_extends_the_grid_when_the_winner_sits_at_an_edge(tiny, tmp_path):
    raw = config_lib.read_yaml(tiny)
    logs = []
    report = tuning.tune(
        raw,
        tmp_path / "edge",
        algorithms=["rennala_nigt"],
        grid=tuning.Grid(lr_exp=(-12, -9), eta=(0.5,)),
        seeds=(100, 101, 102),
        progress=False,
        log=logs.append,
    )
    r = report["algorithms"]["rennala_nigt"]
    # both steps are too small: 2^-9 wins at the high edge, so 2^-6 and 2^-3 run
    assert any("2^-9 is at the high edge" in line for line in logs), logs
    assert r["extensions"] >= 1 and r["lr_exp"][:4] == [-12, -9, -6, -3]
    assert r["chosen"]["lr_exp"] in (-6, -3) and r["interior"]
    assert len(r["runs"]) == 1 + r["extensions"]
    assert np.isfinite([p["score"] for p in r["points"]]).all()


def test_tune_to_a_time_target_scores_the_restricted_mean_time(tiny, tmp_path):
    """``--statistic time_to_80``: the target from the pooled initial grid, each point's score
    minus the mean of its seeds' first times (the budget for a seed that never gets there),
    recomputed here by a plain loop over the evaluations."""
    raw = config_lib.read_yaml(tiny)
    grid = tuning.Grid(lr_exp=(-6, -3, 0), eta=(0.5,))  # the interior test's program
    logs = []
    report = tuning.tune(
        raw,
        tmp_path / "t",
        algorithms=["rennala_nigt"],
        grid=grid,
        statistic="time_to_80",
        progress=False,
        log=logs.append,
    )
    run = run_data.load_run(tmp_path / "t" / "runs" / "rennala_nigt_lr-6..0")
    r0 = np.median([y[0] for m in run.methods.values() for _, y in m.curves])
    best = max(np.median(m.statistic("second_half", run.budget)) for m in run.methods.values())
    t = report["target"]
    assert t["fraction"] == 0.8 and t["pool"] == [str(run.path)]
    assert t["value"] == pytest.approx(r0 + 0.8 * (best - r0)) and r0 < t["value"] < best
    assert any(line.startswith("[tune] time_to_80 target: ") for line in logs), logs
    points = report["algorithms"]["rennala_nigt"]["points"]
    for p, m in zip(
        points, sorted(run.methods.values(), key=lambda m: m.learning_rate), strict=True
    ):
        times = []
        for xs, ys in m.curves:
            reached = [
                x for x, y in zip(xs, ys, strict=True) if y >= t["value"] and x <= run.budget
            ]
            times.append(min(reached) if reached else run.budget)
        assert p["score"] == pytest.approx(-sum(times) / len(times))
        assert p["secondary"] == pytest.approx(np.mean(m.statistic("average", run.budget)))
    chosen = report["algorithms"]["rennala_nigt"]["chosen"]
    assert chosen["score"] == max(p["score"] for p in points) > -run.budget
    assert "target" in tuning.table(report).splitlines()[0]
    # the winners' speed, on a target pooled over every program run (here the same single
    # program, no extension: the same target): the winner's own times
    sp = report["speed"]
    assert sp["target"]["value"] == pytest.approx(t["value"])
    winner = run.methods[chosen["method"]]
    assert winner.learning_rate == pytest.approx(chosen["learning_rate"])
    times = sp["times"]["rennala_nigt"]
    assert -np.mean(np.minimum(times, run.budget)) == pytest.approx(chosen["score"])
    assert sp["slowest_median"] == sorted(times)[len(times) // 2]
    chex.assert_trees_all_close(
        np.asarray(sp["levels"]["rennala_nigt"]), winner.statistic("second_half", run.budget)
    )
    assert "winners' times to 80% of the improvement" in tuning.table(report)
    # a target needs its statistic's pool: scoring one program alone without it is refused
    with pytest.raises(tuning.TuningError, match="time_to_80 needs a target"):
        tuning.score_run(run.path, "time_to_80", [-6, -3, 0], [0.5], {"M": 4})


def test_choose_with_a_time_score_breaks_a_tie_by_the_average_return():
    def point(e, score, secondary):
        return {**_point(e, score), "secondary": secondary}

    # the same evaluation reached the target (or none did): the higher average return wins,
    # before the smaller α
    assert tuning.choose([point(-8, -5.0, 1.0), point(-6, -5.0, 2.0)])["lr_exp"] == -6
    assert tuning.choose([point(-8, -9.0, 3.0), point(-6, -5.0, 2.0)])["lr_exp"] == -6
    assert tuning.choose([point(-8, -5.0, 2.0), point(-6, -5.0, 2.0)])["lr_exp"] == -8
    # no finite average return among the tied: the tie rule decides alone
    tied = [point(-6, -5.0, -math.inf), point(-8, -5.0, -math.inf)]
    assert tuning.choose(tied)["lr_exp"] == -8


def test_pooled_target_pools_every_point_of_every_program(monkeypatch):
    def method(lr, *finals):  # seeds starting at 0 and levelling off at their final value
        curves = tuple((np.array([0.0, 5.0, 10.0]), np.array([0.0, f / 2, f])) for f in finals)
        return run_data.Method(
            name=f"a[{lr}]",
            algorithm="a",
            grid=0,
            learning_rate=lr,
            eta=0.1,
            seeds=tuple(range(len(finals))),
            curves=curves,
            per_type={},
            updates=np.zeros(len(finals)),
            env_steps=np.zeros(len(finals)),
            end_time=np.full(len(finals), 10.0),
            diverged=(),
        )

    runs = {
        "one": {"x": method(0.1, 4.0, 6.0), "y": method(0.2, 1.0, 1.0)},
        "two": {"z": method(0.1, 8.0, 12.0, 10.0)},
    }
    fake = lambda d: run_data.Run(path=d, config=None, budget=10.0, methods=runs[str(d)])
    monkeypatch.setattr(run_data, "load_run", fake)
    t = tuning.pooled_target(["one", "two"], 0.5)
    # R0 = 0 (every seed starts there); R_best = the best median second-half return, that of
    # z in the second program: its seeds hold 4, 6, 5 over [5, 10]
    assert (t["R0"], t["R_best"], t["value"]) == (0.0, 5.0, 2.5)
    assert t["pool"] == ["one", "two"]


# ------------------------------------------------------- shape hyperparameters, no compiles


@pytest.fixture
def shaped(monkeypatch):
    """``algorithms.traits`` with the ``tuned_shapes`` of the given algorithms replaced."""

    def use(**shapes):
        real = algorithms.traits

        def fake(name):
            t = real(name)
            return t._replace(tuned_shapes=shapes[name]) if name in shapes else t

        monkeypatch.setattr(algorithms, "traits", fake)

    return use


def test_choose_breaks_a_tie_by_the_smaller_shape_values():
    def point(score, **shapes):
        return {"lr_exp": -6, "eta": 0.1, "M": 20, **shapes, "score": score, "diverged_seeds": []}

    assert tuning.choose([point(1.0, msync_m=3), point(1.0, msync_m=1)])["msync_m"] == 1
    assert tuning.choose([point(1.0, msync_m=3), point(0.5, msync_m=1)])["msync_m"] == 3
    tied = [point(1.0, msync_m=1, ringmaster_R=40), point(1.0, msync_m=2, ringmaster_R=10)]
    assert tuning.choose(tied)["msync_m"] == 1  # msync_m before ringmaster_R
    tied = [point(1.0, M=30, ringmaster_R=10), point(1.0, M=20, ringmaster_R=40)]
    assert tuning.choose(tied)["M"] == 20  # M first
    tied = [point(1.0, ringmaster_R=40), point(1.0, ringmaster_R=10)]
    assert tuning.choose(tied)["ringmaster_R"] == 10


def test_tune_shapes_end_to_end_with_the_runs_faked(tiny, monkeypatch, shaped, capsys):
    """``--M`` and ``--msync-m`` through the command line: the programs, their configs, the
    scored points, the winners written back (the runs and their scores are made up)."""
    shaped(msync_nigt=("msync_m",))
    tiny.write_text(TINY.replace("[rennala_nigt, sync_pg]", "[rennala_nigt, sync_pg, msync_nigt]"))
    ran = {}

    def run_program(cfg, run_dir, **_):
        ran[run_dir.name] = cfg

    def score_run(run_dir, statistic, exps, etas, shapes, target=None):
        # α = 2^-3 wins; msync_m: a tie (the smaller goes); M: 8 is strictly better
        bonus = 0.5 if shapes["M"] == 8 and "rennala" in run_dir.name else 0.0
        return [
            {
                "lr_exp": e,
                "learning_rate": 2.0**e,
                "eta": eta,
                **shapes,
                "score": -abs(e + 3) + bonus,
                "seed_values": [],
                "diverged_seeds": [],
            }
            for e in exps
            for eta in etas
        ]

    def run_together(configs, run_dirs, algorithm, where, **_):
        together.append(sorted(d.name for d in run_dirs))
        for cfg, run_dir in zip(configs, run_dirs, strict=True):
            run_program(cfg, run_dir)

    together = []
    monkeypatch.setattr(programs, "run_program", run_program)
    monkeypatch.setattr(programs, "run_together", run_together)
    monkeypatch.setattr(tuning, "score_run", score_run)
    monkeypatch.setattr(tuning, "speed", lambda report, out: {})  # no runs to read
    out = tiny.parent / "out"
    argv = ["tune", str(tiny), "--out", str(out), "--lr-exp=-6:0:3", "--eta", "0.5"]
    assert cli.main([*argv, "--msync-m", "2,1", "--M", "8,6", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "[tune] msync_nigt msync_m=2: α = 2^-6" in printed
    assert "[tune] rennala_nigt M=6: α = 2^-6" in printed
    assert sorted(ran) == [
        "msync_nigt_msync_m1_lr-6..0",
        "msync_nigt_msync_m2_lr-6..0",
        "rennala_nigt_M6_lr-6..0",
        "rennala_nigt_M8_lr-6..0",
        "sync_pg_lr-6..0",
    ]
    # Each algorithm's programs of a round differ only in M (or m): one padded program.
    assert sorted(together) == [
        ["msync_nigt_msync_m1_lr-6..0", "msync_nigt_msync_m2_lr-6..0"],
        ["rennala_nigt_M6_lr-6..0", "rennala_nigt_M8_lr-6..0"],
    ]
    hp = {k: cfg.hparams_for(cfg.algorithms[0]) for k, cfg in ran.items()}
    assert [hp[f"msync_nigt_msync_m{m}_lr-6..0"].msync_m for m in (1, 2)] == [1, 2]
    assert [hp[f"rennala_nigt_M{M}_lr-6..0"].M_init for M in (6, 8)] == [6, 8]
    # the algorithms that tune neither keep the config's M (4) and msync_m (its default)
    assert hp["sync_pg_lr-6..0"].M == 4 and hp["msync_nigt_msync_m1_lr-6..0"].M == 4
    assert hp["rennala_nigt_M6_lr-6..0"].msync_m is None
    report = json.loads((out / "tuning.json").read_text())
    assert report["grid"]["M"] == [6, 8] and report["grid"]["msync_m"] == [1, 2]
    assert "ringmaster_R" not in report["grid"] and "msync_m" in report["tie_rule"]
    r = report["algorithms"]
    assert r["msync_nigt"]["tuned_shapes"] == ["msync_m"] and not r["msync_nigt"]["M_tuned"]
    assert r["msync_nigt"]["msync_m"] == [1, 2] and r["msync_nigt"]["M"] == [4]
    assert {(p["M"], p["msync_m"]) for p in r["msync_nigt"]["points"]} == {(4, 1), (4, 2)}
    assert r["rennala_nigt"]["tuned_shapes"] == ["M"] and r["rennala_nigt"]["M"] == [6, 8]
    assert "msync_m" not in r["rennala_nigt"] and r["sync_pg"]["tuned_shapes"] == []
    assert "msync_m" not in r["sync_pg"]["points"][0]
    assert r["msync_nigt"]["chosen"]["msync_m"] == 1 and r["rennala_nigt"]["chosen"]["M"] == 8
    tuned = yaml.safe_load((out / "tuned.yaml").read_text())["per_algorithm"]
    assert tuned["msync_nigt"] == {"learning_rate": 0.125, "eta": 0.5, "msync_m": 1}
    assert tuned["rennala_nigt"] == {"learning_rate": 0.125, "eta": 0.5, "M": 8, "M_init": 8}
    assert tuned["sync_pg"] == {"learning_rate": 0.125, "eta": 0.5}
    # the request is recorded as before: the same flags resume, another grid does not
    assert cli.main([*argv, "--msync-m", "1,2", "--M", "6,8", "--resume"]) == 0
    capsys.readouterr()
    assert cli.main([*argv, "--msync-m", "2", "--M", "6,8", "--resume"]) == 2
    assert "--resume: " in capsys.readouterr().err
    # m above the workers: stopped on load, before any program runs
    assert cli.main([*argv, "--msync-m", "1,3", "--M", "6,8"]) == 2
    assert "msync_m: got 3" in capsys.readouterr().err


def test_a_tuning_whose_returns_ended_below_their_start_says_why_no_target_exists(
    tiny, monkeypatch, capsys
):
    """``tune ... --lr-exp -5 --eta 0.1 --M 2`` printed "target nan ... never, never" with no
    word of why: the returns ended below their start (R_best < R0), so no target exists.  One
    line says so (the runs and their scores are made up)."""

    def score_run(run_dir, statistic, exps, etas, shapes, target=None):
        return [
            {"lr_exp": e, "learning_rate": 2.0**e, "eta": eta, **shapes, "score": -1.0}
            | {"seed_values": [], "diverged_seeds": []}
            for e in exps
            for eta in etas
        ]

    nan_target = {"value": math.nan, "fraction": 0.8, "R0": -10.0, "R_best": -12.5, "pool": []}
    never = {"target": nan_target, "times": {"rennala_nigt": [math.inf, math.inf]}}
    never |= {"levels": {"rennala_nigt": [-12.5, -13.0]}, "slowest_median": math.inf}
    monkeypatch.setattr(programs, "run_program", lambda cfg, run_dir, **_: None)
    monkeypatch.setattr(tuning, "score_run", score_run)
    monkeypatch.setattr(tuning, "speed", lambda report, out: dict(never))
    out = tiny.parent / "out"
    argv = ["tune", str(tiny), "--out", str(out), "--lr-exp", "-5", "--eta", "0.1", "--M", "2"]
    assert cli.main([*argv, "--algorithms", "rennala_nigt", "--no-progress"]) == 0
    text = capsys.readouterr().out
    # the table's speed line gives the reason, not "target nan ... never, never"
    assert "target nan" not in text and "never, never" not in text, text
    speed = [x for x in text.splitlines() if x.startswith("winners' times")]
    assert speed == [
        "winners' times to 80% of the improvement: none, no method improved on its start: "
        "the best second-half median return (-12.5) is not above the initial median (-10), "
        "so the targets (fractions of the improvement) are NaN and no time to a target "
        "exists; run longer, or evaluate more often (eval.every_time)"
    ], text
    lines = [x for x in text.splitlines() if "'never'" in x]
    assert lines == [
        "[tune] the winners' times to a target below are 'never': no method improved on its "
        "start: the best second-half median return (-12.5) is not above the initial median "
        "(-10), so the targets (fractions of the improvement) are NaN and no time to a target "
        "exists; run longer, or evaluate more often (eval.every_time)"
    ]
    record = json.loads((out / "tuning.json").read_text())
    assert record["speed"]["no_target"].startswith("no method improved on its start")


def test_the_grid_record_of_M_alone_is_unchanged():
    """``tune.json`` compares the request on ``--resume``: a tuning of M from before the
    other shapes existed still resumes."""
    assert tuning.Grid(shapes={"M": (20, 30)}).record() == {
        "lr_exp": list(tuning.DEFAULT_LR_EXP),
        "eta": list(tuning.DEFAULT_ETA),
        "M": [20, 30],
        "max_extensions": tuning.MAX_EXTENSIONS,
    }
    assert tuning.Grid().record()["M"] is None
    assert tuning.Grid(shapes={"ringmaster_R": (5,)}).record()["ringmaster_R"] == [5]


@pytest.mark.parametrize(
    "shapes, param, what",
    [
        ({"msync_m": (0, 2)}, "msync_m", "integers >= 1"),
        ({"ringmaster_R": ()}, "ringmaster_R", "integers >= 1"),
        ({"M": (2.5,)}, "M", "integers >= 1"),
        ({"bogus": (1,)}, "shapes", "unknown 'bogus'"),
    ],
)
def test_a_bad_shape_grid_names_the_shape(tiny, shapes, param, what):
    raw = config_lib.read_yaml(tiny)
    with pytest.raises(tuning.TuningError, match=what) as caught:
        tuning.check_request(raw, [], tuning.Grid(shapes=shapes), (100, 101), "average")
    assert caught.value.param == param


def test_tuned_values_are_the_hparams_a_config_sets_for_each_winner():
    report = {
        "algorithms": {
            "rennala_nigt": {
                "chosen": {"lr_exp": -5, "learning_rate": 2**-5, "eta": 0.1, "M": 50},
                "tuned_shapes": ["M"],
            },
            "sync_nigt": {"chosen": {"learning_rate": 2**-6, "eta": 0.01}, "tuned_shapes": []},
            "afedpg": {"chosen": None, "tuned_shapes": []},  # no finite score
        }
    }
    values = tuning.tuned_values(report)
    assert values == {
        "rennala_nigt": {"learning_rate": 2**-5, "eta": 0.1, "M": 50, "M_init": 50},
        "sync_nigt": {"learning_rate": 2**-6, "eta": 0.01},
        "afedpg": None,
    }
    raw = tuning.tuned_raw(
        {"grid": {"eta": [0.1]}, "per_algorithm": {"afedpg": {"eta": 0.3}}}, report
    )
    assert "grid" not in raw and raw["per_algorithm"]["afedpg"] == {"eta": 0.3}  # kept
    assert raw["per_algorithm"]["rennala_nigt"]["M_init"] == 50


def test_a_relative_trace_on_the_command_line_is_the_working_directorys(tmp_path, monkeypatch):
    """``jaxnigt tune CONFIG --set cluster.power=trace:REL``: read from the working directory
    and recorded absolute, as ``jaxnigt run``'s --set (it stayed relative, so the tuning's
    programs read the path from wherever they ran)."""
    from jaxnigt import cli
    from jaxnigt.cli import grids

    (tmp_path / "down.csv").write_text("worker,start,speed\n2,1.5,0\n2,6,1\n")
    monkeypatch.chdir(tmp_path)
    demo = str(Path(__file__).resolve().parents[1] / "configs" / "demo.yaml")
    argv = ["tune", demo, "--out", "t", "--algorithms", "rennala_nigt"]
    args = cli.build_parser().parse_args([*argv, "--set", "cluster.power=trace:down.csv"])
    raw, *_ = grids._tune_request(args)
    assert raw["cluster"]["power"] == f"trace:{tmp_path / 'down.csv'}"
