"""A results store: what the analysis needs of each program of a study, kept with the code.

A study's run directories stay on the machine that ran them.  A results store is a folder
that travels with the repository and holds what the analysis reads of each finished program
and the newest checkpoint of each one still running, so that a study begun on one machine
resumes on a fresh clone (a stored program is restored into its run directory instead of run
again, an unfinished one continues from its stored checkpoint) and nothing is lost when a run
stops (SIGTERM, Ctrl-C).  Where a store lives and how a study names its folders is the
study's: every function here takes the folders it reads and writes.

**A stored program** (:func:`pack`, :func:`restore`, :func:`holds`) is a folder of four
files: ``config.yaml``, ``summary.json``, ``metrics.csv.gz`` and ``done.json``, what
:func:`jaxnigt.analysis.run_data.load_run` and :func:`jaxnigt.run.checkpoint.finished` read
once restored; checkpoints and plots are not kept.  Its ``metrics.csv`` is compacted
(:func:`compact`) to the rows the analysis reads: every evaluation, each seed's first and
last step, with the ``grads`` of the steps left out added to the next row kept (``load_run``
sums them).  A per-arrival method's run has a row per arrival (hundreds of thousands for
about a thousand evaluations), so the other per-step columns (training return, counts,
staleness) of the rows left out are not kept.  Packing is deterministic: the same run packs
to the same bytes.

**An unfinished program** (:func:`keep_partial`, :func:`bring_partial`) is its
``config.yaml``, the newest complete checkpoint of each algorithm in progress with its digest
(``checkpoints/<algorithm>/``), and the done marker and compacted metrics rows of the
algorithms it finished; a resume continues from there instead of from the start.  It is
written beside its place and renamed into it, both ways, so that a stop mid-copy leaves the
old entry or the new one, never half of one.

**A stage** (a tuning's folder of programs: :func:`keep_stage`, :func:`bring_stage`) holds
its request (``tune.json``), each finished program under ``programs/<program>/`` (the
stage's ``runs/<program>/``; not ``runs``, which a repository usually ignores) and each
unfinished one under ``partial/<program>/`` until it is stored finished.  A single program
may be kept the same way, a finished copy in one folder and its checkpoint in another
(:func:`run_kept`).  :func:`inventory` counts what a store holds.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from jaxnigt import config as config_lib
from jaxnigt.run import checkpoint, signals
from jaxnigt.studies import tuning
from jaxnigt.studies.grid import RECORD

FILES = ("config.yaml", "summary.json")  # copied as they are
PROGRAMS = "programs"  # a stored stage's folder of finished programs
PARTIAL = "partial"  # a stored stage's folder of unfinished programs (newest checkpoints)


def _evaluated(row: dict) -> bool:
    return any(v != "" for k, v in row.items() if k.startswith("eval_"))  # eval_return, eval_type*


def _number(text: str) -> float:
    v = float(text) if text not in ("", None) else math.nan
    return v if math.isfinite(v) else 0.0


def compact(rows: list[dict]) -> list[dict]:
    """The rows of a ``metrics.csv`` that the analysis reads.

    Keeps, in order, every row with an evaluation and, per algorithm, grid point and seed,
    its first row and its row of the highest step; a row left out adds its ``grads`` to the
    next kept row of its seed, so their per-seed sum is unchanged.  Kept rows are otherwise
    unchanged, and compacting twice changes nothing.

    Args:
        rows: the file's rows as read (``csv.DictReader``: every value a string).

    Returns:
        The rows kept, in their order.
    """
    key = lambda r: (r["algorithm"], r["grid"], r["seed"])
    first, top = {}, {}
    for i, r in enumerate(rows):
        k = key(r)
        first.setdefault(k, i)
        if k not in top or int(r["round"]) >= int(rows[top[k]]["round"]):
            top[k] = i
    out, carried = [], {}
    for i, r in enumerate(rows):
        k = key(r)
        if not (_evaluated(r) or i == first[k] or i == top[k]):
            carried[k] = carried.get(k, 0.0) + _number(r.get("grads", ""))
            continue
        extra = carried.pop(k, 0.0)
        if extra:
            g = _number(r.get("grads", "")) + extra
            r = {**r, "grads": str(int(g)) if g.is_integer() else repr(g)}
        out.append(r)
    return out


def _gzip_rows(src: Path, dst: Path, algorithms: list[str] | None) -> None:
    """``src`` (a metrics CSV) :func:`compact`-ed and gzipped into ``dst`` (no timestamp:
    the same rows give the same bytes), with only the rows of ``algorithms`` (None: all)."""
    with src.open(newline="") as f:
        reader = csv.DictReader(f)
        rows, columns = list(reader), reader.fieldnames or []
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(
        compact([r for r in rows if algorithms is None or r["algorithm"] in algorithms])
    )
    with gzip.GzipFile(dst, "wb", mtime=0) as out:
        out.write(buf.getvalue().encode())


def _gunzip(src: Path, dst: Path) -> None:
    with gzip.open(src, "rb") as f, dst.open("wb") as out:
        shutil.copyfileobj(f, out)


def pack(run_dir: Path, where: Path) -> None:
    """Stores the finished run ``run_dir`` as the program ``where`` (its metrics
    :func:`compact`-ed), over what ``where`` held."""
    where.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(run_dir / f, where / f)
    _gzip_rows(run_dir / "metrics.csv", where / "metrics.csv.gz", None)
    shutil.copyfile(run_dir / "checkpoints" / "done.json", where / "done.json")


def restore(where: Path, run_dir: Path) -> None:
    """The stored program ``where`` back into ``run_dir``, a finished run directory that
    ``load_run`` reads."""
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(where / f, run_dir / f)
    _gunzip(where / "metrics.csv.gz", run_dir / "metrics.csv")
    shutil.copyfile(where / "done.json", run_dir / "checkpoints" / "done.json")


def repack(where: Path) -> None:
    """Packs the stored program ``where`` again: one stored with every metrics row comes
    out compacted, a compacted one unchanged."""
    with tempfile.TemporaryDirectory() as tmp:
        restore(where, Path(tmp) / "run")
        pack(Path(tmp) / "run", where)


def holds(where: Path) -> bool:
    """Whether ``where`` holds a stored (finished) program."""
    return (where / "done.json").is_file()


def drop_algorithm(run_dir: Path, algorithm: str) -> None:
    """Takes ``algorithm`` out of the finished run ``run_dir`` (its rows of ``metrics.csv``
    and its ``done.json`` entry), so that a resumed run runs it again and keeps the rest."""
    done = [a for a in checkpoint.done_algorithms(run_dir) if a != algorithm]
    (run_dir / "checkpoints" / "done.json").write_text(json.dumps(done) + "\n")
    path = run_dir / "metrics.csv"
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, [r for r in reader if r["algorithm"] != algorithm]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


# ------------------------------------------------------------------ unfinished programs


def newest(run_dir: Path) -> dict[str, Path]:
    """``{algorithm: its newest complete checkpoint}`` of the algorithms in progress in
    ``run_dir`` (a run directory or an unfinished stored program); a chunk whose digest was
    never written cannot be restored and does not count."""
    root = run_dir / "checkpoints"
    algorithms = sorted(p.name for p in root.glob("*") if p.is_dir()) if root.is_dir() else []
    return {a: chunks[-1] for a in algorithms if (chunks := checkpoint.saved(run_dir, a))}


def _config(run_dir: Path):
    """The config ``run_dir/config.yaml`` holds (None: none, or not a valid config)."""
    try:
        return config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml"))
    except (OSError, config_lib.ConfigError):
        return None


def _swap_in(tmp: Path, where: Path) -> None:
    """Puts the folder ``tmp`` at ``where`` (replacing it) by renames only."""
    old = tmp.with_name(tmp.name + "-old")
    if where.exists():
        where.rename(old)
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(where)
    shutil.rmtree(old, ignore_errors=True)


def keep_partial(run_dir: Path, where: Path) -> bool:
    """Stores the unfinished program ``run_dir`` in ``where``, replacing what it held: its
    config, the done marker and (compacted) metrics rows of its finished algorithms (what a
    resume keeps; their ``worker_counts.csv`` rows are not kept), and the newest checkpoint
    of each algorithm in progress with its digest.  Written in ``where``'s grandparent (a
    stage's folder beside its ``partial`` one) and renamed into place.  Returns whether it
    had one to store (not for a finished run, nor one without a checkpoint or config)."""
    chunks = newest(run_dir)
    if not chunks or _config(run_dir) is None or checkpoint.finished(run_dir):
        return False
    where.parent.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".keeping-", dir=where.parent.parent))
    try:
        tmp = scratch / where.name
        (tmp / "checkpoints").mkdir(parents=True)
        shutil.copyfile(run_dir / "config.yaml", tmp / "config.yaml")
        done = checkpoint.done_algorithms(run_dir)
        if done:
            shutil.copyfile(
                run_dir / "checkpoints" / "done.json", tmp / "checkpoints" / "done.json"
            )
            _gzip_rows(run_dir / "metrics.csv", tmp / "metrics.csv.gz", done)
        for algorithm, path in chunks.items():
            shutil.copytree(path, tmp / "checkpoints" / algorithm / path.name)
            digest = path.with_name(path.name + ".sha256")
            shutil.copyfile(digest, tmp / "checkpoints" / algorithm / digest.name)
        _swap_in(tmp, where)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return True


def _would_lose(where: Path, run_dir: Path, config, cfg) -> bool:
    """Whether :func:`bring_partial` of ``where`` (its config ``config``) would lose or
    mislead in ``run_dir``."""
    if checkpoint.finished(run_dir) or (cfg is not None and config != cfg):
        return True
    here_config = _config(run_dir)
    if here_config is None:
        return False
    if here_config != config:
        return cfg is None  # not ours to judge: the running command checks its config
    here, stored = newest(run_dir), newest(where)
    if all(a in here and here[a].name >= p.name for a, p in stored.items()):
        return True  # as new here
    return bool(set(checkpoint.done_algorithms(run_dir)) - set(checkpoint.done_algorithms(where)))


def bring_partial(where: Path, run_dir: Path, cfg=None) -> bool:
    """Puts the stored unfinished program ``where`` into ``run_dir`` (copied beside it,
    then renamed into place) unless it would lose or mislead: not when ``run_dir`` is
    finished, when it is a run of the stored config (of ``cfg``, if given) with a checkpoint
    as new for each stored algorithm or with an algorithm finished that the stored entry has
    not, when the stored entry is of another config than ``cfg``, or (without ``cfg``) when
    ``run_dir`` holds a run of another config than the stored one.  Returns whether it
    brought it."""
    config = _config(where)
    if not newest(where) or config is None or _would_lose(where, run_dir, config, cfg):
        return False
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}-", dir=run_dir.parent))
    try:
        tmp = scratch / run_dir.name
        tmp.mkdir()
        shutil.copytree(where / "checkpoints", tmp / "checkpoints")
        shutil.copyfile(where / "config.yaml", tmp / "config.yaml")
        if (where / "metrics.csv.gz").is_file():
            _gunzip(where / "metrics.csv.gz", tmp / "metrics.csv")
        _swap_in(tmp, run_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return True


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        return str(path)


def run_kept(cfg, run_dir: Path, finished: Path | None, partial: Path | None, log=print) -> str:
    """Runs one program (:func:`jaxnigt.studies.tuning.run_program`) into ``run_dir`` with
    a store's help: a finished copy of this config in ``finished`` (a stored program) is
    restored instead of run, an unfinished one's checkpoint in ``partial`` is continued.
    When it ends, also by SIGTERM or Ctrl-C (after its chunk:
    :func:`jaxnigt.run.signals.stop_on_signals`), a finished program is packed into
    ``finished`` (replacing a stored copy of another config) and its ``partial`` entry goes;
    an unfinished one keeps its newest checkpoint in ``partial``.  A failure to keep is
    logged, never raised over the run's own outcome.  Either folder may be None (not kept).
    Returns what it did, in words."""
    what = "ran"
    held = finished is not None and holds(finished)
    stale = held and _config(finished) != cfg
    if checkpoint.finished(run_dir, cfg):
        what = "kept (finished here)"
    elif held and not stale:
        restore(finished, run_dir)
        what = "restored from the store"
    elif partial is not None and bring_partial(partial, run_dir, cfg):
        what = "continued from its checkpoint in the store"
        log(f"[store] {run_dir.name}: continues from the checkpoint kept in {_shown(partial)}")
    with signals.stop_on_signals() as stop:  # SIGTERM: checkpoint, then Interrupted
        try:
            tuning.run_program(cfg, run_dir, progress=False, log=log, stop=stop)
        finally:
            try:
                if checkpoint.finished(run_dir, cfg):
                    if finished is not None and (stale or not held):
                        pack(run_dir, finished)
                    if partial is not None:
                        shutil.rmtree(partial, ignore_errors=True)
                elif partial is not None and keep_partial(run_dir, partial):
                    log(f"[store] {run_dir.name}: unfinished; its newest checkpoint is kept in "
                        f"{_shown(partial)}")  # fmt: skip
            except Exception as e:  # the run's own outcome (Interrupted, an error) comes first
                log(f"[store] {run_dir.name}: could not keep it in the store: {e!r}")
    return what


# ------------------------------------------------------------------------ tuning stages


def keep_stage(stage_dir: Path, where: Path) -> tuple[list[str], list[str]]:
    """Stores the tuning stage ``stage_dir`` in ``where``: its request, every finished
    program not yet stored, and the newest checkpoint of every program still unfinished
    (:func:`keep_partial`; the entry goes once the program is stored finished).  Returns
    ``(programs packed, unfinished programs kept)``."""
    packed, kept = [], []
    if (stage_dir / RECORD).is_file():
        where.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stage_dir / RECORD, where / RECORD)
    for run_dir in sorted((stage_dir / "runs").glob("*")):
        name = run_dir.name
        if checkpoint.finished(run_dir):
            if not holds(where / PROGRAMS / name):
                pack(run_dir, where / PROGRAMS / name)
                packed.append(name)
        elif keep_partial(run_dir, where / PARTIAL / name):
            kept.append(name)
        if holds(where / PROGRAMS / name):
            shutil.rmtree(where / PARTIAL / name, ignore_errors=True)
    if (where / PARTIAL).is_dir() and not any((where / PARTIAL).iterdir()):
        (where / PARTIAL).rmdir()
    return packed, kept


def bring_stage(where: Path, stage_dir: Path) -> list[str]:
    """Restores the stored tuning stage ``where`` into ``stage_dir``: its request when the
    stage has none here, every stored program not finished here, and every unfinished one's
    checkpoint where :func:`bring_partial` allows.  Returns the programs it restored (a
    resumed tuning keeps them instead of running them)."""
    if not (where / RECORD).is_file():
        return []
    if not (stage_dir / RECORD).is_file():
        stage_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(where / RECORD, stage_dir / RECORD)
    restored = []
    for stored in sorted((where / PROGRAMS).glob("*")):
        run_dir = stage_dir / "runs" / stored.name
        if holds(stored) and not checkpoint.finished(run_dir):
            restore(stored, run_dir)
            restored.append(stored.name)
    for stored in sorted((where / PARTIAL).glob("*")):
        if not holds(where / PROGRAMS / stored.name) and bring_partial(
            stored, stage_dir / "runs" / stored.name
        ):
            restored.append(f"{stored.name} (unfinished: continues from its stored checkpoint)")
    return restored


def stage_state(where: Path) -> str:
    """The stored tuning stage ``where`` in a few words: how many programs it holds
    (finished, and unfinished with a checkpoint)."""
    n = sum(holds(p) for p in (where / PROGRAMS).glob("*"))
    m = sum(1 for p in (where / PARTIAL).glob("*") if newest(p))
    text = f"{n} program{'s' * (n != 1)} stored" if n else "none stored"
    return text + (f", {m} unfinished with a checkpoint" if m else "")


# ---------------------------------------------------------------------------- inventory


class Inventory(NamedTuple):
    """What a store holds."""

    finished: dict[str, int]  # finished programs by kind
    finished_mb: float  # their files
    unfinished: int  # programs kept as their newest checkpoint (``partial/<program>/``)
    unfinished_mb: float


def inventory(store: Path, kind: Callable[[Path], str] | None = None) -> Inventory:
    """Counts the programs ``store`` holds: a finished one is a folder with a ``done.json``
    outside every ``partial/<program>/`` entry, an unfinished one such an entry.
    ``kind`` names a finished program's kind from its folder relative to ``store`` (None:
    every one is of the kind ``"programs"``)."""
    files = [f for f in store.rglob("*") if f.is_file()] if store.is_dir() else []

    def unfinished(f: Path) -> tuple[str, ...] | None:  # the ``partial/<program>`` it is in
        parts = f.relative_to(store).parts
        k = parts.index(PARTIAL) if PARTIAL in parts else -1
        return parts[: k + 2] if 0 <= k < len(parts) - 2 else None

    finished: dict[str, int] = {}
    for f in files:
        if f.name == "done.json" and unfinished(f) is None:
            name = "programs" if kind is None else kind(f.parent.relative_to(store))
            finished[name] = finished.get(name, 0) + 1
    mb = lambda fs: sum(f.stat().st_size for f in fs) / 2**20
    return Inventory(
        finished=finished,
        finished_mb=mb([f for f in files if unfinished(f) is None]),
        unfinished=len({unfinished(f) for f in files} - {None}),
        unfinished_mb=mb([f for f in files if unfinished(f) is not None]),
    )
