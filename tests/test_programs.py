"""Tests for jaxnigt.studies.programs: one tuning program per combination of the tuned shape
hyperparameters (M, msync_m, ringmaster_R), its raw config and name (no compiles)."""

import types

import pytest
import yaml

from jaxnigt import algorithms
from jaxnigt.studies import programs
from jaxnigt.studies.grid import Grid

RAW = """
name: tiny_tune
algorithms: [rennala_nigt, sync_pg]
seeds: 2
budget: 150.0
env: {name: point_mass}
cluster: {n: 2, h: equal, kappa: 0.0}
hparams: {M: 4, learning_rate: 0.05, eta: 0.5}
per_algorithm: {msync_nigt: {msync_m: 2, learning_rate: 0.3, M: 4}}
sweep: {over: {cluster.n: [2, 3]}}
"""


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


def test_each_combination_of_the_tuned_shapes_is_one_program(shaped):
    # a made-up algorithm tuning all three shapes (ringmaster_R needs no algorithm of its own)
    shaped(msync_nigt=("ringmaster_R", "msync_m", "M"))
    grid = Grid(shapes={"ringmaster_R": (10, 40), "M": (6,), "msync_m": (1, 2, 3)})
    shapes_of = programs.program_shapes("msync_nigt", grid)
    assert len(shapes_of) == 6
    assert programs.tuned_shapes("msync_nigt", grid) == ("M", "msync_m", "ringmaster_R")
    raw = yaml.safe_load(RAW)
    seen = set()
    for shapes in shapes_of:
        out = programs.program_raw(raw, "msync_nigt", shapes, [-3], [0.5], (100, 101))
        m, R = shapes["msync_m"], shapes["ringmaster_R"]
        assert out["name"] == f"tune_msync_nigt_M6_msync_m{m}_ringmaster_R{R}"
        assert out["per_algorithm"] == {
            "msync_nigt": {"msync_m": m, "M": 6, "M_init": 6, "ringmaster_R": R}
        }
        seen.add((m, R))
    assert seen == {(m, R) for m in (1, 2, 3) for R in (10, 40)}
    # an algorithm that tunes none of them: one program, the config's values, no tag
    assert programs.program_shapes("sync_pg", grid) == [{}]
    out = programs.program_raw(raw, "sync_pg", {}, [-3], [0.5], (100, 101))
    assert out["name"] == "tune_sync_pg" and out["per_algorithm"] == {}
    assert programs.program_raw(raw, "rennala_nigt", {"M": 20}, [-3], [0.5], (100,))["name"] == (
        "tune_rennala_nigt_M20"  # the tag of M as before: earlier run directories resume
    )


def test_a_program_is_one_algorithm_on_the_tuning_seeds_and_its_grid():
    raw = yaml.safe_load(RAW)
    out = programs.program_raw(raw, "rennala_nigt", {}, [-3, -2], [0.1, 0.5], (100, 101, 102))
    assert "sweep" not in out and out["algorithms"] == ["rennala_nigt"]
    assert (out["seed"], out["seeds"], out["on_nonfinite"]) == (100, 3, "mark")
    assert out["target_return"] is None
    assert out["grid"] == {"learning_rate": [0.125, 0.25], "eta": [0.1, 0.5]}
    assert raw["per_algorithm"]["msync_nigt"]["learning_rate"] == 0.3  # raw is left as it was
    # an algorithm that reads no η runs the config's own; one that does, the grid's
    hp = types.SimpleNamespace(eta=0.5)
    assert programs.program_etas("sync_pg", hp, Grid(eta=(0.01, 0.1))) == (0.5,)
    assert programs.program_etas("rennala_nigt", hp, Grid(eta=(0.01, 0.1))) == (0.01, 0.1)


def test_a_plan_names_the_directory_and_announces_the_grid(tmp_path):
    from jaxnigt import config as config_lib

    raw = yaml.safe_load(RAW)
    hp = config_lib.from_dict(programs.without_sweep(raw)).hparams_for("rennala_nigt")
    program, run_dir, line = programs.plan_program(
        raw, "rennala_nigt", hp, tmp_path, Grid(eta=(0.5,)), {"M": 8}, [-4, -3], (100, 101)
    )
    assert run_dir == tmp_path / "runs" / "rennala_nigt_M8_lr-4..-3"
    assert program["name"] == "tune_rennala_nigt_M8"
    assert line == (f"[tune] rennala_nigt M=8: α = 2^-4 … 2^-3 (2) × η 0.5 × 2 seeds -> {run_dir}")


def test_a_padded_pool_runs_a_rounds_programs_of_one_algorithm_together(tmp_path):
    """Rennala's M = 4 and M = 6 programs share one padded program; each writes its own
    finished run directory, and a second round finds them finished."""
    from jaxnigt import config as config_lib
    from jaxnigt.run import checkpoint

    raw = yaml.safe_load(RAW)
    raw.update(seeds=1, budget=20.0)
    grid = Grid(lr_exp=(-3, -2), eta=(0.5,), shapes={"M": (4, 6)})
    lines = []
    pool = programs.PaddedPool(tmp_path / ".programs", progress=False, log=lines.append)
    dirs = []
    for shapes in programs.program_shapes("rennala_nigt", grid):
        hp = config_lib.from_dict(programs.without_sweep(raw)).hparams_for("rennala_nigt")
        program, run_dir, _ = programs.plan_program(
            raw, "rennala_nigt", hp, tmp_path, grid, shapes, [-3, -2], [0]
        )
        pool.submit((program, str(run_dir), False, None), run_dir.name)
        dirs.append((config_lib.from_dict(program), run_dir))
    assert pool.busy and pool.wait() == [0, 1] and not pool.busy
    assert any("2 programs as one padded program" in line for line in lines), lines
    for cfg, run_dir in dirs:
        assert checkpoint.finished(run_dir, cfg), run_dir
        assert (run_dir / "metrics.csv").read_text().count("rennala_nigt") > 2
    again = programs.PaddedPool(tmp_path / ".programs", progress=False, log=lines.append)
    for cfg, run_dir in dirs:
        again.submit((cfg.to_dict(), str(run_dir), False, None), run_dir.name)
    assert again.wait() == [0, 1]
    assert sum("finished earlier with this config; kept" in line for line in lines) == 2
