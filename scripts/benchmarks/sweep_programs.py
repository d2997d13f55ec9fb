"""Benchmark: the demo's sweep as padded programs (the default) vs one point at a time.

``jaxnigt sweep configs/demo.yaml --set 'algorithms=[rennala_nigt]' --over
cluster.n=10,30,100 --over per_algorithm.rennala_nigt.M=20,30,50 --seeds 5`` twice (the
demo's ``per_algorithm`` sets Rennala NIGT's M, and the other algorithms read none, so an
M axis is Rennala NIGT's alone: ``jaxnigt sweep`` refuses ``hparams.M`` there), each in a
fresh process with the persistent compilation cache off (``JAXNIGT_CACHE_DIR=``): *per
point* (``--per-point``, how every sweep ran before padded programs: each point's
algorithms compile and run their own programs) and *grouped* (one padded program per
algorithm).  Columns: the programs compiled (point × algorithm, or the programs of the
grouped sweep's log), their compile seconds (each program once), the trajectories per step
of the largest program (``jaxnigt plan``'s count: padded slots included) and the wall time
of the whole command; ``max rel. diff`` compares the two ``sweep.csv`` files column by
column (wall and compile seconds aside).

Usage::

    python scripts/bench.py sweep [--quick]
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

M_AXIS = "per_algorithm.rennala_nigt.M"
ONLY_RENNALA = ["--set", "algorithms=[rennala_nigt]"]
FULL = (["cluster.n=10,30,100", f"{M_AXIS}=20,30,50"], 5, ONLY_RENNALA)
QUICK = (["cluster.n=3,6", f"{M_AXIS}=20,30"], 2, [*ONLY_RENNALA, "--set", "budget=300"])
TIMING = ("wall_seconds", "compile_seconds")


def _sweep(out: Path, over, seeds, extra, flags) -> tuple[float, str]:
    argv = [sys.executable, "-m", "jaxnigt.cli", "sweep", "configs/demo.yaml"]
    argv += [x for o in over for x in ("--over", o)] + ["--seeds", str(seeds), *extra]
    argv += ["--out", str(out), "--no-progress", *flags]
    env = {**os.environ, "JAXNIGT_CACHE_DIR": "", "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return wall, proc.stdout + proc.stderr


def _compile(out: Path, log: str, grouped: bool) -> tuple[int, float]:
    """``(programs, compile seconds)``.  Per point, every point's algorithm compiles its own
    programs; grouped, the log says how many programs there are and the points of one
    program carry its figure (each (algorithm, figure) counted once)."""
    entries = [
        (algorithm, entry["compile_seconds"])
        for summary in sorted(out.glob("*/summary.json"))
        for algorithm, entry in json.loads(summary.read_text()).items()
    ]
    if not grouped:
        return len(entries), sum(s for _, s in entries)
    programs = int(re.search(r"in (\d+) programs", log).group(1))
    return programs, sum(s for _, s in set(entries))


def _rows(out: Path) -> list[dict]:
    with open(out / "sweep.csv", newline="") as f:
        return list(csv.DictReader(f))


def _largest(log: str) -> int:
    """The most trajectories per step of a program in ``jaxnigt plan``'s lines."""
    found = re.findall(r"([\d,]+) trajectories per step", log)
    return max(int(x.replace(",", "")) for x in found)


def _plan(over, seeds, extra, flags) -> int:
    argv = [sys.executable, "-m", "jaxnigt.cli", "plan", "configs/demo.yaml"]
    argv += [x for o in over for x in ("--over", o)] + ["--seeds", str(seeds), *extra, *flags]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return _largest(proc.stdout)


def run(quick: bool = False) -> list[dict]:
    over, seeds, extra = QUICK if quick else FULL
    rows, tables = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for form, flags in (("per point", ["--per-point"]), ("grouped", [])):
            out = Path(tmp) / form.replace(" ", "_")
            wall, log = _sweep(out, over, seeds, extra, flags)
            programs, compile_s = _compile(out, log, grouped=not flags)
            tables[form] = _rows(out)
            rows.append(
                {
                    "form": form,
                    "programs": programs,
                    "compile_s": compile_s,
                    "largest_trajectories_per_step": _plan(over, seeds, extra, flags),
                    "wall_s": wall,
                }
            )
    worst = 0.0
    for a, b in zip(tables["grouped"], tables["per point"], strict=True):
        for column, value in b.items():
            if column in TIMING or value == a[column]:
                continue
            worst = max(worst, abs(float(a[column]) - float(value)) / max(abs(float(value)), 1e-12))
    rows[1] |= {
        "wall_over_per_point": rows[1]["wall_s"] / rows[0]["wall_s"],
        "compile_over_per_point": rows[1]["compile_s"] / rows[0]["compile_s"],
        "max_rel_diff": worst,
    }
    return rows


def format_rows(rows: list[dict]) -> str:
    from benchmarks.common import format_table

    cols = (
        ("form", "sweep", ""),
        ("programs", "programs compiled", "d"),
        ("compile_s", "compile s", ".1f"),
        ("largest_trajectories_per_step", "largest program's trajectories / step", ",d"),
        ("wall_s", "wall s", ".1f"),
    )
    return format_table(rows, cols)
