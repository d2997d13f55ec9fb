"""Same numbers before and after a refactoring: run fixed scenarios, compare metrics byte for byte.

Runs the demo and short runs that cover every algorithm, both in-flight modes, both server
links, both AllReduce models, a learning-rate grid and a heterogeneous task, each into
``OUT/<name>/``, then (with ``--compare REF``) checks that every result file equals the one in
``REF/<name>/`` byte for byte, on the columns and summary fields both have (a column or field
the newer commit added, such as ``worker_time``, is named and left out)::

    python scripts/same_numbers.py --out runs/same_before           # on the old commit
    python scripts/same_numbers.py --out runs/same_after --compare runs/same_before

The scenarios start from ``configs/demo.yaml`` and the report configs in
``scripts/paper/configs/``, so compare two commits whose configs agree.  Exit status 1 names
the first file that differs.
``--quick`` skips the demo and the bundled configs (the slowest); ``--only`` names scenarios
(``bundled_<config>`` for each config in ``configs/``).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

ALL = "[rennala_nigt,malenia_nigt,sync_nigt,sync_pg,rennala_pg,afedpg,asgd,admm_pg,a2c,a3c,impala]"
SHORT = [
    "seeds=2",
    "budget=400",
    "eval.every=3",
    "eval.episodes=4",
    "per_algorithm={}",
    "hparams.M=8",
    "hparams.M_init=12",
    "cluster.n=4",
    "on_nonfinite=mark",
]
SCENARIOS = {
    "every_algorithm": (
        "scripts/paper/configs/point_mass_exponential.yaml",
        [*SHORT, f"algorithms={ALL}"],
    ),
    "discard_contributors_independent": (
        "scripts/paper/configs/point_mass_straggler.yaml",
        [
            *SHORT,
            f"algorithms={ALL}",
            "cluster.inflight=discard",
            "cluster.allreduce=contributors",
            "cluster.link=independent",
            "grid.learning_rate=[0.01,0.03]",
        ],
    ),
    "heterogeneous": (
        "scripts/paper/configs/point_mass_hetero.yaml",
        [
            *SHORT,
            "cluster.n=3",
            "cluster.h=[1.0,10.0,3.0]",
            "cluster.kappa=0.5",
            "algorithms=[malenia_nigt,rennala_nigt,afedpg,admm_pg]",
        ],
    ),
    "demo": ("configs/demo.yaml", []),
}
#: Every bundled config (``configs/``, one scenario each, ``bundled_<name>``), shortened to
#: a few rounds of one seed: their cluster models, algorithms and environments as shipped.
BUNDLED_SHORT = ["seeds=1", "max_rounds=2", "eval.every=1", "eval.episodes=2", "on_nonfinite=mark"]
SCENARIOS |= {
    f"bundled_{path.stem}": (str(path), BUNDLED_SHORT)
    for path in sorted(Path(__file__).resolve().parents[1].glob("configs/*.yaml"))
    if path.stem != "demo"
}
FILES = ("metrics.csv", "worker_counts.csv")
WALL_CLOCK = ("wall_seconds", "compile_seconds")  # summary.json fields that are not results


def run(name: str, out: Path) -> None:
    config, overrides = SCENARIOS[name]
    cmd = [sys.executable, "-m", "jaxnigt.cli", "run", config, "--out", str(out / name)]
    cmd += ["--overwrite", "--no-progress"]
    for o in overrides:
        cmd += ["--set", o]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _summary_numbers(path: Path) -> dict:
    summary = json.loads(path.read_text())
    return {a: {k: v for k, v in e.items() if k not in WALL_CLOCK} for a, e in summary.items()}


def _common(a: dict, b: dict) -> tuple[dict, dict, set]:
    """``a`` and ``b`` on the fields both entries have, and the fields only one has."""
    out_a, out_b, only = {}, {}, set()
    for key in a.keys() | b.keys():
        if key not in a or key not in b:
            only.add(key)
            continue
        ea, eb = a[key], b[key]
        if isinstance(ea, dict) and isinstance(eb, dict):
            shared = ea.keys() & eb.keys()
            only |= {f"{key}.{k}" for k in ea.keys() ^ eb.keys()}
            ea, eb = {k: ea[k] for k in shared}, {k: eb[k] for k in shared}
        out_a[key], out_b[key] = ea, eb
    return out_a, out_b, only


def _columns(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def same_rows(a: Path, b: Path) -> tuple[bool, list[str]]:
    """The two CSV files agree, byte for byte, on every column both have; and the columns
    only one has."""
    (ha, ra), (hb, rb) = _columns(a), _columns(b)
    shared = [c for c in ha if c in hb]
    ia, ib = [ha.index(c) for c in shared], [hb.index(c) for c in shared]
    same = len(ra) == len(rb) and all(
        [x[i] for i in ia] == [y[j] for j in ib] for x, y in zip(ra, rb, strict=True)
    )
    return same, sorted(set(ha) ^ set(hb))


def compare(out: Path, ref: Path, names: list[str]) -> int:
    for name in names:
        new, old, only = _common(
            _summary_numbers(out / name / "summary.json"),
            _summary_numbers(ref / name / "summary.json"),
        )
        if new != old:
            print(f"DIFFERENT: {name}/summary.json")
            return 1
        if only:
            print(f"left out of {name}/summary.json (one side only): {', '.join(sorted(only))}")
        for f in FILES:
            a, b = out / name / f, ref / name / f
            if not a.exists() and not b.exists():
                continue
            same, only = same_rows(a, b) if a.exists() and b.exists() else (False, [])
            if not same:
                print(f"DIFFERENT: {a} vs {b}")
                return 1
            print(f"same: {name}/{f}" + (f" (left out: {', '.join(only)})" if only else ""))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--compare", type=Path, help="reference directory from an earlier commit")
    p.add_argument("--quick", action="store_true", help="skip the demo")
    p.add_argument("--only", nargs="+", choices=list(SCENARIOS), help="run only these")
    args = p.parse_args()
    slow = lambda n: n == "demo" or n.startswith("bundled_")
    names = [n for n in (args.only or SCENARIOS) if not (args.quick and slow(n))]
    for name in names:
        run(name, args.out)
    return compare(args.out, args.compare, names) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
