"""The results store: what the analysis needs of every finished program, in the repository.

A study begun on one machine resumes on a fresh clone: a program whose results the store
holds is restored into its run directory instead of run again, and the commands say so.

**Layout** (``docs/results/fourth/store``, :data:`STORE`; budget :data:`BUDGET_MB`):

- ``<scenario>/seeds_<a>-<b>/``: a fourth-edition seed block (:mod:`paper.fourth`);
- ``<scenario>/report/``: the third edition's report runs, each finished one under
  ``programs/<run>/`` and an unfinished one's newest checkpoint under ``partial/<run>/``
  (:func:`run_kept`); a fourth-edition seed block still running keeps its checkpoint under
  ``<scenario>/partial/seeds_<a>-<b>/`` the same way;
- ``<scenario>/<stage>/``: a tuning stage of the third edition's protocol (``look``,
  ``tune``, ``tune__<variant>``; :mod:`paper.third`), its request (``tune.json``) and each
  finished program under ``programs/<program>/`` (the stage's ``runs/<program>/``; not
  ``runs``, which the repository ignores); a program that was still running when the stage
  stopped leaves its newest checkpoint under ``partial/<program>/`` (:func:`keep_partial`),
  so that a fresh clone continues it from there instead of from the start, and the entry
  goes once the program is stored finished.

A stored program is its ``config.yaml`` and ``summary.json``, its gzipped ``metrics.csv``
and its ``done.json`` marker (:func:`pack`): what :func:`jaxnigt.analysis.run_data.load_run`
and :func:`jaxnigt.run.checkpoint.finished` read; checkpoints and plots are not kept.

The stored ``metrics.csv`` is compacted (:func:`compact`) to the rows the analysis reads:
every evaluation, each seed's first and last step, with the ``grads`` of the steps left out
added to the next row kept (``load_run`` sums them). A per-arrival method's run has a row
per arrival (AFedPG on heterogeneous reacher: 528,016 rows, 1,072 evaluations), so the other
per-step columns (training return, counts, staleness) of the rows left out are not kept.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

from jaxnigt.run import checkpoint
from jaxnigt.studies import grid as tuning_files

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "docs" / "results" / "fourth" / "store"
BUDGET_MB = 30  # the store's size budget
FILES = ("config.yaml", "summary.json")
PROGRAMS = "programs"  # a stored stage's folder of programs
PARTIAL = "partial"  # a stored stage's folder of unfinished programs (newest checkpoints)
REPORT = "report"  # a scenario's folder of the third edition's report runs


def _evaluated(row: dict) -> bool:
    return any(v != "" for k, v in row.items() if k.startswith("eval_"))  # eval_return, eval_type*


def _number(text: str) -> float:
    v = float(text) if text not in ("", None) else math.nan
    return v if math.isfinite(v) else 0.0


def compact(rows: list[dict]) -> list[dict]:
    """The rows of a ``metrics.csv`` (strings, as read) that the analysis reads.

    Keeps, in order, every row with an evaluation and, per algorithm, grid point and seed,
    its first row and its row of the highest step; a row left out adds its ``grads`` to the
    next kept row of its seed, so their per-seed sum is unchanged. Kept rows are otherwise
    unchanged.
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


def pack(run_dir: Path, where: Path) -> None:
    """Copies what the analysis needs of the finished run ``run_dir`` into ``where`` (its
    metrics :func:`compact`)."""
    where.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(run_dir / f, where / f)
    _gzip_rows(run_dir / "metrics.csv", where / "metrics.csv.gz", None)
    shutil.copyfile(run_dir / "checkpoints" / "done.json", where / "done.json")


def repack(where: Path) -> None:
    """Packs the stored program ``where`` again (a program stored before its metrics were
    compacted comes out compacted; a compacted one unchanged)."""
    with tempfile.TemporaryDirectory() as tmp:
        restore(where, Path(tmp) / "run")
        pack(Path(tmp) / "run", where)


def _gunzip(src: Path, dst: Path) -> None:
    with gzip.open(src, "rb") as f, dst.open("wb") as out:
        shutil.copyfileobj(f, out)


def restore(where: Path, run_dir: Path) -> None:
    """A stored program back into a run directory that ``load_run`` reads."""
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(where / f, run_dir / f)
    _gunzip(where / "metrics.csv.gz", run_dir / "metrics.csv")
    shutil.copyfile(where / "done.json", run_dir / "checkpoints" / "done.json")


def marker(run_dir: Path) -> list[str]:
    """The algorithms ``run_dir``'s ``done.json`` lists as finished."""
    return checkpoint.done_algorithms(run_dir)


def drop_algorithm(run_dir: Path, algorithm: str) -> None:
    """``algorithm`` taken out of the finished run ``run_dir`` (its rows of ``metrics.csv``
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


def holds(where: Path) -> bool:
    """Whether ``where`` holds a stored program."""
    return (where / "done.json").is_file()


# --------------------------------------------------------------------- tuning stages


def _newest(run_dir: Path) -> dict[str, Path]:
    """``{algorithm: its newest complete checkpoint with its digest}`` of the algorithms in
    progress (a chunk whose digest was never written cannot be restored)."""
    root = run_dir / "checkpoints"
    algorithms = sorted(p.name for p in root.glob("*") if p.is_dir()) if root.is_dir() else []
    return {a: chunks[-1] for a in algorithms if (chunks := checkpoint.saved(run_dir, a))}


def _config(run_dir: Path):
    """The config ``run_dir/config.yaml`` holds (None: none, or not a valid config)."""
    from jaxnigt import config as config_lib

    try:
        return config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml"))
    except (OSError, config_lib.ConfigError):
        return None


def _gzip_rows(src: Path, dst: Path, algorithms: list[str] | None) -> None:
    """``src`` (a metrics CSV) :func:`compact`-ed and gzipped into ``dst``, with only the
    rows of ``algorithms`` (None: every row)."""
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


def _swap_in(tmp: Path, where: Path) -> None:
    """Puts the folder ``tmp`` at ``where`` (replacing it) by renames only."""
    old = tmp.with_name(tmp.name + "-old")
    if where.exists():
        where.rename(old)
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(where)
    shutil.rmtree(old, ignore_errors=True)


def keep_partial(run_dir: Path, where: Path) -> bool:
    """Stores the unfinished program ``run_dir`` in ``where`` (replacing what it held): its
    config, the done marker and (compacted) metrics rows of its finished algorithms (what a
    resume keeps; their ``worker_counts.csv`` rows are not kept), and the newest checkpoint of
    each algorithm in progress with its digest. Written beside the store's ``partial``
    folder and renamed into place. Returns whether it had one to store."""
    newest = _newest(run_dir)
    if not newest or _config(run_dir) is None or checkpoint.finished(run_dir):
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
        for algorithm, path in newest.items():
            shutil.copytree(path, tmp / "checkpoints" / algorithm / path.name)
            digest = path.with_name(path.name + ".sha256")
            shutil.copyfile(digest, tmp / "checkpoints" / algorithm / digest.name)
        _swap_in(tmp, where)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return True


def bring_partial(where: Path, run_dir: Path, cfg=None) -> bool:
    """Puts the stored unfinished program ``where`` into ``run_dir`` (copied beside it, then
    renamed into place) and returns True, unless it would lose or mislead: not when
    ``run_dir`` is finished, when it is a run of the stored config (of ``cfg``, if given)
    with a checkpoint as new for each stored algorithm or with an algorithm finished that
    the stored entry has not, when the stored entry is of another config than ``cfg``, or
    (without ``cfg``) when ``run_dir`` holds a run of another config than the stored one."""
    stored, config = _newest(where), _config(where)
    if not stored or config is None or checkpoint.finished(run_dir):
        return False
    if cfg is not None and config != cfg:
        return False
    here_config = _config(run_dir)
    if here_config is not None:
        if here_config != config:
            if cfg is None:
                return False  # not ours to judge: the running command checks its config
        else:
            here = _newest(run_dir)
            if all(a in here and here[a].name >= p.name for a, p in stored.items()):
                return False
            if set(checkpoint.done_algorithms(run_dir)) - set(checkpoint.done_algorithms(where)):
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


def run_kept(cfg, run_dir: Path, finished: Path | None, partial: Path | None, log=print) -> str:
    """Runs one program (:func:`jaxnigt.studies.tuning.run_program`) into ``run_dir`` with
    the store's help: a finished copy of this config in ``finished`` (a stored program) is
    restored instead of run, an unfinished one's checkpoint in ``partial`` is continued; when
    it ends, also by SIGTERM or Ctrl-C (after its chunk, :func:`jaxnigt.run.signals.
    stop_on_signals`), a finished program is packed into ``finished`` (replacing a stored
    copy of another config) and its ``partial`` entry goes, an unfinished one keeps its
    newest checkpoint in ``partial``; a failure to keep is logged, never raised over the
    run's own outcome. Either folder may be None (not kept). Returns what it did, in
    words."""
    from jaxnigt.run import signals
    from jaxnigt.studies import tuning

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
        log(f"[store] {run_dir.name}: continues from the checkpoint kept in {relative(partial)}")
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
                        f"{relative(partial)}")  # fmt: skip
            except Exception as e:  # the run's own outcome (Interrupted, an error) comes first
                log(f"[store] {run_dir.name}: could not keep it in the store: {e!r}")
    return what


def keep_stage(stage_dir: Path, where: Path) -> tuple[list[str], list[str]]:
    """Packs the tuning stage ``stage_dir``'s request and every finished program not yet in
    ``where``, and keeps the newest checkpoint of every program still unfinished
    (:func:`keep_partial`); returns ``(programs packed, unfinished programs kept)``."""
    packed, partial = [], []
    if (stage_dir / tuning_files.RECORD).is_file():
        where.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stage_dir / tuning_files.RECORD, where / tuning_files.RECORD)
    for run_dir in sorted((stage_dir / "runs").glob("*")):
        name = run_dir.name
        if checkpoint.finished(run_dir):
            if not holds(where / PROGRAMS / name):
                pack(run_dir, where / PROGRAMS / name)
                packed.append(name)
        elif keep_partial(run_dir, where / PARTIAL / name):
            partial.append(name)
        if holds(where / PROGRAMS / name):
            shutil.rmtree(where / PARTIAL / name, ignore_errors=True)
    if (where / PARTIAL).is_dir() and not any((where / PARTIAL).iterdir()):
        (where / PARTIAL).rmdir()
    return packed, partial


def bring_stage(where: Path, stage_dir: Path) -> list[str]:
    """Restores the stored tuning stage ``where`` into ``stage_dir``: its request when the
    stage has none here, and every stored program not finished here; returns the programs it
    restored (the tuning then keeps them instead of running them)."""
    if not (where / tuning_files.RECORD).is_file():
        return []
    if not (stage_dir / tuning_files.RECORD).is_file():
        stage_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(where / tuning_files.RECORD, stage_dir / tuning_files.RECORD)
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
    """A stored tuning stage in a few words: how many programs it holds (finished, and
    unfinished with a checkpoint)."""
    n = sum(holds(p) for p in (where / PROGRAMS).glob("*"))
    m = sum(1 for p in (where / PARTIAL).glob("*") if _newest(p))
    text = f"{n} program{'s' * (n != 1)} stored" if n else "none stored"
    return text + (f", {m} unfinished with a checkpoint" if m else "")


class Inventory(NamedTuple):
    """What a store holds: finished programs by kind, and unfinished programs' checkpoints."""

    blocks: int  # fourth-edition seed blocks
    reports: int  # the third edition's report runs
    tuning: int  # tuning programs (look, tune, variants)
    finished_mb: float  # the finished programs' files
    unfinished: int  # programs kept as their newest checkpoint
    unfinished_mb: float


def inventory(store: Path = STORE) -> Inventory:
    """Counts the programs ``store`` holds, by the layout above."""
    files = [f for f in store.rglob("*") if f.is_file()] if store.is_dir() else []

    def unfinished(f: Path) -> tuple[str, ...] | None:  # the ``partial/<program>`` it is in
        parts = f.relative_to(store).parts
        k = parts.index(PARTIAL) if PARTIAL in parts else -1
        return parts[: k + 2] if 0 <= k < len(parts) - 2 else None

    done = [f.parent.relative_to(store).parts for f in files
            if f.name == "done.json" and unfinished(f) is None]  # fmt: skip
    blocks = sum(d[-1].startswith("seeds_") for d in done)
    reports = sum(REPORT in d for d in done)
    mb = lambda fs: sum(f.stat().st_size for f in fs) / 2**20
    return Inventory(
        blocks=blocks, reports=reports, tuning=len(done) - blocks - reports,
        finished_mb=mb([f for f in files if unfinished(f) is None]),
        unfinished=len({unfinished(f) for f in files} - {None}),
        unfinished_mb=mb([f for f in files if unfinished(f) is not None]),
    )  # fmt: skip


def relative(path) -> str:
    """``path`` relative to the repository when it is inside it (files in the repository
    name runs by such paths, not by the absolute paths of the machine that ran them)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def relative_paths(obj):
    """``obj`` (JSON data) with every string that is an absolute path inside the repository
    made :func:`relative`."""
    if isinstance(obj, dict):
        return {k: relative_paths(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [relative_paths(v) for v in obj]
    if isinstance(obj, str) and obj.startswith(f"{ROOT}/"):
        return relative(obj)
    return obj
