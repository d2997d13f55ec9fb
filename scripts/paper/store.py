"""The results store: what the analysis needs of every finished program, in the repository.

A study begun on one machine resumes on a fresh clone: a program whose results the store
holds is restored into its run directory instead of run again, and the commands say so.

**Layout** (``docs/results/fourth/store``, :data:`STORE`; budget :data:`BUDGET_MB`):

- ``<scenario>/seeds_<a>-<b>/``: a fourth-edition seed block (:mod:`paper.fourth`);
- ``<scenario>/<stage>/``: a tuning stage of the third edition's protocol (``look``,
  ``tune``, ``tune__<variant>``; :mod:`paper.third`), its request (``tune.json``) and each
  finished program under ``programs/<program>/`` (the stage's ``runs/<program>/``; not
  ``runs``, which the repository ignores).

A stored program is its ``config.yaml`` and ``summary.json``, its gzipped ``metrics.csv``
and its ``done.json`` marker (:func:`pack`): what :func:`jaxnigt.analysis.run_data.load_run`
and :func:`jaxnigt.run.checkpoint.finished` read; checkpoints and plots are not kept.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from jaxnigt.run import checkpoint
from jaxnigt.studies import grid as tuning_files

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "docs" / "results" / "fourth" / "store"
BUDGET_MB = 30  # the store's size budget
FILES = ("config.yaml", "summary.json")
PROGRAMS = "programs"  # a stored stage's folder of programs


def pack(run_dir: Path, where: Path) -> None:
    """Copies what the analysis needs of the finished run ``run_dir`` into ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(run_dir / f, where / f)
    with (
        (run_dir / "metrics.csv").open("rb") as src,
        gzip.GzipFile(where / "metrics.csv.gz", "wb", mtime=0) as dst,
    ):
        shutil.copyfileobj(src, dst)
    shutil.copyfile(run_dir / "checkpoints" / "done.json", where / "done.json")


def restore(where: Path, run_dir: Path) -> None:
    """A stored program back into a run directory that ``load_run`` reads."""
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(where / f, run_dir / f)
    with (
        gzip.open(where / "metrics.csv.gz", "rb") as src,
        (run_dir / "metrics.csv").open("wb") as dst,
    ):
        shutil.copyfileobj(src, dst)
    shutil.copyfile(where / "done.json", run_dir / "checkpoints" / "done.json")


def holds(where: Path) -> bool:
    """Whether ``where`` holds a stored program."""
    return (where / "done.json").is_file()


# --------------------------------------------------------------------- tuning stages


def keep_stage(stage_dir: Path, where: Path) -> list[str]:
    """Packs the tuning stage ``stage_dir``'s request and every finished program not yet in
    ``where``; returns the programs it packed."""
    packed = []
    if (stage_dir / tuning_files.RECORD).is_file():
        where.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stage_dir / tuning_files.RECORD, where / tuning_files.RECORD)
    for run_dir in sorted((stage_dir / "runs").glob("*")):
        if not holds(where / PROGRAMS / run_dir.name) and checkpoint.finished(run_dir):
            pack(run_dir, where / PROGRAMS / run_dir.name)
            packed.append(run_dir.name)
    return packed


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
    return restored


def stage_state(where: Path) -> str:
    """A stored tuning stage in a few words: how many programs it holds."""
    n = sum(holds(p) for p in (where / PROGRAMS).glob("*"))
    return f"{n} program{'s' * (n != 1)} stored" if n else "none stored"


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
