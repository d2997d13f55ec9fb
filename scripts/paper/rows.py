"""Rows registered before any run, each a config decided by the fifth edition's rule: the
machinery of :mod:`paper.heavy` and :mod:`paper.hetero` (their docstrings: the commands).

A :class:`Rows` is one results page's rows: configs of ``scripts/paper/configs``, one
reference method against its baselines by one statistic.  :func:`run` is the library's
commands, as registered: ``jaxnigt tune`` on seeds 100 and 101 (a time statistic's target is
fixed there), then ``jaxnigt run`` of the tuned config on the seed blocks :data:`BLOCKS`
while a comparison is still open under the rule (``jaxnigt compare --sequential``), up to the
row's cap.  :func:`store` keeps the tuning's record and packs each finished block
(:mod:`jaxnigt.studies.store`); :func:`analyze` restores them (on a fresh clone too) and runs
the registered comparison; :func:`family` is Holm over each family's comparisons.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from pathlib import Path

from jaxnigt.analysis import stats, verdicts
from jaxnigt.run import checkpoint
from jaxnigt.studies import store as results_store

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "scripts" / "paper" / "configs"
BLOCKS = ((0, 5), (5, 10), (10, 20), (20, 40))


@dataclasses.dataclass(frozen=True)
class Rows:
    """One page's registered rows.

    Attributes:
      name: ``docs/results/<name>/`` (the store) and ``runs/results/<name>/`` (the runs).
      reference, baselines, statistic: the comparison (``jaxnigt compare``'s).
      rows: row (a config's name) -> (the tuning's grid flags, the seed cap).
      families: Holm at 10 % over each family's comparisons (row x baseline).
      beside: statistics reported beside the verdict, not decided on (``jaxnigt compare`` on
        every stored seed, at the tuning's target where it fixed one).
      root: the checkout the store and the runs are under.
    """

    name: str
    reference: str
    baselines: tuple[str, ...]
    statistic: str
    rows: dict[str, tuple[tuple[str, ...], int]]
    families: dict[str, tuple[str, ...]]
    beside: tuple[str, ...] = ()
    root: Path = ROOT

    @property
    def docs(self) -> Path:
        """The page's store, ``docs/results/<name>/``."""
        return self.root / "docs" / "results" / self.name

    @property
    def runs(self) -> Path:
        """The runs, ``runs/results/<name>/`` (not in the repository)."""
        return self.root / "runs" / "results" / self.name


def _cli(argv: list[str]) -> None:
    from jaxnigt import cli

    if cli.main(argv) != 0:
        raise SystemExit(f"paper: jaxnigt {' '.join(argv)} failed")


def target(tune_dir: Path) -> float | None:
    """A time statistic's target the tuning fixed on its initial grid (seeds 100, 101)."""
    found = json.loads((tune_dir / "tuning.json").read_text()).get("target")
    return None if found is None else float(found["value"])


def stages(spec: Rows, row: str) -> str:
    """The rule's looks up to the row's cap."""
    return ",".join(str(b[1]) for b in BLOCKS if b[1] <= spec.rows[row][1])


def _compare(spec: Rows, row: str, block_dirs: list[Path], out: Path, tune_dir: Path) -> dict:
    argv = ["compare", *map(str, block_dirs), "--reference", spec.reference]
    argv += ["--baselines", ",".join(spec.baselines), "--statistic", spec.statistic]
    argv += ["--claim", "ahead", "--sequential", stages(spec, row), "--out", str(out)]
    if spec.statistic in stats.TIME_STATISTICS:
        argv += ["--target", repr(target(tune_dir))]
    _cli(argv)
    return json.loads(out.with_suffix(".json").read_text())


def run(spec: Rows, row: str) -> dict:
    """Tunes the row (resumable), then runs its blocks while a comparison is open."""
    grid, cap = spec.rows[row]
    tune_dir = spec.runs / row / "tune"
    argv = ["tune", str(CONFIGS / f"{row}.yaml"), "--out", str(tune_dir), *grid]
    argv += ["--statistic", spec.statistic, "--tune-seeds", "100,101", "--no-progress"]
    _cli([*argv, "--resume" if tune_dir.exists() else "--overwrite"])
    done: list[Path] = []
    result: dict = {}
    for first, end in (b for b in BLOCKS if b[1] <= cap):
        block = spec.runs / row / f"seeds_{first}_{end}"
        if not checkpoint.finished(block):
            argv = ["run", str(tune_dir / "tuned.yaml"), "--no-progress"]
            argv += ["--set", f"seeds={end - first}", "--set", f"first_seed={first}"]
            _cli(argv + (["--resume", str(block)] if block.exists() else ["--out", str(block)]))
        done.append(block)
        if end < BLOCKS[1][1]:
            continue  # the look at 5 seeds decides nothing (its smallest p is 1/16)
        result = _compare(spec, row, done, spec.runs / row / "sequential", tune_dir)
        if not any(c.get("open") for c in result["comparisons"].values()):
            break
    return result


def store(spec: Rows, row: str) -> list[Path]:
    """The tuning's record and every finished block of ``row`` into the page's store."""
    runs, out = spec.runs / row, spec.docs / row
    (out / "tune").mkdir(parents=True, exist_ok=True)
    for name in ("tune.json", "tuning.json", "tuned.yaml"):
        if (runs / "tune" / name).exists():  # the checkout's own paths, relative
            text = (runs / "tune" / name).read_text()
            text = re.sub(r"/[^\s\"']*?/(runs/results/|scripts/paper/configs/)", r"\1", text)
            (out / "tune" / name).write_text(text)
    kept = [out / "tune"]
    for block in sorted(runs.glob("seeds_*")):
        if checkpoint.finished(block):
            results_store.pack(block, out / "store" / block.name)
            kept.append(out / "store" / block.name)
    return kept


def analyze(spec: Rows, row: str) -> dict:
    """The registered comparison of ``row`` from its stored blocks, and ``beside``: each of
    :attr:`Rows.beside`'s comparisons (``beside_<statistic>.json``)."""
    out = spec.docs / row
    names = sorted((out / "store").iterdir(), key=lambda p: int(p.name.split("_")[1]))
    written = [out / "sequential.json", out / "sequential.md"]
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for stored in names:
            results_store.restore(stored, Path(tmp) / stored.name)
            dirs.append(Path(tmp) / stored.name)
        result = _compare(spec, row, dirs, out / "sequential", out / "tune")
        result["beside"] = {}
        fixed = target(out / "tune")
        for statistic in spec.beside:
            argv = ["compare", *map(str, dirs), "--reference", spec.reference, "--baselines"]
            argv += [",".join(spec.baselines), "--statistic", statistic]
            argv += ["--out", str(out / f"beside_{statistic}")]
            _cli(argv + (["--target", repr(fixed)] if fixed is not None else []))
            found = json.loads((out / f"beside_{statistic}.json").read_text())
            result["beside"][statistic] = found
            written += [out / f"beside_{statistic}.json", out / f"beside_{statistic}.md"]
        for path in written:
            text = path.read_text().replace(tmp, f"docs/results/{spec.name}/{row}/store")
            path.write_text(text)
    return result


def family(spec: Rows, results: dict[str, dict]) -> dict:
    """Holm at 10 % over each family's comparisons, on the rule's p (K x the smallest p of the
    decisive looks made); a family with a row not analyzed is left out."""
    out = {}
    for name, rows in spec.families.items():
        if not all(r in results for r in rows):
            continue
        ps = {f"{r}/{b}": results[r]["comparisons"][b]["p"] for r in rows for b in spec.baselines}
        out[name] = {"p": ps, "holm_p": verdicts.holm_adjusted(ps), "holm": verdicts.holm(ps)}
    return out
