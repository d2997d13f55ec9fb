"""Workers whose physics differ: the row registered in docs/results/physics.md before any run.

    python scripts/paper physics store     # the finished tuning and report run into the store
    python scripts/paper physics analyze   # docs/results/physics/compare.* and types.json

The runs themselves are the library's commands, as registered (``jaxnigt tune``, ``jaxnigt
run``; docs/results/physics.md). ``store`` keeps what they wrote in the repository
(``docs/results/physics/``: the tuning's ``tune.json`` and ``tuned.yaml``, the report run
compacted by :mod:`jaxnigt.studies.store`), so ``analyze`` on a fresh clone gives the same
JSON: ``jaxnigt compare`` as registered, and each worker type's second-half return per
method (reported beside the verdict, not decided on).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from jaxnigt.analysis import run_data, stats
from jaxnigt.studies import store as results_store

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "results" / "physics"
RUNS = ROOT / "runs" / "results" / "physics"
REFERENCE, BASELINE, STATISTIC = "malenia_nigt", "afedpg", "second_half"


def store(runs: Path = RUNS, docs: Path = DOCS) -> list[Path]:
    """Copies the tuning's record and packs the finished report run into ``docs``."""
    (docs / "tune").mkdir(parents=True, exist_ok=True)
    for name in ("tune.json", "tuned.yaml"):
        shutil.copyfile(runs / "tune" / name, docs / "tune" / name)
    results_store.pack(runs / "report", docs / "store" / "report")
    return [docs / "tune", docs / "store" / "report"]


def types(run: run_data.Run) -> dict:
    """Each method's per-seed second-half return of each worker type, and the medians."""
    out = {}
    for name, method in run.methods.items():
        per = {}
        for column, curves in sorted(method.per_type.items()):
            values = [stats.second_half(x, y, run.budget) for x, y in curves]
            per[column] = {"seeds": values, "median": float(np.median(values))}
        out[name] = per
    return out


def analyze(docs: Path = DOCS) -> dict:
    """The registered comparison and the per-type returns, from the stored report run."""
    from jaxnigt import cli

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "report"
        results_store.restore(docs / "store" / "report", run_dir)
        argv = ["compare", str(run_dir), "--reference", REFERENCE, "--baselines", BASELINE]
        argv += ["--statistic", STATISTIC, "--claim", "ahead", "--out", str(docs / "compare")]
        if cli.main(argv) != 0:
            raise SystemExit("physics: the comparison failed")
        found = types(run_data.load_run(run_dir))
    (docs / "types.json").write_text(json.dumps(found, indent=2) + "\n")
    for path in (docs / "compare.json", docs / "compare.md"):  # the temporary run's path
        path.write_text(path.read_text().replace(str(run_dir), "docs/results/physics/store/report"))
    return found
