"""jaxnigt.studies.store: a finished program packed into a store comes back, on a fresh
checkout, as the same finished run (``load_run`` reads the same); an unfinished one keeps its
newest checkpoint and continues from it; a tuning stage keeps its request and every program
and comes back; the inventory counts what a store holds."""

import contextlib
import gzip
import json
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest

from jaxnigt import config as config_lib
from jaxnigt.analysis import run_data
from jaxnigt.run import checkpoint, metrics, signals
from jaxnigt.studies import store, tuning

QUIET = lambda *a: None


def _lqr_program(algorithms=("rennala_nigt",)):
    return config_lib.from_dict(
        {"name": "p", "env": {"name": "lqr1d"}, "cluster": {"n": 2},
         "algorithms": list(algorithms), "budget": 60.0, "seeds": 2,
         "hparams": {"M": 2, "M_init": 2}, "eval": {"every": 5, "episodes": 2},
         "checkpoint_every": 1}
    )  # fmt: skip


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A fresh finished run with a row per step, most without an evaluation, of a
    per-arrival method (AFedPG: load_run sums its gradients) and a round-based one."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    tuning.run_program(_lqr_program(["afedpg", "rennala_nigt"]), run_dir, progress=False, log=QUIET)
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
    rows = metrics.read_metrics_raw(finished_run)
    assert len(store.compact(rows)) < len(rows) / 2  # most rows are left out
    assert {r["algorithm"] for r in rows} == {"afedpg", "rennala_nigt"}
    store.pack(finished_run, tmp_path / "kept")
    assert store.holds(tmp_path / "kept") and not store.holds(tmp_path)
    store.restore(tmp_path / "kept", tmp_path / "back")
    assert checkpoint.finished(tmp_path / "back")
    for f in ("config.yaml", "summary.json"):
        assert (tmp_path / "back" / f).read_bytes() == (finished_run / f).read_bytes()
    # the metrics come back compacted: every row the analysis reads, nothing it reads changed
    original, back = run_data.load_run(finished_run), run_data.load_run(tmp_path / "back")
    assert original.methods["afedpg"].updates.sum() > 0  # the carried gradients are read
    _same_methods(original, back)
    # packing is deterministic: the same run packs to the same bytes
    store.pack(tmp_path / "back", tmp_path / "again")
    for f in ("metrics.csv.gz", "config.yaml", "summary.json", "done.json"):
        assert (tmp_path / "again" / f).read_bytes() == (tmp_path / "kept" / f).read_bytes()


def test_a_program_stored_with_every_row_is_repacked_compacted(finished_run, tmp_path):
    store.pack(finished_run, tmp_path / "kept")
    where = tmp_path / "stored"
    shutil.copytree(tmp_path / "kept", where)
    with (
        (finished_run / "metrics.csv").open("rb") as src,
        gzip.GzipFile(where / "metrics.csv.gz", "wb", mtime=0) as dst,
    ):
        shutil.copyfileobj(src, dst)
    compacted = (tmp_path / "kept" / "metrics.csv.gz").read_bytes()
    store.repack(where)
    assert (where / "metrics.csv.gz").read_bytes() == compacted
    store.repack(where)  # a compacted one: unchanged
    assert (where / "metrics.csv.gz").read_bytes() == compacted


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
    out = store.compact(rows)
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
    assert store.compact(out) == out  # compacting twice changes nothing


def test_a_dropped_algorithm_leaves_the_rest_of_the_run(finished_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    store.drop_algorithm(run_dir, "afedpg")
    assert checkpoint.done_algorithms(run_dir) == ["rennala_nigt"]
    assert not checkpoint.finished(run_dir)  # a resumed run runs afedpg again
    rows = metrics.read_metrics_raw(run_dir)
    kept = [r for r in metrics.read_metrics_raw(finished_run) if r["algorithm"] != "afedpg"]
    assert rows == kept


def _fake_partial(where: Path, cfg, chunks: dict[str, int], done=()) -> Path:
    """A run folder as a stopped run leaves it: config, done marker, a checkpoint (and
    digest) per algorithm in progress; the checkpoints' contents do not matter here."""
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
    bring = store.bring_partial
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
    assert store.newest(stored)["afedpg"].name == "chunk_000004"


def test_a_stage_keeps_only_finished_programs_and_comes_back(finished_run, tmp_path):
    stage = tmp_path / "here" / "look"
    (stage / "runs").mkdir(parents=True)
    (stage / "tune.json").write_text(json.dumps({"request": 1}) + "\n")
    for name in ("a_lr-3..-1", "b_lr-3..-1"):
        shutil.copytree(finished_run, stage / "runs" / name)
    (stage / "runs" / "half_done").mkdir()
    (stage / "runs" / "half_done" / "config.yaml").write_text("not finished\n")
    kept = tmp_path / "store" / "look"
    assert store.keep_stage(stage, kept) == (["a_lr-3..-1", "b_lr-3..-1"], [])
    assert store.keep_stage(stage, kept) == ([], [])  # already kept
    assert not (kept / store.PROGRAMS / "half_done").exists()
    assert store.stage_state(kept) == "2 programs stored"
    fresh = tmp_path / "fresh" / "look"
    assert store.bring_stage(kept, fresh) == ["a_lr-3..-1", "b_lr-3..-1"]
    assert (fresh / "tune.json").read_bytes() == (stage / "tune.json").read_bytes()
    assert all(checkpoint.finished(fresh / "runs" / p) for p in ("a_lr-3..-1", "b_lr-3..-1"))
    assert store.bring_stage(kept, fresh) == []  # finished here: nothing to restore
    assert store.bring_stage(tmp_path / "nothing", tmp_path / "x") == []


class SignalledLater(signals.StopFlag):
    """A stop flag as if a SIGTERM came after a few chunks."""

    checks = 0

    @property
    def requested(self):
        self.checks += 1
        if self.checks > 3:
            self.signum = signal.SIGTERM
        return self.signum is not None


def test_a_program_kept_in_the_store_continues_then_comes_back_finished(tmp_path, monkeypatch):
    """run_kept: a run stopped by SIGTERM keeps its checkpoint in the store, a fresh clone
    continues it, the finished run is packed, and a third clone restores it instead of
    running it."""
    cfg = _lqr_program()
    tuning.run_program(cfg, tmp_path / "reference", progress=False, log=QUIET)
    finished, partial = tmp_path / "store" / "programs" / "p", tmp_path / "store" / "partial" / "p"

    @contextlib.contextmanager
    def signalled():
        yield SignalledLater()

    monkeypatch.setattr(signals, "stop_on_signals", signalled)
    with pytest.raises(signals.Interrupted):
        store.run_kept(cfg, tmp_path / "one" / "p", finished, partial, log=QUIET)
    assert not store.holds(finished) and checkpoint.latest(partial, "rennala_nigt")
    monkeypatch.undo()

    said = []
    what = store.run_kept(cfg, tmp_path / "two" / "p", finished, partial, log=said.append)
    assert what == "continued from its checkpoint in the store"
    assert any("resumed from" in line for line in said), said
    ref = (tmp_path / "reference" / "metrics.csv").read_text()
    assert (tmp_path / "two" / "p" / "metrics.csv").read_text() == ref
    assert store.holds(finished) and not partial.exists()

    what = store.run_kept(cfg, tmp_path / "three" / "p", finished, partial, log=QUIET)
    assert what == "restored from the store"
    _same_methods(run_data.load_run(tmp_path / "reference"),
                  run_data.load_run(tmp_path / "three" / "p"))  # fmt: skip
    assert store.run_kept(cfg, tmp_path / "three" / "p", None, None) == "kept (finished here)"


def test_an_unfinished_program_continues_on_a_fresh_clone_from_its_stored_checkpoint(tmp_path):
    """A program stopped mid-way leaves its newest checkpoint in the store; a fresh clone
    continues it from there and ends with the uninterrupted program's metrics."""
    cfg = _lqr_program()
    tuning.run_program(cfg, tmp_path / "reference", progress=False, log=QUIET)
    stage, kept = tmp_path / "one" / "look", tmp_path / "store" / "look"
    (stage / "runs").mkdir(parents=True)
    (stage / "tune.json").write_text("{}\n")

    with pytest.raises(signals.Interrupted):
        tuning.run_program(
            cfg, stage / "runs" / "p", progress=False, log=QUIET, stop=SignalledLater()
        )
    assert not checkpoint.finished(stage / "runs" / "p")
    assert store.keep_stage(stage, kept) == ([], ["p"])
    assert store.stage_state(kept) == "none stored, 1 unfinished with a checkpoint"
    newest = checkpoint.latest(stage / "runs" / "p", "rennala_nigt").name
    chunks = kept / store.PARTIAL / "p" / "checkpoints" / "rennala_nigt"
    assert [p.name for p in chunks.iterdir() if p.is_dir()] == [newest]  # the newest only
    assert newest > "chunk_000001", newest  # stopped mid-way, not at the start

    fresh = tmp_path / "two" / "look"
    (restored,) = store.bring_stage(kept, fresh)
    assert restored.startswith("p (unfinished")
    assert store.bring_stage(kept, fresh) == []  # as new here: not brought again
    said = []
    tuning.run_program(cfg, fresh / "runs" / "p", progress=False, log=said.append)
    # continued from the stored checkpoint, not started over
    assert any(f"resumed from {fresh}" in line and newest in line for line in said), said
    ref = (tmp_path / "reference" / "metrics.csv").read_text().splitlines()
    assert (fresh / "runs" / "p" / "metrics.csv").read_text().splitlines() == ref
    # finished now: stored as a program, and its unfinished entry is gone
    assert store.keep_stage(fresh, kept) == (["p"], [])
    assert not (kept / store.PARTIAL).exists()
    assert store.stage_state(kept) == "1 program stored"


def test_the_inventory_counts_each_kind_and_not_an_unfinished_programs_markers(
    finished_run, tmp_path
):
    where = tmp_path / "store"
    assert store.inventory(where) == ({}, 0.0, 0, 0.0)
    store.pack(finished_run, where / "sc" / "seeds_00-05")
    store.pack(finished_run, where / "sc" / "seeds_05-10")
    store.pack(finished_run, where / "sc" / "look" / store.PROGRAMS / "afedpg_lr-3..-1")
    # an unfinished program: one algorithm finished (a done.json of its own), one in progress
    cfg = _lqr_program(["afedpg", "rennala_nigt"])
    _fake_partial(where / "sc" / "tune" / store.PARTIAL / "p", cfg, {"rennala_nigt": 3},
                  done=["afedpg"])  # fmt: skip
    inv = store.inventory(where)
    assert (inv.finished, inv.unfinished) == ({"programs": 3}, 1)
    seen = []
    by_kind = store.inventory(where, lambda d: seen.append(d) or d.name[:5])
    assert by_kind.finished == {"seeds": 2, "afedp": 1}
    assert sorted(seen) == sorted(
        [Path("sc/seeds_00-05"), Path("sc/seeds_05-10"), Path("sc/look/programs/afedpg_lr-3..-1")]
    )  # each finished program's folder, relative to the store
    sizes = lambda d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20
    partial = sizes(where / "sc" / "tune" / store.PARTIAL)
    assert inv.unfinished_mb == pytest.approx(partial)
    assert inv.finished_mb == pytest.approx(sizes(where) - partial)
