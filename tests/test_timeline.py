"""Tests for the clock's timeline (jaxnigt.cluster.timeline), its drawing
(jaxnigt.cluster.timeline_plot) and `jaxnigt clock --plot` (jaxnigt.cli.clock_plot).

The drawn bars are read back from the figure's artists (each collection's ``gid`` names its
kind, each rectangle's corners are in data coordinates), never from pixels, and held to the
hand-computed worked examples of docs/cluster_model.md and to the clock's own CSV rows.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import chex
import jax
import numpy as np
import pytest

pytest.importorskip("matplotlib")

from jaxnigt import cli
from jaxnigt.cluster import model, rules, simulation, timeline, timeline_plot

ROOT = Path(__file__).parent.parent
S2, S3 = np.sqrt(2.0), np.sqrt(3.0)
#: docs/cluster_model.md's worked examples: n = 4, h_i = sqrt(i), kappa = 0.5, M = 8.
WORKED = ["--n", "4", "--h", "sqrt", "--kappa", "0.5", "--M", "8"]
DOWN = "worker,start,speed\n2,1.5,0\n2,6,1\n"  # docs/cluster_model.md's down.csv


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _drawn(ax, gid: str) -> list[tuple[int, float, float]]:
    """``(worker, start, end)`` of every bar of the collection ``gid``, sorted."""
    found = []
    for coll in ax.collections:
        if coll.get_gid() != gid:
            continue
        for path in coll.get_paths():
            v = path.vertices
            found.append((round(float(v[:, 1].mean())), v[:, 0].min(), v[:, 0].max()))
    return sorted(found)


def _lines(ax, gid: str = "round_end") -> np.ndarray:
    return np.array([ln.get_xdata()[0] for ln in ax.lines if ln.get_gid() == gid])


def _assert_bars(got, want):
    assert [b[0] for b in got] == [b[0] for b in want], (got, want)
    chex.assert_trees_all_close(
        np.array([b[1:] for b in got]), np.array([b[1:] for b in want], float), atol=1e-5
    )


def _clock(tmp_path, argv, name="c"):
    csv_path, png = tmp_path / f"{name}.csv", tmp_path / f"{name}.png"
    status = cli.main(["clock", *argv, "--out", str(csv_path), "--plot", str(png)])
    assert status == 0 and png.is_file()
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def _draw(rule, rounds=3, n=4, M=8, **kw):
    cluster = model.make_cluster_model(n, h=kw.pop("h", "sqrt"), kappa=kw.pop("kappa", 0.5), **kw)
    tl = timeline.clock_timeline(cluster, jax.random.key(0), rule=rule, rounds=rounds, M=M)
    return tl, timeline_plot.draw(tl)


def test_rennala_worked_example_bars():
    """Completions 1, 1.41, 1.73, 2, 2, 2.83, 3, 3.46: the 8th (worker 2's second, 2 sqrt 3)
    ends the collection with b = (3, 2, 2, 1); the others' work in flight is cancelled then;
    the AllReduce ends the round 0.5 later."""
    tl, ax = _draw("rennala", rounds=1)
    assert tl.exact
    T = 2 * S3
    compute = [(0, 0, 1), (0, 1, 2), (0, 2, 3), (1, 0, S2), (1, S2, 2 * S2), (2, 0, S3), (2, S3, T)]
    _assert_bars(_drawn(ax, "compute"), [*compute, (3, 0, 2)])
    _assert_bars(_drawn(ax, "wasted"), [(0, 3, T), (1, 2 * S2, T), (3, 2, T)])
    _assert_bars(_drawn(ax, "exchange"), [(i, T, T + 0.5) for i in range(4)])
    chex.assert_trees_all_close(_lines(ax), np.array([T + 0.5]), atol=1e-5)
    counts = [t.get_text().strip() for t in ax.texts if t.get_gid() == "count"]
    assert counts == ["3", "2", "2", "1"]


def test_malenia_and_sync_worked_examples():
    """Malenia collects until T = 4 with b = (4, 2, 2, 2); sync: every worker one gradient,
    T = 2, the round ends at 2.5."""
    tl, ax = _draw("malenia", rounds=1)
    want = [(0, k, k + 1) for k in range(4)] + [(1, 0, S2), (1, S2, 2 * S2)]
    want += [(2, 0, S3), (2, S3, 2 * S3), (3, 0, 2), (3, 2, 4)]
    _assert_bars(_drawn(ax, "compute"), want)
    _assert_bars(_drawn(ax, "wasted"), [(1, 2 * S2, 4), (2, 2 * S3, 4)])
    chex.assert_trees_all_close(_lines(ax), np.array([4.5]), atol=1e-5)
    chex.assert_trees_all_equal(tl.counts, np.array([[4, 2, 2, 2]]))
    tl, ax = _draw("sync", rounds=2)
    want = [(i, 0, h) for i, h in enumerate((1, S2, S3, 2))]
    want += [(i, 2.5, 2.5 + h) for i, h in enumerate((1, S2, S3, 2))]
    _assert_bars(_drawn(ax, "compute"), sorted(want))
    assert _drawn(ax, "wasted") == []
    chex.assert_trees_all_close(_lines(ax), np.array([2.5, 5.0]), atol=1e-5)


@pytest.mark.parametrize("rule", ["rennala", "malenia", "sync"])
def test_round_rules_against_the_clock_rows(tmp_path, rule):
    """Through the command line: the round lines are the CSV's t_end, each worker's counted
    gradients per round are its b_i, the AllReduces run from t_collect_end to t_end, and
    the CSV is the one written without --plot."""
    rows = _clock(tmp_path, [*WORKED, "--rounds", "3", "--rule", rule])
    cluster = model.make_cluster_model(4, h="sqrt", kappa=0.5)
    res = simulation.simulate_rule_rounds(
        cluster, jax.random.key(0), rule=rule, M=8, rounds=3, gradients=True
    )
    ax = timeline_plot.draw(timeline.from_rounds(cluster, jax.random.key(0), res, rule=rule))
    chex.assert_trees_all_close(_lines(ax), rows["t_end"], atol=1e-6)
    compute = _drawn(ax, "compute")
    for r, (t0, t1) in enumerate(zip(rows["t_start"], rows["t_end"], strict=True)):
        for i in range(4):
            mine = [b for b in compute if b[0] == i and t0 - 1e-6 <= b[1] < t1 - 1e-6]
            assert len(mine) == rows[f"b_{i}"][r], (r, i, mine)
            assert all(b[2] <= rows["t_collect_end"][r] + 1e-6 for b in mine)
    exchange = _drawn(ax, "exchange")
    want = [
        (i, T, t)
        for T, t in zip(rows["t_collect_end"], rows["t_end"], strict=True)
        for i in range(4)
    ]
    _assert_bars(exchange, sorted(want))
    plain = tmp_path / "plain.csv"
    assert cli.main(["clock", *WORKED, "--rounds", "3", "--rule", rule, "--out", str(plain)]) == 0
    assert plain.read_text() == (tmp_path / "c.csv").read_text()


def test_async_worked_example_against_the_clock_rows(tmp_path):
    """One shared link: each arrival's compute, wait and exchange are its CSV row's."""
    argv = ["--n", "4", "--h", "sqrt", "--kappa", "0.5", "--rule", "async", "--rounds", "6"]
    rows = _clock(tmp_path, [*argv, "--link", "shared"])
    cluster = model.make_cluster_model(4, h="sqrt", kappa=0.5)
    ax = timeline_plot.draw(
        timeline.clock_timeline(cluster, jax.random.key(0), rule="async", rounds=6)
    )
    w = rows["worker"].astype(int)
    queued = rows["t_compute_end"] + rows["link_wait"]
    want = lambda a, b: sorted((int(i), x, y) for i, x, y in zip(w, a, b, strict=True) if y > x)
    _assert_bars(_drawn(ax, "compute"), want(rows["t_dispatch"], rows["t_compute_end"]))
    _assert_bars(_drawn(ax, "wait"), want(rows["t_compute_end"], queued))
    _assert_bars(_drawn(ax, "exchange"), want(queued, rows["t_arrival"]))
    # worker 1 waits for worker 0's exchange until 1.5; worker 0 finishes again at 2.5
    assert (1, pytest.approx(S2), pytest.approx(1.5)) in _drawn(ax, "wait")
    assert (0, pytest.approx(1.5), pytest.approx(2.5)) in _drawn(ax, "compute")
    assert len(_lines(ax)) == 0  # no rounds: the server updates at every arrival


def test_outage_worked_example(tmp_path, monkeypatch):
    """Worker 1 (the CSV's b_1) is down on [1.5, 6): sync's second round waits for it until
    6.5; Rennala's rounds end at 2, 4, 6 without it."""
    monkeypatch.chdir(tmp_path)
    Path("down.csv").write_text(DOWN)
    base = ["--n", "3", "--h", "1", "--M", "4", "--rounds", "3", "--power", "trace:down.csv"]
    rows = _clock(tmp_path, [*base, "--rule", "sync"], "s")
    chex.assert_trees_all_close(rows["t_end"], np.array([1.0, 6.5, 7.5]), atol=1e-6)
    cluster = model.make_cluster_model(3, h=1, power="trace:down.csv")
    tl = timeline.clock_timeline(cluster, jax.random.key(0), rule="sync", rounds=3, M=4)
    ax = timeline_plot.draw(tl)
    chex.assert_trees_all_close(_lines(ax), rows["t_end"], atol=1e-6)
    assert (1, 1.0, 6.5) in [(w, round(a, 5), round(b, 5)) for w, a, b in _drawn(ax, "compute")]
    _assert_bars(_drawn(ax, "power_down"), [(1, 1.5, 6.0)])
    rows = _clock(tmp_path, [*base, "--rule", "rennala"], "r")
    tl = timeline.clock_timeline(cluster, jax.random.key(0), rule="rennala", rounds=3, M=4)
    ax = timeline_plot.draw(tl)
    chex.assert_trees_all_close(_lines(ax), np.array([2.0, 4.0, 6.0]), atol=1e-6)
    assert [b for b in _drawn(ax, "compute") if b[0] == 1] == [(1, 0.0, 1.0)]
    assert sum(b[0] == 0 for b in _drawn(ax, "compute")) == rows["b_0"].sum() == 6


def test_a_rule_of_ones_own_is_drawn_from_its_draws(monkeypatch):
    """A registered rule drawn with rules.draw_times is drawn per gradient; one that draws
    otherwise is not (only its exchanges and round ends, with a note)."""
    registry = sys.modules[rules.get_rule.__module__]  # the rules leave with the test
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @rules.register_rule("timeline_first_m")
    def first_m(m, key, t0, busy_until, size):
        """Rennala's rule on draw_times."""
        tau = rules.draw_times(m, key, size)
        stop = lambda done: rules.kth_smallest(done, size.value("M"))
        return rules.collect_until(m, tau, t0, busy_until, stop, slots=size.M)

    @rules.register_rule("timeline_own_draws")
    def own(m, key, t0, busy_until, size):
        """Rennala's rule on draws of its own."""
        tau = rules.draw_times(m, jax.random.fold_in(key, 7), size)
        stop = lambda done: rules.kth_smallest(done, size.value("M"))
        return rules.collect_until(m, tau, t0, busy_until, stop, slots=size.M)

    kw = {"n": 5, "M": 6, "noise": "exponential"}
    tl, ax = _draw("timeline_first_m", **kw)
    assert tl.exact and len(_drawn(ax, "compute")) == 18
    tl, ax = _draw("timeline_own_draws", **kw)
    assert not tl.exact and _drawn(ax, "compute") == [] and len(_drawn(ax, "exchange")) == 15
    assert any(t.get_gid() == "note" for t in ax.texts)


@pytest.mark.parametrize("inflight", ["cancel", "discard"])
@pytest.mark.parametrize("rule,M", [("rennala", 7), ("malenia", 3), ("msync", 3), ("sync", 2)])
def test_bars_add_up_to_the_rounds(rule, M, inflight):
    """Under noise: every worker's counted gradients per round are its b_i, its bars never
    overlap, and the counted work adds up to the round's time_used."""
    cluster = model.make_cluster_model(
        5, h="sqrt", noise="exponential", kappa=0.2, inflight=inflight
    )
    res = simulation.simulate_rule_rounds(
        cluster, jax.random.key(4), rule=rule, M=M, rounds=4, gradients=True
    )
    plain = simulation.simulate_rule_rounds(cluster, jax.random.key(4), rule=rule, M=M, rounds=4)
    chex.assert_trees_all_equal({k: res[k] for k in plain}, plain)  # the same rounds
    tl = timeline.from_rounds(cluster, jax.random.key(4), res, rule=rule)
    assert tl.exact
    compute = tl.bars("compute")
    got = np.zeros((4, 5), int)
    np.add.at(got, (compute["group"], compute["worker"]), 1)
    chex.assert_trees_all_equal(got, np.asarray(res["counts"], int))
    work = np.bincount(compute["group"], compute["end"] - compute["start"], minlength=4)
    chex.assert_trees_all_close(work, np.asarray(res["time_used"], float), rtol=1e-4)
    for i in range(5):
        mine = tl.kind != timeline.KINDS.index("exchange")
        order = np.argsort(tl.start[mine & (tl.worker == i)])
        s, e = tl.start[mine & (tl.worker == i)][order], tl.end[mine & (tl.worker == i)][order]
        assert np.all(s[1:] >= e[:-1] - 1e-5), (i, s, e)


def test_ringmaster_and_seed_draw_their_rows(tmp_path):
    """Ringmaster's refused gradients are wasted, its applied ones computed; SEED RL's
    trajectories run back to back per worker, learner updates end its rounds."""
    argv = ["--n", "4", "--h", "sqrt", "--noise", "exponential", "--kappa", "0.1"]
    rows = _clock(tmp_path, [*argv, "--rule", "ringmaster", "--R", "2", "--rounds", "20"])
    cluster = model.make_cluster_model(4, h="sqrt", noise="exponential", kappa=0.1)
    tl = timeline.clock_timeline(cluster, jax.random.key(0), rule="ringmaster", rounds=20, R=2)
    ok = rows["accepted"] == 1
    assert len(tl.bars("compute")["start"]) == ok.sum()
    chex.assert_trees_all_close(
        np.sort(tl.bars("wasted")["end"][tl.bars("wasted")["group"] < 20]),
        np.sort(rows["t_compute_end"][~ok]),
        atol=1e-6,
    )
    rows = _clock(tmp_path, [*argv, "--rule", "seed", "--horizon", "4", "--rounds", "3"], "s")
    tl = timeline.clock_timeline(cluster, jax.random.key(0), rule="seed", rounds=3, horizon=4)
    traj = tl.bars("trajectory")
    chex.assert_trees_all_close(np.sort(traj["end"]), np.sort(rows["t_end"]), atol=1e-6)
    chex.assert_trees_all_equal(tl.counts.sum(axis=1), np.full(3, 4))


def test_more_than_32_workers_draw_the_workers_per_state(tmp_path, capsys):
    """n > 32: no rows, the workers computing / wasting / exchanging over time instead."""
    cluster = model.make_cluster_model(40, h=1.0, kappa=0.5)
    tl = timeline.clock_timeline(cluster, jax.random.key(0), rule="sync", rounds=2, M=40)
    assert timeline_plot.view(tl) == "density"
    ax = timeline_plot.draw(tl)
    assert _drawn(ax, "compute") == []
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "density:computing"]
    x, y = line.get_xdata(), line.get_ydata()
    assert y[np.searchsorted(x, 0.5, side="right") - 1] == 40  # all 40 compute on [0, 1)
    assert y[np.searchsorted(x, 1.2, side="right") - 1] == 0
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "density:exchanging"]
    assert line.get_ydata()[np.searchsorted(line.get_xdata(), 1.2, side="right") - 1] == 40
    chex.assert_trees_all_close(_lines(ax), np.array([1.5, 3.0]))
    out = tmp_path / "big.png"
    argv = [
        "clock",
        "--n",
        "40",
        "--rule",
        "sync",
        "--out",
        str(tmp_path / "b.csv"),
        "--plot",
        str(out),
    ]
    assert cli.main(argv) == 0 and out.is_file()
    assert "(workers per state over time)" in capsys.readouterr().out


@pytest.mark.parametrize("ext,magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_plot_format_by_extension(tmp_path, ext, magic):
    out = tmp_path / f"t{ext}"
    argv = ["clock", *WORKED, "--rounds", "2", "--out", str(tmp_path / "c.csv"), "--plot", str(out)]
    assert cli.main(argv) == 0
    assert out.read_bytes().startswith(magic)


@pytest.mark.parametrize(
    "plot,says",
    [
        ("t.xyz", "is no image format"),
        ("c.csv", "is no image format"),
        ("no/dir/t.png", "existing"),
    ],
)
def test_bad_plot_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, plot, says):
    monkeypatch.chdir(tmp_path)
    status = cli.main(["clock", "--n", "3", "--out", "c.csv", "--plot", plot])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "--plot: " in err[0] and says in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_plot_may_not_be_the_csv(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["clock", "--n", "3", "--out", "c.png", "--plot", "c.png"]) == 2
    assert "also the CSV's path" in capsys.readouterr().err


def test_docs_worked_examples_show_their_pictures():
    """Every picture of docs/cluster_model.md is committed, and the command that makes it is
    written beside it."""
    text = (ROOT / "docs" / "cluster_model.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\((cluster_model/[^)]+)\)", text)
    assert len(images) >= 6 and any("outage" in i for i in images), images
    for image in images:
        assert (ROOT / "docs" / image).is_file(), image
        assert f"--plot docs/{image}" in text, image
