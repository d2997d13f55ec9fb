"""Tests for jaxnigt.studies.sweep_programs: a sweep's points grouped into padded programs
give the sweep the points give one at a time (``--per-point``), and ``jaxnigt plan --over``
prints the programs before anything runs."""

from __future__ import annotations

import csv
import json
import math

import pytest
import yaml

from jaxnigt import cli
from jaxnigt.studies import sweep, sweep_programs

BASE = """
name: grouped
algorithms: [rennala_nigt, sync_nigt]
seeds: 2
budget: 40.0
env: {name: point_mass}
cluster: {n: 2, h: sqrt, kappa: 0.5, noise: "straggler:0.1:10"}
hparams: {M: 4, M_init: 6, learning_rate: 0.05, eta: 0.3}
eval: {every: 3, every_time: 10.0, episodes: 2}
"""
# M = 4 with M_init = 6: a round 0 of its own shape; M = 6: none. One program holds both.
OVER = ["--over", "cluster.n=2,5", "--over", "hparams.M=4,6"]
TIMING = ("wall_seconds", "compile_seconds")


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    root = tmp_path_factory.mktemp("grouped")
    cfg = root / "g.yaml"
    cfg.write_text(BASE)
    out = {}
    for form, flags in (("grouped", []), ("per_point", ["--per-point"])):
        out[form] = root / form
        argv = ["sweep", str(cfg), *OVER, "--out", str(out[form]), "--no-progress", *flags]
        assert cli.main(argv) == 0
    return cfg, out


def test_a_grouped_sweep_is_the_sweep_of_its_points_one_at_a_time(sweeps):
    _, out = sweeps
    grouped, alone = _rows(out["grouped"] / "sweep.csv"), _rows(out["per_point"] / "sweep.csv")
    assert [(r["point"], r["algorithm"]) for r in grouped] == [
        (r["point"], r["algorithm"]) for r in alone
    ]
    for a, b in zip(grouped, alone, strict=True):
        for column, value in b.items():
            if column in TIMING or value == a[column]:
                continue
            # Returns agree to float32 rounding (a padded rollout batch, a longer sum).
            assert math.isclose(float(a[column]), float(value), rel_tol=1e-4), (column, a, b)
    for point in {r["point"] for r in alone}:
        for name in ("config.yaml", "worker_counts.csv"):
            assert (out["grouped"] / point / name).read_text() == (
                out["per_point"] / point / name
            ).read_text(), (point, name)
        summary = json.loads((out["grouped"] / point / "summary.json").read_text())
        assert list(summary) == ["rennala_nigt", "sync_nigt"]
        assert all(entry["finished"] for entry in summary.values())


def test_the_plan_of_a_sweep_names_its_programs(sweeps, capsys):
    cfg, _ = sweeps
    assert cli.main(["plan", str(cfg), *OVER]) == 0
    text = capsys.readouterr().out
    assert "4 points; 2 programs (rennala_nigt 1, sync_nigt 1):" in text
    assert "1. rennala_nigt: 4 points, 8 runs, n <= 5, M <= 6:" in text
    assert "trajectories per step" in text and "MB per step" in text
    assert cli.main(["plan", str(cfg), *OVER, "--max-padding", "2"]) == 0
    assert "4 programs (rennala_nigt 2, sync_nigt 2)" in capsys.readouterr().out
    assert cli.main(["plan", str(cfg), *OVER, "--per-point"]) == 0
    assert "8 programs" in capsys.readouterr().out


def test_a_bad_padding_cap_is_one_line(sweeps, capsys):
    cfg, out = sweeps
    argv = ["sweep", str(cfg), *OVER, "--out", str(out["grouped"] / "x"), "--max-padding", "0.5"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["jaxnigt: error: --max-padding: got 0.5; expected a number >= 1"], err


def test_programs_count_runs_and_bounds():
    raw = yaml.safe_load(BASE)
    points = sweep.sweep_points(raw, {"cluster.n": [2, 5, 9]})
    plan = sweep_programs.programs(points)
    assert [(p.algorithm, p.members, p.runs, p.n_max) for p in plan] == [
        ("rennala_nigt", (0, 1, 2), 6, 9),
        ("sync_nigt", (0, 1, 2), 6, 9),
    ]
    skip = lambda i, a: i == 0 and a == "sync_nigt"
    assert [p.members for p in sweep_programs.programs(points, skip=skip)][1] == (1, 2)
    assert len(sweep_programs.per_point(points)) == 6
