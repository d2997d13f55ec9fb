"""scripts/paper/store.py: a finished program packed into the store comes back, on a fresh
checkout, as the same finished run; a tuning stage keeps its request and every finished
program (also when the tuning is interrupted) and a fresh checkout resumes it from them."""

import gzip
import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from paper import fourth, third, third_scenarios
from paper import store as results_store

from jaxnigt.analysis import run_data
from jaxnigt.run import checkpoint, signals


@pytest.fixture
def finished_run(tmp_path):
    """A real finished run directory: the store's first point_mass_equal block, restored."""
    where = fourth.stored("point_mass_equal", (0, 5))
    if where is None:
        pytest.skip("the store holds no first block of point_mass_equal")
    run_dir = tmp_path / "finished"
    results_store.restore(where, run_dir)
    return run_dir


def _same_methods(a: run_data.Run, b: run_data.Run) -> None:
    assert a.budget == b.budget and list(a.methods) == list(b.methods)
    for name, m in a.methods.items():
        o = b.methods[name]
        assert m.identical_to(o), name
        for t, curves in m.per_type.items():
            for (x1, y1), (x2, y2) in zip(curves, o.per_type[t], strict=True):
                np.testing.assert_array_equal(x1, x2)
                np.testing.assert_array_equal(y1, y2)
        for f in ("updates", "env_steps", "end_time"):
            np.testing.assert_array_equal(getattr(m, f), getattr(o, f), err_msg=f"{name} {f}")
        assert (m.learning_rate, m.eta, m.diverged) == (o.learning_rate, o.eta, o.diverged)


def test_pack_then_restore_is_the_same_run(finished_run, tmp_path):
    assert checkpoint.finished(finished_run)
    results_store.pack(finished_run, tmp_path / "kept")
    assert results_store.holds(tmp_path / "kept")
    results_store.restore(tmp_path / "kept", tmp_path / "back")
    assert checkpoint.finished(tmp_path / "back")
    for f in ("config.yaml", "summary.json"):
        assert (tmp_path / "back" / f).read_bytes() == (finished_run / f).read_bytes()
    # the metrics come back compacted: every row the analysis reads, nothing it reads changed
    _same_methods(run_data.load_run(finished_run), run_data.load_run(tmp_path / "back"))
    # packing is deterministic: the same run packs to the same bytes
    results_store.pack(tmp_path / "back", tmp_path / "again")
    for f in ("metrics.csv.gz", "summary.json", "done.json"):
        assert (tmp_path / "again" / f).read_bytes() == (tmp_path / "kept" / f).read_bytes()


def _row(seed, step, grads, evaluated=None, algorithm="afedpg", types=False):
    e = "" if evaluated is None else str(evaluated)
    row = {"algorithm": algorithm, "grid": "0", "seed": str(seed), "round": str(step),
           "sim_time": str(2 * step), "grads": grads, "train_return": str(-step),
           "eval_return": e}  # fmt: skip
    if types:
        row |= {"eval_type0": e, "eval_type1": e}
    return row


def test_compact_keeps_evaluations_and_each_seeds_ends_and_carries_the_grads():
    rows = [
        _row(0, 0, "0", -11.0), _row(1, 0, "0", -12.0),
        _row(0, 1, "2"), _row(1, 1, "2"),
        _row(0, 2, "1"), _row(1, 2, ""),  # a step without gradients: NaN, skipped by load_run
        _row(0, 3, "3", -9.0), _row(1, 3, "1"),
        _row(0, 4, "2"), _row(1, 4, "1", -8.0),
        _row(0, 5, "2"), _row(1, 5, "2"),
        _row(0, 0, "0", -5.0, algorithm="rennala_nigt", types=True),
        _row(0, 1, "4", algorithm="rennala_nigt", types=True),
    ]  # fmt: skip
    out = results_store.compact(rows)
    kept = [(r["algorithm"][0], r["seed"], r["round"], r["grads"]) for r in out]
    assert kept == [
        ("a", "0", "0", "0"), ("a", "1", "0", "0"),
        ("a", "0", "3", "6"),  # steps 1-3: 2 + 1 + 3
        ("a", "1", "4", "4"),  # steps 1-4: 2 + NaN + 1 + 1
        ("a", "0", "5", "4"), ("a", "1", "5", "2"),  # each seed's last step
        ("r", "0", "0", "0"), ("r", "0", "1", "4"),
    ]  # fmt: skip
    for r in out:  # a kept row is the same row, but for its gradients
        src = next(s for s in rows if (s["algorithm"], s["seed"], s["round"])
                   == (r["algorithm"], r["seed"], r["round"]))  # fmt: skip
        assert {k: v for k, v in r.items() if k != "grads"} == {
            k: v for k, v in src.items() if k != "grads"
        }
    for seed in ("0", "1"):  # load_run's per-seed sum of finite gradients is unchanged
        total = lambda rs: sum(float(r["grads"]) for r in rs
                               if r["seed"] == seed and r["algorithm"] == "afedpg"
                               and r["grads"] != "")  # fmt: skip
        assert total(out) == total(rows)
    assert results_store.compact(out) == out  # compacting twice changes nothing


@pytest.fixture(scope="module")
def every_row_run(tmp_path_factory):
    """A fresh finished run with a row per step, most without an evaluation, of a
    per-arrival method (AFedPG: load_run sums its gradients) and a round-based one."""
    from jaxnigt.studies import tuning

    cfg = _lqr_program(["afedpg", "rennala_nigt"])
    run_dir = tmp_path_factory.mktemp("every_row") / "run"
    tuning.run_program(cfg, run_dir, progress=False, log=lambda *a: None)
    return run_dir


def test_pack_compacts_a_real_run_and_load_run_reads_the_same(every_row_run, tmp_path):
    from jaxnigt.run import metrics

    rows = metrics.read_metrics_raw(every_row_run)
    assert len(results_store.compact(rows)) < len(rows) / 2  # most rows are left out
    assert {r["algorithm"] for r in rows} == {"afedpg", "rennala_nigt"}
    results_store.pack(every_row_run, tmp_path / "kept")
    results_store.restore(tmp_path / "kept", tmp_path / "back")
    original, back = run_data.load_run(every_row_run), run_data.load_run(tmp_path / "back")
    assert original.methods["afedpg"].updates.sum() > 0  # the carried gradients are read
    _same_methods(original, back)
    # a program stored with every row (before compaction) comes out compacted, the same run
    where = tmp_path / "stored"
    shutil.copytree(tmp_path / "kept", where)
    with (
        (every_row_run / "metrics.csv").open("rb") as src,
        gzip.GzipFile(where / "metrics.csv.gz", "wb", mtime=0) as dst,
    ):
        shutil.copyfileobj(src, dst)
    results_store.repack(where)
    assert (where / "metrics.csv.gz").read_bytes() == (
        tmp_path / "kept" / "metrics.csv.gz"
    ).read_bytes()
    results_store.repack(where)
    assert (where / "metrics.csv.gz").read_bytes() == (
        tmp_path / "kept" / "metrics.csv.gz"
    ).read_bytes()


def _fake_partial(where: Path, cfg, chunks: dict[str, int], done=()) -> Path:
    """A run folder as a stopped run leaves it: config, done marker, a checkpoint (and
    digest) per algorithm in progress; the checkpoints' contents do not matter here."""
    from jaxnigt import config as config_lib

    (where / "checkpoints").mkdir(parents=True)
    (where / "config.yaml").write_text(config_lib.dump(cfg))
    for algorithm in done:
        checkpoint.mark_done(where, algorithm)
    for algorithm, k in chunks.items():
        chunk = where / "checkpoints" / algorithm / f"chunk_{k:06d}"
        chunk.mkdir(parents=True)
        chunk.with_name(chunk.name + ".sha256").write_text("x\n")
    return where


def test_bring_partial_refuses_what_would_lose_progress_or_mislead(tmp_path):
    cfg, other = _lqr_program(["afedpg", "rennala_nigt"]), _lqr_program(["afedpg"])
    stored = _fake_partial(tmp_path / "stored", cfg, {"afedpg": 4})
    bring = results_store.bring_partial
    assert not bring(stored, tmp_path / "a", other)  # stored for another config
    assert bring(stored, tmp_path / "a", cfg)  # an empty place: brought
    assert (tmp_path / "a" / "checkpoints" / "afedpg" / "chunk_000004").is_dir()
    assert not list(tmp_path.glob(".a-*"))  # copied beside, renamed in, nothing left over
    newer = _fake_partial(tmp_path / "b", cfg, {"afedpg": 6})
    assert not bring(stored, newer, cfg)  # a newer checkpoint here is kept
    ahead = _fake_partial(tmp_path / "c", cfg, {"rennala_nigt": 1}, done=["afedpg"])
    assert not bring(stored, ahead, cfg)  # afedpg finished here, not in the store
    # another config's run here: replaced with cfg, kept without one to judge by
    mine = _fake_partial(tmp_path / "d", other, {"afedpg": 9})
    assert not bring(stored, mine)
    assert bring(stored, mine, cfg) and checkpoint.latest(mine, "afedpg").name == "chunk_000004"
    # a chunk without its digest cannot be restored: the older complete one is newest
    (stored / "checkpoints" / "afedpg" / "chunk_000007").mkdir()
    assert results_store._newest(stored)["afedpg"].name == "chunk_000004"


def _stage(root: Path, finished_run: Path, programs=("afedpg_lr-3..-1",)) -> Path:
    """A tuning stage folder: its request and ``programs`` finished, one unfinished."""
    stage = root / "look"
    (stage / "runs").mkdir(parents=True)
    (stage / "tune.json").write_text(json.dumps({"request": 1}) + "\n")
    for name in programs:
        shutil.copytree(finished_run, stage / "runs" / name)
    (stage / "runs" / "half_done").mkdir()
    (stage / "runs" / "half_done" / "config.yaml").write_text("not finished\n")
    return stage


def test_a_stage_keeps_only_finished_programs_and_comes_back(finished_run, tmp_path):
    stage = _stage(tmp_path / "here", finished_run, ("a_lr-3..-1", "b_lr-3..-1"))
    kept = tmp_path / "store" / "look"
    assert results_store.keep_stage(stage, kept) == (["a_lr-3..-1", "b_lr-3..-1"], [])
    assert results_store.keep_stage(stage, kept) == ([], [])  # already kept
    assert not (kept / results_store.PROGRAMS / "half_done").exists()
    assert results_store.stage_state(kept) == "2 programs stored"
    fresh = tmp_path / "fresh" / "look"
    assert results_store.bring_stage(kept, fresh) == ["a_lr-3..-1", "b_lr-3..-1"]
    assert (fresh / "tune.json").read_bytes() == (stage / "tune.json").read_bytes()
    assert all(checkpoint.finished(fresh / "runs" / p) for p in ("a_lr-3..-1", "b_lr-3..-1"))
    assert results_store.bring_stage(kept, fresh) == []  # finished here: nothing to restore
    assert results_store.bring_stage(tmp_path / "nothing", tmp_path / "x") == []


def test_the_pipeline_restores_before_tuning_and_keeps_when_interrupted(
    finished_run, tmp_path, monkeypatch
):
    sc = third_scenarios.SCENARIOS["point_mass_equal"]
    store = tmp_path / "store"
    # a first machine: one program finished, then the tuning is interrupted
    first = third.Pipeline(sc, tmp_path / "one", tmp_path / "docs", store=store)

    def interrupted(raw, where, **kw):
        shutil.copytree(finished_run, where / "runs" / "afedpg_lr-10..-1")
        (where / "tune.json").write_text("{}\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(third.tuning, "tune", interrupted)
    with pytest.raises(KeyboardInterrupt):
        first._tune({}, first.where / "look", sc.algorithms)
    kept = store / sc.name / "look" / results_store.PROGRAMS / "afedpg_lr-10..-1"
    assert results_store.holds(kept)
    # a fresh machine: the stored program is in place before the tuning starts, as a resume
    seen = {}

    def resumed(raw, where, **kw):
        seen.update(kw, finished=checkpoint.finished(where / "runs" / "afedpg_lr-10..-1"))
        return {"done": True}

    monkeypatch.setattr(third.tuning, "tune", resumed)
    again = third.Pipeline(sc, tmp_path / "two", tmp_path / "docs", store=store)
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
    kept = tmp_path / "store" / sc.name / "look" / results_store.PROGRAMS / "afedpg_lr-10..-1"
    assert results_store.holds(kept)
    assert signal.getsignal(signal.SIGTERM) == before  # the previous handler is back


class SignalledLater(signals.StopFlag):
    """A stop flag as if a SIGTERM came after a few chunks."""

    checks = 0

    @property
    def requested(self):
        self.checks += 1
        if self.checks > 3:
            self.signum = signal.SIGTERM
        return self.signum is not None


def _lqr_program(algorithms=("rennala_nigt",)):
    from jaxnigt import config as config_lib

    return config_lib.from_dict(
        {"name": "p", "env": {"name": "lqr1d"}, "cluster": {"n": 2},
         "algorithms": list(algorithms), "budget": 60.0, "seeds": 2,
         "hparams": {"M": 2, "M_init": 2}, "eval": {"every": 5, "episodes": 2},
         "checkpoint_every": 1}
    )  # fmt: skip


def test_a_program_kept_in_the_store_continues_then_comes_back_finished(tmp_path, monkeypatch):
    """run_kept (the third edition's report runs, the fourth edition's seed blocks): a run
    stopped by SIGTERM keeps its checkpoint in the store, a fresh clone continues it, the
    finished run is packed, and a third clone restores it instead of running it."""
    import contextlib

    from jaxnigt.studies import tuning

    cfg, quiet = _lqr_program(), lambda *a: None
    tuning.run_program(cfg, tmp_path / "reference", progress=False, log=quiet)
    finished, partial = tmp_path / "store" / "programs" / "p", tmp_path / "store" / "partial" / "p"

    @contextlib.contextmanager
    def signalled():
        yield SignalledLater()

    monkeypatch.setattr(signals, "stop_on_signals", signalled)
    with pytest.raises(signals.Interrupted):
        results_store.run_kept(cfg, tmp_path / "one" / "p", finished, partial, log=quiet)
    assert not results_store.holds(finished) and checkpoint.latest(partial, "rennala_nigt")
    monkeypatch.undo()

    said = []
    what = results_store.run_kept(cfg, tmp_path / "two" / "p", finished, partial, log=said.append)
    assert what == "continued from its checkpoint in the store"
    assert any("resumed from" in line for line in said), said
    ref = (tmp_path / "reference" / "metrics.csv").read_text()
    assert (tmp_path / "two" / "p" / "metrics.csv").read_text() == ref
    assert results_store.holds(finished) and not partial.exists()

    what = results_store.run_kept(cfg, tmp_path / "three" / "p", finished, partial, log=quiet)
    assert what == "restored from the store"
    _same_methods(run_data.load_run(tmp_path / "reference"),
                  run_data.load_run(tmp_path / "three" / "p"))  # fmt: skip
    assert results_store.run_kept(cfg, tmp_path / "three" / "p", None, None) == (
        "kept (finished here)"
    )


def test_an_unfinished_program_continues_on_a_fresh_clone_from_its_stored_checkpoint(tmp_path):
    """A program stopped mid-way leaves its newest checkpoint in the store; a fresh clone
    continues it from there and ends with the uninterrupted program's metrics."""
    from jaxnigt.studies import tuning

    cfg = _lqr_program()
    quiet = lambda *a: None
    tuning.run_program(cfg, tmp_path / "reference", progress=False, log=quiet)
    stage, store = tmp_path / "one" / "look", tmp_path / "store" / "look"
    (stage / "runs").mkdir(parents=True)
    (stage / "tune.json").write_text("{}\n")

    flag = SignalledLater()
    with pytest.raises(signals.Interrupted):
        tuning.run_program(cfg, stage / "runs" / "p", progress=False, log=quiet, stop=flag)
    assert not checkpoint.finished(stage / "runs" / "p")
    assert results_store.keep_stage(stage, store) == ([], ["p"])
    assert results_store.stage_state(store) == "none stored, 1 unfinished with a checkpoint"
    stored = results_store.PARTIAL
    newest = checkpoint.latest(stage / "runs" / "p", "rennala_nigt").name
    kept = store / stored / "p" / "checkpoints" / "rennala_nigt"
    assert [p.name for p in kept.iterdir() if p.is_dir()] == [newest]  # the newest only
    assert newest > "chunk_000001", newest  # stopped mid-way, not at the start

    fresh = tmp_path / "two" / "look"
    (restored,) = results_store.bring_stage(store, fresh)
    assert restored.startswith("p (unfinished")
    assert results_store.bring_stage(store, fresh) == []  # as new here: not brought again
    said = []
    tuning.run_program(cfg, fresh / "runs" / "p", progress=False, log=said.append)
    # continued from the stored checkpoint, not started over
    assert any(f"resumed from {fresh}" in line and newest in line for line in said), said
    ref = (tmp_path / "reference" / "metrics.csv").read_text().splitlines()
    assert (fresh / "runs" / "p" / "metrics.csv").read_text().splitlines() == ref
    # finished now: stored as a program, and its unfinished entry is gone
    assert results_store.keep_stage(fresh, store) == (["p"], [])
    assert not (store / stored).exists()
    assert results_store.stage_state(store) == "1 program stored"


def test_paths_in_results_json_are_made_relative_to_the_repository():
    root = results_store.ROOT
    data = {"run": f"{root}/runs/x", "pool": [f"{root}/runs/a", "/elsewhere/b"], "n": 3,
            "nested": {"p": f"{root}/docs/results"}, "text": "a sentence"}  # fmt: skip
    assert results_store.relative_paths(data) == {
        "run": "runs/x", "pool": ["runs/a", "/elsewhere/b"], "n": 3,
        "nested": {"p": "docs/results"}, "text": "a sentence",
    }  # fmt: skip


def test_the_store_is_not_ignored_by_git():
    import subprocess

    kept = results_store.STORE / "s" / "look" / results_store.PROGRAMS / "p" / "config.yaml"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(kept)], cwd=results_store.ROOT)
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 1, f"git ignores {kept}: the store would not travel"


def test_the_inventory_counts_each_kind_and_not_an_unfinished_programs_markers(
    finished_run, tmp_path
):
    store = tmp_path / "store"
    assert results_store.inventory(store) == (0, 0, 0, 0.0, 0, 0.0)
    results_store.pack(finished_run, store / "sc" / "seeds_00-05")
    results_store.pack(finished_run, store / "sc" / "seeds_05-10")
    results_store.pack(finished_run, store / "sc" / results_store.REPORT / "programs" / "sc")
    results_store.pack(finished_run, store / "sc" / "look" / "programs" / "afedpg_lr-3..-1")
    cfg = _lqr_program(["afedpg", "rennala_nigt"])
    # an unfinished program: one algorithm finished (a done.json of its own), one in progress
    _fake_partial(store / "sc" / "tune" / results_store.PARTIAL / "p", cfg, {"rennala_nigt": 3},
                  done=["afedpg"])  # fmt: skip
    inv = results_store.inventory(store)
    assert (inv.blocks, inv.reports, inv.tuning, inv.unfinished) == (2, 1, 1, 1)
    sizes = lambda d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20
    partial = sizes(store / "sc" / "tune" / results_store.PARTIAL)
    assert inv.unfinished_mb == pytest.approx(partial)
    assert inv.finished_mb == pytest.approx(sizes(store) - partial)


def test_the_store_keeps_within_its_budget():
    inv = results_store.inventory()
    size = inv.finished_mb + inv.unfinished_mb
    assert size <= results_store.BUDGET_MB, f"{size:.1f} MB"
