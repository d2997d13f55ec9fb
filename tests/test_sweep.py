"""Tests for jaxnigt.studies.sweep and ``jaxnigt sweep``: the grid, the table, resume, failures."""

import csv
import json
import sys
import time

import pytest
import yaml
from children import TIMEOUT, Child, child_env
from tasks import assert_plot

from jaxnigt import cli
from jaxnigt import config as config_lib
from jaxnigt.studies import sweep

BASE = """
name: tiny_sweep
algorithms: [rennala_nigt, sync_nigt]
seeds: 2
budget: 30.0
env: {name: point_mass}
cluster: {n: 2, h: sqrt, kappa: 0.5}
hparams: {M: 4, learning_rate: 0.05, eta: 0.3}
eval: {every: 3, episodes: 2}
checkpoint_every: 1
sweep:
  over: {cluster.n: [2, 4], hparams.eta: [0.3, 0.5]}
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    cfg = root / "s.yaml"
    cfg.write_text(BASE)
    out = root / "out"
    code = cli.main(["sweep", str(cfg), "--out", str(out), "--no-progress"])
    return code, cfg, out


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_two_by_two_sweep_writes_points_table_and_plot(swept):
    code, _, out = swept
    assert code == 0
    # eta is traced: the second eta of each n reuses the first's compiled programs
    points = ["cluster.n=2,hparams.eta=0.3", "cluster.n=2,hparams.eta=0.5"]
    points += ["cluster.n=4,hparams.eta=0.3", "cluster.n=4,hparams.eta=0.5"]
    for p in points:
        for name in ("config.yaml", "metrics.csv", "summary.json"):
            assert (out / p / name).is_file(), (p, name)
    rows = _rows(out / "sweep.csv")
    assert [(r["point"], r["algorithm"]) for r in rows] == [
        (p, a) for p in points for a in ("rennala_nigt", "sync_nigt")
    ]
    for r in rows:
        summary = json.loads((out / r["point"] / "summary.json").read_text())[r["algorithm"]]
        assert float(r["final_median_return"]) == pytest.approx(summary["final_median_return"])
        assert float(r["best_median_return"]) == pytest.approx(summary["best_median_return"])
        assert r["status"] == "done" and int(r["seeds"]) == 2
        assert float(r["compile_seconds"]) > 0 and float(r["wall_seconds"]) > 0
        # every point shares the sweep's targets
        assert r["target_0.5"] == rows[0]["target_0.5"]
    assert {r["cluster.n"] for r in rows} == {"2", "4"}
    assert_plot(out / "sweep.png")


def test_plot_redraws_a_sweep(swept, tmp_path, capsys):
    _, _, out = swept
    png = tmp_path / "again.png"
    assert cli.main(["plot", str(out), "--x", "hparams.eta", "--out", str(png)]) == 0
    assert_plot(png)
    capsys.readouterr()
    assert cli.main(["plot", str(out), "--x", "cluster.h"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    swept_keys = ["cluster.n", "hparams.eta"]
    assert err == [f"jaxnigt: error: --x: 'cluster.h' is not a swept key; swept: {swept_keys}"]


def test_failing_point_is_recorded_and_others_go_on(tmp_path, capsys):
    cfg = tmp_path / "f.yaml"
    text = BASE.split("sweep:")[0].replace("[rennala_nigt, sync_nigt]", "[malenia_nigt]")
    cfg.write_text(text.replace("h: sqrt", "h: [1.0, 10.0]"))
    out = tmp_path / "out"
    argv = ["sweep", str(cfg), "--over", "hparams.malenia_capacity=1,64", "--out", str(out)]
    assert cli.main([*argv, "--no-progress"]) == 0
    rows = {r["point"]: r for r in _rows(out / "sweep.csv")}
    failed = rows["hparams.malenia_capacity=1"]
    assert failed["status"] == "failed" and "capacity overflow" in failed["message"]
    assert rows["hparams.malenia_capacity=64"]["status"] == "done"
    assert "1 failed point(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "over, what",
    [
        ("cluster.bogus=1,2", "cluster.bogus"),
        ("cluster.n=0,2", "cluster.n"),
        ("cluster.n", "KEY=V1,V2"),
        ("hparams.M=", "comma-separated"),
        ("cluster.n=2,2", "--over cluster.n: got 2 twice"),
        ("cluster.n=2,2.0,3", "cluster.n=2 and cluster.n=2.0 would run them alike"),
    ],
)
def test_bad_over_exits_2_and_writes_nothing(tmp_path, capsys, over, what):
    cfg = tmp_path / "b.yaml"
    cfg.write_text(BASE.split("sweep:")[0])
    out = tmp_path / "out"
    assert cli.main(["sweep", str(cfg), "--over", over, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0], err
    assert not out.exists()


def test_nothing_to_sweep(tmp_path, capsys):
    cfg = tmp_path / "b.yaml"
    cfg.write_text(BASE.split("sweep:")[0])
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "o")]) == 2
    assert "nothing to sweep" in capsys.readouterr().err


def test_sweep_refuses_a_used_directory(tmp_path, capsys):
    cfg = tmp_path / "b.yaml"
    cfg.write_text(BASE)
    out = tmp_path / "o"
    out.mkdir()
    (out / "x").write_text("mine")
    assert cli.main(["sweep", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out {str(out)!r} exists and is not empty" in err[0], err
    assert "pass --overwrite" in err[0] and sorted(p.name for p in out.iterdir()) == ["x"]
    with pytest.raises(sweep.SweepError, match="nothing to sweep"):
        sweep.sweep_points(yaml.safe_load(BASE.split("sweep:")[0]), {})


def test_resume_after_a_kill_skips_finished_points(tmp_path):
    cfg = tmp_path / "s.yaml"
    # the fixture's shapes (n = 2, 4): the child loads their programs from the suite's cache
    cfg.write_text(BASE.replace(", hparams.eta: [0.3, 0.5]", ""))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "jaxnigt.cli", "sweep", str(cfg), "--out", str(out)]
    proc = Child([*argv, "--no-progress"], tmp_path / "logs", env=child_env())
    second = out / "cluster.n=4"  # the first program is done once a point's directory exists
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and proc.poll() is None and not second.is_dir():
        time.sleep(0.05)
    assert proc.poll() is None, f"the sweep ended before it could be killed\n{proc.tail()}"
    proc.kill()
    assert not (out / "sweep.csv").exists()
    logs = []
    code = sweep.run_sweep(
        config_lib.read_yaml(cfg),
        {"cluster.n": [2, 4]},
        out,
        resume=True,
        progress=False,
        log=logs.append,
    )
    assert [r["status"] for r in code] == ["done"] * 4, code
    # The points' programs are padded (n = 2 and 4 in one): the first program's
    # algorithm finished for both points before the kill and is kept.
    kept = [line for line in logs if "finished earlier; kept" in line]
    assert any(line.startswith("[sweep] cluster.n=2: rennala_nigt") for line in kept), logs
    assert [r["point"] for r in _rows(out / "sweep.csv")] == ["cluster.n=2"] * 2 + [
        "cluster.n=4"
    ] * 2


def test_the_demo_sweeps_over_n_from_two_up():
    """The demo carries values for algorithms it does not run (msync_nigt's m = 10): they
    are not checked against each point's cluster."""
    from jaxnigt import config as config_lib

    raw = config_lib.read("configs/demo.yaml")
    points = sweep.sweep_points(raw, {"cluster.n": [2, 3, 4, 16]}, ["seeds=1"])
    assert [p.config.cluster.n for p in points] == [2, 3, 4, 16]
    with pytest.raises(sweep.SweepError, match=r"cluster.n=4: per_algorithm.msync_nigt.msync_m"):
        sweep.sweep_points(raw, {"cluster.n": [4, 16]}, ["algorithms=[msync_nigt]"])


def test_plan_and_sweep_plan_the_configs_sweep_section_with_the_over_axes(tmp_path, capsys):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(BASE.replace(", hparams.eta: [0.3, 0.5]", ""))
    over = ["--over", "hparams.learning_rate=0.05,0.1", "--set", "algorithms=[rennala_nigt]"]
    assert cli.main(["plan", str(cfg), *over]) == 0
    out = capsys.readouterr().out
    assert "4 points; 1 programs" in out, out
    assert (
        "cluster.n=2,hparams.learning_rate=0.05;" in out
        and "cluster.n=4,hparams.learning_rate=0.1]" in out
    )
    raw = config_lib.read(cfg)
    points = sweep.sweep_points(raw, {"hparams.learning_rate": [0.05, 0.1]})
    assert [p.values for p in points] == [
        {"cluster.n": n, "hparams.learning_rate": a} for n in (2, 4) for a in (0.05, 0.1)
    ]


def test_plan_of_a_config_with_a_sweep_section_plans_its_points(tmp_path, capsys):
    """Without --over, ``plan`` plans the config's sweep: section as ``sweep`` would run it
    (the bundled n_scaling_cpu: 4 points of n), not the base point with a warning."""
    argv = ["plan", "sweeps/n_scaling_cpu", "--set", "algorithms=[rennala_nigt]", "--seeds", "1"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "sweep:" not in err and "own point" not in err, err
    assert "4 points; 1 programs" in out, out
    assert all(f"cluster.n={n}" in out for n in (10, 30, 100, 300)), out
    # the same text as plan --over gives for the same points
    cfg = tmp_path / "s.yaml"
    text = config_lib.bundled.find("sweeps/n_scaling_cpu").read_text()
    cfg.write_text(text.split("sweep:")[0])
    assert cli.main([*argv[:1], str(cfg), *argv[2:], "--over", "cluster.n=10,30,100,300"]) == 0
    assert capsys.readouterr().out == out


@pytest.mark.parametrize("command", ["plan", "sweep"])
def test_an_axis_that_cannot_change_an_algorithms_runs_is_refused(tmp_path, capsys, command):
    # The demo's per_algorithm sets Rennala NIGT's M: hparams.M would run it alike thrice.
    out = tmp_path / "out"
    argv = [command, "configs/demo.yaml", "--over", "hparams.M=20,30,50"]
    assert cli.main([*argv, *(["--out", str(out)] if command == "sweep" else [])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hparams.M cannot change rennala_nigt's runs" in err[0], err
    assert (
        "per_algorithm.rennala_nigt sets M" in err[0]
        and "sweep per_algorithm.rennala_nigt.M" in err[0]
    )
    assert not out.exists()
    # A cluster choice that one algorithm's runs do not depend on (its Traits.cluster_options).
    raw = config_lib.read("configs/demo.yaml")
    with pytest.raises(sweep.SweepError, match=r"cluster\.link cannot change rennala_nigt.s runs"):
        sweep.sweep_points(raw, {"cluster.link": ["shared", "independent"]}, ["seeds=1"])
    only = ["seeds=1", "algorithms=[afedpg]"]
    assert len(sweep.sweep_points(raw, {"cluster.link": ["shared", "independent"]}, only)) == 2


def test_a_point_directory_is_one_path_component_whatever_the_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "down.csv").write_text("worker,start,speed\n1,0,1\n2,0,1\n")
    (tmp_path / "sub%2Fdown.csv").write_text("worker,start,speed\n1,0,1\n2,0,1\n")
    raw = yaml.safe_load(BASE.split("sweep:")[0])
    values = ["trace:sub/down.csv", "trace:sub%2Fdown.csv", "constant"]
    names = [p.name for p in sweep.sweep_points(raw, {"cluster.power": values})]
    assert names == [
        "cluster.power=trace:sub%2Fdown.csv",
        "cluster.power=trace:sub%252Fdown.csv",
        "cluster.power=constant",
    ]


def test_a_relative_trace_the_command_line_sweeps_is_the_working_directorys(tmp_path, monkeypatch):
    """--over cluster.power=trace:REL (and --set's) is read from the working directory and
    each point's config records it absolute, as ``jaxnigt run --set`` does; a config file's
    sweep: values are its folder's; the point's name keeps the value as given."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for where in ("down.csv", "sub/down.csv"):
        (tmp_path / where).write_text("worker,start,speed\n1,0,1\n2,0,1\n")
    here, beside = f"trace:{tmp_path / 'down.csv'}", f"trace:{tmp_path / 'sub' / 'down.csv'}"
    raw = yaml.safe_load(BASE.split("sweep:")[0])
    points = sweep.sweep_points(raw, {"cluster.power": ["trace:down.csv", "constant"]})
    assert [p.config.cluster.power for p in points] == [here, "constant"]
    assert points[0].name == "cluster.power=trace:down.csv"
    points = sweep.sweep_points(raw, {"cluster.n": [2, 3]}, ["cluster.power=trace:down.csv"])
    assert {p.config.cluster.power for p in points} == {here}
    cfg = tmp_path / "sub" / "s.yaml"
    cfg.write_text(BASE.split("sweep:")[0] + "sweep:\n  over: {cluster.power: [trace:down.csv]}\n")
    (point,) = sweep.sweep_points(config_lib.read(cfg), {})
    assert point.config.cluster.power == beside
