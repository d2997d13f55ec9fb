"""Heavy-tailed compute times: the rows registered in docs/results/heavy.md before any run.

    python scripts/paper heavy run [ROW ...]      # tune, then the seed blocks the rule needs
    python scripts/paper heavy store [ROW ...]    # the finished runs into docs/results/heavy/
    python scripts/paper heavy analyze [ROW ...]  # the registered comparisons, from the store

A row is a config of ``scripts/paper/configs`` (:data:`ROWS`).  ``run`` is the library's
commands, as registered: ``jaxnigt tune`` on seeds 100 and 101 (its target of the time
statistic fixed there), then ``jaxnigt run`` of the tuned config on the seed blocks
:data:`BLOCKS` while a comparison is still open under the rule (``jaxnigt compare
--sequential``), up to the row's cap.  ``store`` keeps the tuning's record and packs each
block (:mod:`jaxnigt.studies.store`); ``analyze`` restores them on a fresh clone and runs the
registered comparison, then Holm over the family's comparisons (:data:`FAMILIES`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from jaxnigt.analysis import verdicts
from jaxnigt.studies import store as results_store

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "scripts" / "paper" / "configs"
DOCS = ROOT / "docs" / "results" / "heavy"
RUNS = ROOT / "runs" / "results" / "heavy"
REFERENCE, BASELINES, STATISTIC = "mindflayer_nigt", ("rennala_nigt", "sync_nigt"), "time_to_80"
BLOCKS = ((0, 5), (5, 10), (10, 20), (20, 40))
# row -> (the tuning's grid flags, the seed cap)
ROWS = {
    "point_mass_heavy": (["--lr-exp=-10:-1", "--eta", "0.001,0.01,0.1"], 40),
    "point_mass_heavy_cancel": (["--lr-exp=-10:-1", "--eta", "0.001,0.01,0.1"], 40),
    "reacher_heavy": (["--lr-exp=-10:-5", "--eta", "0.1"], 20),
}
# Holm at 10 % over each family's comparisons (row x baseline)
FAMILIES = {"primary": ("point_mass_heavy", "reacher_heavy"), "model": ("point_mass_heavy_cancel",)}


def _cli(argv: list[str]) -> None:
    from jaxnigt import cli

    if cli.main(argv) != 0:
        raise SystemExit(f"heavy: jaxnigt {' '.join(argv)} failed")


def target(tune_dir: Path) -> float:
    """The time statistic's target the tuning fixed on its initial grid (seeds 100, 101)."""
    return float(json.loads((tune_dir / "tuning.json").read_text())["target"]["value"])


def stages(row: str) -> str:
    """The rule's looks up to the row's cap."""
    return ",".join(str(b[1]) for b in BLOCKS if b[1] <= ROWS[row][1])


def _compare(row: str, block_dirs: list[Path], out: Path, tg: float) -> dict:
    argv = ["compare", *map(str, block_dirs), "--reference", REFERENCE]
    argv += ["--baselines", ",".join(BASELINES), "--statistic", STATISTIC, "--claim", "ahead"]
    argv += ["--target", repr(tg), "--sequential", stages(row), "--out", str(out)]
    _cli(argv)
    return json.loads(out.with_suffix(".json").read_text())


def run(row: str, runs: Path = RUNS) -> dict:
    """Tunes the row (resumable), then runs its blocks while a comparison is open."""
    grid, cap = ROWS[row]
    tune_dir = runs / row / "tune"
    argv = ["tune", str(CONFIGS / f"{row}.yaml"), "--out", str(tune_dir), *grid]
    argv += ["--M", "20,30,50", "--statistic", STATISTIC, "--tune-seeds", "100,101"]
    argv += ["--no-progress", "--resume" if tune_dir.exists() else "--overwrite"]
    _cli(argv)
    tg = target(tune_dir)
    done: list[Path] = []
    result: dict = {}
    for first, end in (b for b in BLOCKS if b[1] <= cap):
        block = runs / row / f"seeds_{first}_{end}"
        if not (block / "done.json").exists():
            argv = ["run", str(tune_dir / "tuned.yaml"), "--no-progress"]
            argv += ["--set", f"seeds={end - first}", "--set", f"first_seed={first}"]
            _cli(argv + (["--resume", str(block)] if block.exists() else ["--out", str(block)]))
        done.append(block)
        if end < BLOCKS[1][1]:
            continue  # the look at 5 seeds decides nothing (its smallest p is 1/16)
        result = _compare(row, done, runs / row / "sequential", tg)
        if not any(c.get("open") for c in result["comparisons"].values()):
            break
    return result


def store(row: str, runs: Path = RUNS, docs: Path = DOCS) -> list[Path]:
    """The tuning's record and every finished block of ``row`` into ``docs``."""
    out = docs / row
    (out / "tune").mkdir(parents=True, exist_ok=True)
    for name in ("tune.json", "tuning.json", "tuned.yaml"):
        if (runs / row / "tune" / name).exists():
            shutil.copyfile(runs / row / "tune" / name, out / "tune" / name)
    kept = [out / "tune"]
    for block in sorted((runs / row).glob("seeds_*")):
        if (block / "done.json").exists():
            results_store.pack(block, out / "store" / block.name)
            kept.append(out / "store" / block.name)
    return kept


def analyze(row: str, docs: Path = DOCS) -> dict:
    """The registered comparison of ``row`` from its stored blocks."""
    out = docs / row
    names = sorted((out / "store").iterdir(), key=lambda p: int(p.name.split("_")[1]))
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for stored in names:
            results_store.restore(stored, Path(tmp) / stored.name)
            dirs.append(Path(tmp) / stored.name)
        result = _compare(row, dirs, out / "sequential", target(out / "tune"))
        for path in (out / "sequential.json", out / "sequential.md"):
            path.write_text(path.read_text().replace(tmp, f"docs/results/heavy/{row}/store"))
    return result


def family(results: dict[str, dict]) -> dict:
    """Holm at 10 % over each family's comparisons, on the rule's p (K x the smallest p of the
    decisive looks made)."""
    out = {}
    for name, rows in FAMILIES.items():
        if not all(r in results for r in rows):
            continue
        ps = {f"{r}/{b}": results[r]["comparisons"][b]["p"] for r in rows for b in BASELINES}
        out[name] = {"p": ps, "holm_p": verdicts.holm_adjusted(ps), "holm": verdicts.holm(ps)}
    return out
