"""A tuning's programs one after another vs in parallel processes (``jaxnigt tune --jobs``).

One jitted run keeps about one CPU core busy, and sharding its batch over forced host devices
is slower (docs/benchmarks.md, "devices"), so ``--jobs N`` runs independent programs in N
child processes.  Measured here: ``jaxnigt tune`` of one point_mass config with two
algorithms (two programs, 3 α × 2 seeds each, no extension), as fresh commands, one with
``--jobs 1`` and then one with ``--jobs N`` (default: the number of cores), one pair per
budget.  Every command is a fresh process with ``jaxnigt``'s persistent compilation cache (a
program's shape does not depend on the budget, so only the first command may compile), and
the tuning directories are fresh, so every program runs.

``speedup = wall(--jobs 1) / wall(--jobs N)`` per pair: at most N, less by each child's start
(a fresh interpreter importing JAX and loading its program), which short programs do not
repay.  The tuning.json of both sides must agree (checked: the same winners, scores within
1e-5).

Usage::

    python scripts/bench.py jobs [--quick]
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
name: bench_jobs
algorithms: [rennala_nigt, sync_nigt]
seeds: 2
budget: {budget}
env: {{name: point_mass}}
cluster: {{n: 10, h: sqrt, kappa: sqrt}}
hparams: {{M: 20, eta: 0.1}}
eval: {{every_time: {every}, episodes: 4}}
checkpoint_every: 0
"""


def _tune(config: Path, out: Path, jobs: int) -> float:
    argv = [sys.executable, "-m", "jaxnigt.cli", "tune", str(config), "--out", str(out),
            "--lr-exp=-8:-4:2", "--eta", "0.1", "--max-extensions", "0", "--no-progress",
            "--jobs", str(jobs)]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall


def _scores(out: Path) -> dict:
    report = json.loads((out / "tuning.json").read_text())
    return {a: ((r["chosen"] or {}).get("lr_exp"), [p["score"] for p in r["points"]])
            for a, r in report["algorithms"].items()}  # fmt: skip


def _agree(a, b) -> bool:
    """The same winner and every score within 1e-5 (relative above 1; NaN: both)."""
    (best_a, scores_a), (best_b, scores_b) = a, b

    def close(x, y):
        return abs(x - y) <= 1e-5 * max(1.0, abs(x)) or (math.isnan(x) and math.isnan(y))

    pairs = zip(scores_a, scores_b, strict=True) if len(scores_a) == len(scores_b) else None
    return best_a == best_b and pairs is not None and all(close(x, y) for x, y in pairs)


def run(quick: bool = False, jobs: int | None = None) -> list[dict]:
    """One pair (``--jobs 1``, then ``--jobs N``) per budget: quick 1,000; full 4,000 and
    32,000 (programs of seconds against programs of a minute or more)."""
    jobs = jobs or os.cpu_count() or 2
    budgets = (1000.0,) if quick else (4000.0, 32000.0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pair, budget in enumerate(budgets, 1):
            config = Path(tmp) / f"bench_jobs_{pair}.yaml"
            config.write_text(CONFIG.format(budget=budget, every=budget / 40))
            one = _tune(config, Path(tmp) / f"one{pair}", 1)
            many = _tune(config, Path(tmp) / f"many{pair}", jobs)
            a, b = _scores(Path(tmp) / f"one{pair}"), _scores(Path(tmp) / f"many{pair}")
            same = a.keys() == b.keys() and all(_agree(a[k], b[k]) for k in a)
            rows.append({"pair": pair, "programs": 2, "budget": budget, "jobs": jobs,
                         "one_s": one, "many_s": many, "speedup": one / many,
                         "same_results": same})  # fmt: skip
    return rows


def format_rows(rows: list[dict]) -> str:
    from benchmarks.common import format_table

    cols = (
        ("pair", "pair", "d"),
        ("programs", "programs", "d"),
        ("budget", "budget", ",.0f"),
        ("jobs", "N", "d"),
        ("one_s", "--jobs 1 s", ".1f"),
        ("many_s", "--jobs N s", ".1f"),
        ("speedup", "speedup", ".2f"),
        ("same_results", "same results", ""),
    )
    return format_table(rows, cols)
