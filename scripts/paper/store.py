"""The paper's results store: where it is, its budget, and how the editions lay it out.

What a results store keeps and how (a stored program, an unfinished one's checkpoint, a
tuning stage) is the library's :mod:`jaxnigt.studies.store`; the paper's store is
``docs/results/fourth/store`` (:data:`STORE`, within :data:`BUDGET_MB`), laid out as:

- ``<scenario>/seeds_<a>-<b>/``: a fourth-edition seed block (:mod:`paper.fourth`), a stored
  program; one still running keeps its checkpoint under ``<scenario>/partial/seeds_<a>-<b>/``;
- ``<scenario>/report/``: the third edition's report runs, each as ``run_kept`` keeps a
  program (``programs/<run>/``, ``partial/<run>/``);
- ``<scenario>/<stage>/``: a tuning stage of the third edition's protocol (``look``,
  ``tune``, ``tune__<variant>``; :mod:`paper.third`), as ``keep_stage`` stores it.
"""

from __future__ import annotations

from pathlib import Path

from jaxnigt.studies import store

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "docs" / "results" / "fourth" / "store"
BUDGET_MB = 30  # the store's size budget
REPORT = "report"  # a scenario's folder of the third edition's report runs


def kind(where: Path) -> str:
    """The kind of the finished program stored at ``where`` (relative to the store):
    ``blocks`` (a seed block), ``reports`` (a report run) or ``tuning``."""
    if where.name.startswith("seeds_"):
        return "blocks"
    return "reports" if REPORT in where.parts else "tuning"


def inventory(where: Path = STORE) -> store.Inventory:
    """What the store ``where`` holds, its finished programs counted by :func:`kind`."""
    return store.inventory(where, kind)


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
