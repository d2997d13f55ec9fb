"""scripts/paper/third.py: the third edition's scenarios, grids and stages, and a tuning
stage kept in the results store (also when interrupted) and resumed from it on a fresh
machine (its pipeline runs whole in tests/test_gpu_scripts.py's and test_site_jax.sh's tiny
mode; the sizing rules: tests/test_paper_sizing.py)."""

import json
import math
import os
import shutil
import signal
import time

import pytest
from paper import cli, fourth, third, third_scenarios
from paper.third_scenarios import SCENARIOS

from jaxnigt.run import checkpoint, signals
from jaxnigt.studies import store


def test_a_variant_changes_only_the_grids_it_names():
    assert third.variant_grid() is None  # the paper's grid, PAPER_GRID, unchanged
    eta = third.variant_grid(eta=(0.001, 0.01, 0.1, 0.3, 1.0))
    assert eta.eta == (0.001, 0.01, 0.1, 0.3, 1.0)
    assert eta.shapes == {"M": (20, 30, 50)} and eta.lr_exp == tuple(range(-10, 0))
    both = third.variant_grid(eta=(0.1, 1.0), m=(20, 30, 50, 80, 120, 200))
    assert both.eta == (0.1, 1.0) and both.shapes == {"M": (20, 30, 50, 80, 120, 200)}
    assert third_scenarios.PAPER_GRID.shapes == {"M": (20, 30, 50)}  # not changed in place
    ms = cli._numbers("M", int, 0, math.inf)
    assert ms("80,20,80") == (20, 80)  # parsed, deduplicated and sorted
    with pytest.raises(Exception, match="M"):
        ms("0,20")


def test_the_matched_batch_of_a_sensitivity_run_follows_the_reference_tuned_M(tmp_path):
    pipe = third.Pipeline(SCENARIOS["point_mass_sqrt_dim"], tmp_path, tmp_path)
    pipe.size(4000.0, 20.0, "test")
    won = {"lr_exp": -2, "learning_rate": 0.25, "eta": 1.0, "M": 200}
    algorithms = {
        "rennala_nigt": {"chosen": won, "tuned_shapes": ["M"]},
        "sync_nigt": {"chosen": {"learning_rate": 0.03125, "eta": 0.3, "M": 20}},
        "afedpg": {"chosen": {"learning_rate": 0.015625, "eta": 0.1, "M": 20}},
    }
    (pipe.where / "tune").mkdir()
    (pipe.where / "tune" / "tuning.json").write_text(json.dumps({"algorithms": algorithms}))
    assert pipe.matched() == {"per_worker_batch": "match_M", "M": 200}  # b = 200 / 10 = 20
    raws = {tag: raw for tag, _, raw in pipe.tunings([third.DEFAULT_MODEL])}
    assert raws["tune__match_M"]["hparams"]["M"] == 200
    assert raws["tune"]["hparams"]["M"] == 20  # the grid, not the base, sets Rennala's M
    sync = {"sync_nigt": {"chosen": {"learning_rate": 0.0625, "eta": 0.3, "M": 20}}}
    (pipe.where / "tune__match_M").mkdir()
    (pipe.where / "tune__match_M" / "tuning.json").write_text(json.dumps({"algorithms": sync}))
    runs = dict(pipe.runs([third.DEFAULT_MODEL]))
    per = runs["point_mass_sqrt_dim__match_M"]["per_algorithm"]
    assert per["sync_nigt"] == {"learning_rate": 0.0625, "eta": 0.3, **pipe.matched()}
    assert per["rennala_nigt"]["M"] == per["rennala_nigt"]["M_init"] == 200
    # the config loads, and Sync NIGT's batch is ceil(M / n) = 20 per worker
    from jaxnigt import config as config_lib

    cfg = config_lib.from_dict(runs["point_mass_sqrt_dim__match_M"])
    assert cfg.hparams_for("sync_nigt").M == 200


def test_a_look_at_the_budget_it_sizes_is_the_tuning(tmp_path, monkeypatch):
    # point_mass_hetero: the budget is the look's, so a tune stage would rerun the same grid
    pipe = third.Pipeline(SCENARIOS["point_mass_hetero"], tmp_path, tmp_path)
    pipe.size(60000.0, 600.0, "test")
    assert not pipe.look_is_tuning()  # no look: nothing to reuse
    sizing = {**pipe.sizing(), "look_budget": 60000.0}
    (pipe.where / "sizing.json").write_text(json.dumps(sizing))
    (pipe.where / "look").mkdir()
    report = {"algorithms": {"malenia_nigt": {"chosen": {"learning_rate": 0.25, "eta": 0.1}}}}
    (pipe.where / "look" / "tuning.json").write_text(json.dumps(report))
    assert pipe.look_is_tuning()
    monkeypatch.setattr(third.tuning, "table", lambda r: "table")
    monkeypatch.setattr(pipe, "_tune", lambda *a: pytest.fail("the look is rerun"))
    pipe.tune()
    assert (pipe.where / "tune").is_symlink()
    assert pipe.chosen("tune") == {"malenia_nigt": {"learning_rate": 0.25, "eta": 0.1}}
    # a budget below the look's is tuned at that budget
    other = third.Pipeline(SCENARIOS["point_mass_equal"], tmp_path, tmp_path)
    other.size(100.0, 1.0, "test")
    (other.where / "sizing.json").write_text(json.dumps({**other.sizing(), "look_budget": 1000}))
    (other.where / "look").mkdir()
    (other.where / "look" / "tuning.json").write_text(json.dumps(report))
    assert not other.look_is_tuning()


@pytest.fixture
def finished_run(tmp_path):
    """A real finished run directory: the store's first point_mass_equal block, restored."""
    where = fourth.stored("point_mass_equal", (0, 5))
    if where is None:
        pytest.skip("the store holds no first block of point_mass_equal")
    store.restore(where, tmp_path / "finished")
    return tmp_path / "finished"


def test_the_pipeline_restores_before_tuning_and_keeps_when_interrupted(
    finished_run, tmp_path, monkeypatch
):
    sc = third_scenarios.SCENARIOS["point_mass_equal"]
    kept_in = tmp_path / "store"
    # a first machine: one program finished, then the tuning is interrupted
    first = third.Pipeline(sc, tmp_path / "one", tmp_path / "docs", store=kept_in)

    def interrupted(raw, where, **kw):
        shutil.copytree(finished_run, where / "runs" / "afedpg_lr-10..-1")
        (where / "tune.json").write_text("{}\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(third.tuning, "tune", interrupted)
    with pytest.raises(KeyboardInterrupt):
        first._tune({}, first.where / "look", sc.algorithms)
    assert store.holds(kept_in / sc.name / "look" / store.PROGRAMS / "afedpg_lr-10..-1")
    # a fresh machine: the stored program is in place before the tuning starts, as a resume
    seen = {}

    def resumed(raw, where, **kw):
        seen.update(kw, finished=checkpoint.finished(where / "runs" / "afedpg_lr-10..-1"))
        return {"done": True}

    monkeypatch.setattr(third.tuning, "tune", resumed)
    again = third.Pipeline(sc, tmp_path / "two", tmp_path / "docs", store=kept_in)
    assert again._tune({}, again.where / "look", sc.algorithms) == {"done": True}
    assert seen["finished"] and seen["resume"]
    assert "look 1 program stored" in third.state(again)
    # without a store (a smoke test) nothing is kept
    monkeypatch.setattr(third.tuning, "tune", interrupted)
    bare = third.Pipeline(sc, tmp_path / "three", tmp_path / "docs")
    with pytest.raises(KeyboardInterrupt):
        bare._tune({}, bare.where / "look", sc.algorithms)
    assert bare.store is None


def test_a_sigterm_during_a_tuning_stops_it_and_keeps_what_finished(
    finished_run, tmp_path, monkeypatch
):
    # SIGTERM's default action ended the process before the stage was kept; now the stage
    # holds a stop flag, the programs checkpoint and stop, and the finally keeps the store
    sc = third_scenarios.SCENARIOS["point_mass_equal"]
    pipe = third.Pipeline(sc, tmp_path / "one", tmp_path / "docs", store=tmp_path / "store")
    before = signal.getsignal(signal.SIGTERM)

    def signalled(raw, where, *, stop, **kw):
        shutil.copytree(finished_run, where / "runs" / "afedpg_lr-10..-1")
        # checked before the signal is sent: unhandled, it would end the test process
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not stop.requested and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.signum == signal.SIGTERM
        raise signals.Interrupted(stop.signum, "the running programs", 1)

    monkeypatch.setattr(third.tuning, "tune", signalled)
    with pytest.raises(signals.Interrupted) as raised:
        pipe._tune({}, pipe.where / "look", sc.algorithms)
    assert raised.value.exit_status == 128 + signal.SIGTERM
    kept = tmp_path / "store" / sc.name / "look" / store.PROGRAMS / "afedpg_lr-10..-1"
    assert store.holds(kept)
    assert signal.getsignal(signal.SIGTERM) == before  # the previous handler is back
