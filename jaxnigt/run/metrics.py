"""Results of a run: CSV rows and columns, reading them back, curves and the run's summary.

``metrics.csv`` has one row per algorithm, grid point, seed and step.  Its columns are the
identifying ones (:data:`ID_COLUMNS`), then the logged fields of
:class:`~jaxnigt.algorithms.core.StepMetrics` in order with ``eval_return`` after
``train_return`` (:data:`COLUMNS`), then ``eval_type{v}`` per environment type for
heterogeneous runs.  Everything here works on plain numpy arrays and dicts.  The summary's
time to a target is defined once, in :mod:`jaxnigt.run.curves`, below both the run and the
analysis (:mod:`jaxnigt.analysis.stats` names it among its statistics); the run imports nothing
of the analysis, whose comparisons and verdicts read the files written here.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxnigt.algorithms.core import LOGGED
from jaxnigt.run.curves import first_time, median_time
from jaxnigt.run.run_dir import atomic_write_text

__all__ = [
    "COLUMNS",
    "MetricsFileError",
    "group_curves",
    "median_curve",
    "read_metrics",
    "summarize",
    "time_to_target",
]

ID_COLUMNS = ("algorithm", "grid", "learning_rate", "eta", "seed")
COUNTS_FILE = "worker_counts.csv"
COUNT_COLUMNS = (*ID_COLUMNS, "round", "sim_time")  # then w0, w1, ... w{n-1}
MAX_COUNTED_WORKERS = 64  # runs with more workers keep only min/mean/max of the counts
_AFTER = LOGGED.index("train_return") + 1
COLUMNS = (*ID_COLUMNS, *LOGGED[:_AFTER], "eval_return", *LOGGED[_AFTER:])
PER_ROUND = COLUMNS[len(ID_COLUMNS) :]  # the columns with a value per step


def metric_rows(algorithm: str, m: dict[str, np.ndarray]) -> list[dict]:
    """Flattens a run's stacked metrics (``[B, R]`` arrays, ``[B]`` ids) into CSV rows.

    Inactive steps (no-ops after a seed crossed the budget) are dropped.
    """
    rows = []
    per_type = sorted(k for k in m if k.startswith("eval_type"))
    B, R = m["sim_time"].shape
    for b in range(B):
        ids = _ids(algorithm, m, b)
        for r in range(R):
            if m["active"][b, r]:
                rows.append({**ids, **{c: _scalar(m[c][b, r]) for c in (*PER_ROUND, *per_type)}})
    return rows


def worker_count_rows(algorithm: str, m: dict[str, np.ndarray]) -> list[dict]:
    """Rows of ``worker_counts.csv``: per seed and evaluation interval, the gradients each
    worker contributed to updates since the previous evaluation (``w0`` ... ``w{n-1}``), at
    the interval's last step.  Empty when the run kept no per-worker counts (n > 64)."""
    if "worker_counts" not in m:
        return []
    rows = []
    counts, evaluated, active = m["worker_counts"], m["evaluated"], m["active"]
    for b in range(counts.shape[0]):
        ends = np.nonzero(evaluated[b])[0]
        for start, end in itertools.pairwise(ends):
            steps = slice(start + 1, end + 1)
            total = counts[b, steps][active[b, steps]].sum(axis=0)
            row = _ids(algorithm, m, b) | {"round": int(m["round"][b, end])}
            row["sim_time"] = _scalar(m["sim_time"][b, end])
            rows.append(row | {f"w{i}": round(float(c)) for i, c in enumerate(total)})
    return rows


def _ids(algorithm: str, m: dict[str, np.ndarray], b: int) -> dict:
    return {
        "algorithm": algorithm,
        "grid": int(m["grid"][b]),
        "learning_rate": float(m["learning_rate"][b]),
        "eta": float(m["eta"][b]),
        "seed": int(m["seed"][b]),
    }


def _scalar(x):
    x = np.asarray(x).item()
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.6g}"
    return x


def csv_text(rows: Sequence[dict], columns: Sequence[str] = COLUMNS) -> str:
    """CSV text of ``rows``: ``columns`` first, then any other keys in order of appearance."""
    cols = list(columns)
    for row in rows:
        cols.extend(k for k in row if k not in cols)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, restval="")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str] = COLUMNS) -> None:
    """Writes ``rows`` atomically (see :func:`csv_text`)."""
    atomic_write_text(path, csv_text(rows, columns))


def read_metrics_raw(run_dir: str | Path, name: str = "metrics.csv") -> list[dict]:
    """Rows of ``run_dir/metrics.csv`` exactly as written (strings; [] if missing)."""
    path = Path(run_dir) / name
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


class MetricsFileError(ValueError):
    """A metrics file that cannot be read as a run writes it (cut short, garbage, a column
    missing); the message names the file and the row."""


def _required(name: str) -> tuple[str, ...]:
    """The columns every row of the file ``name`` of a run has."""
    if name == COUNTS_FILE:
        return COUNT_COLUMNS
    return (*ID_COLUMNS, "round", "sim_time", "eval_return")


def read_metrics(run_dir: str | Path, name: str = "metrics.csv") -> list[dict]:
    """Rows of ``run_dir/metrics.csv`` as dicts (numbers parsed, empty cells → NaN).

    Raises:
      FileNotFoundError: no such file.
      MetricsFileError: a column a run writes is missing, a row has more or fewer cells than
        the header (a file cut mid-row), or a cell is not a number (the file and the line).
    """
    path = Path(run_dir) / name
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} not found (is {str(run_dir)!r} a run directory?)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise MetricsFileError(f"{str(path)!r} cannot be read: {e}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in _required(name) if c not in (reader.fieldnames or [])]
    if missing:
        raise MetricsFileError(
            f"{str(path)!r} is not a metrics file a run wrote: no column {missing[0]!r} in its "
            f"header (line 1)"
        )
    rows = []
    for row in reader:
        where = f"{str(path)!r} line {reader.line_num}"
        if None in row or None in row.values():
            cells = sum(v is not None for k, v in row.items() if k is not None)
            cells += len(row.get(None, ()))
            raise MetricsFileError(
                f"{where}: {cells} cells, the header {len(reader.fieldnames)} columns (a file "
                "cut mid-row?)"
            )
        out = {}
        for k, v in row.items():
            try:
                if k == "algorithm":
                    out[k] = v
                elif k in ("grid", "seed", "round"):
                    out[k] = int(v)
                else:
                    out[k] = float(v) if v != "" else float("nan")
            except ValueError:
                raise MetricsFileError(f"{where}: column {k!r} is not a number: {v!r}") from None
        rows.append(out)
    return rows


Curves = dict[tuple[str, int], dict[int, tuple[np.ndarray, np.ndarray]]]


def group_curves(rows: Sequence[dict], *, x: str, y: str) -> Curves:
    """``{(algorithm, grid): {seed: (xs, ys)}}`` over rows where ``y`` is a number."""
    acc: dict = defaultdict(lambda: defaultdict(lambda: ([], [])))
    for r in rows:
        v = r.get(y, "")
        v = float(v) if v not in ("", None) else float("nan")
        if np.isnan(v):
            continue
        xs, ys = acc[(r["algorithm"], int(r["grid"]))][int(r["seed"])]
        xs.append(float(r[x]))
        ys.append(v)
    return {
        key: {s: (np.asarray(a), np.asarray(b)) for s, (a, b) in seeds.items()}
        for key, seeds in acc.items()
    }


def resample(xs: np.ndarray, ys: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Step-function value at each grid point: the last ``ys`` at or before it (NaN before)."""
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    idx = np.searchsorted(xs, grid, side="right") - 1
    return np.where(idx >= 0, ys[np.clip(idx, 0, None)], np.nan)


def seed_curves(seeds: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, ys)``: every seed's step curve resampled on the union of their x values,
    ``ys`` ``[seeds, len(xs)]``."""
    xs = np.unique(np.concatenate([x for x, _ in seeds.values()]))
    return xs, np.stack([resample(x, y, xs) for x, y in seeds.values()])


def median_curve(seeds: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, median over seeds)`` of the seeds' step curves (see :func:`seed_curves`)."""
    xs, ys = seed_curves(seeds)
    return xs, np.nanmedian(ys, axis=0)


def time_to_target(xs: np.ndarray, curve: np.ndarray, target: float) -> float | None:
    """One seed's time to target (:func:`jaxnigt.run.curves.first_time`) without a budget.

    Args:
      xs: the curve's x values (simulated times).
      curve: its values, one per x.
      target: the value to reach.

    Returns:
      The first ``x`` where ``curve >= target``; None if there is none.
    """
    t = first_time(xs, curve, target)
    return t if math.isfinite(t) else None


def time_reached(rows: Sequence[dict], name: str) -> float:
    """The simulated time every seed of summary entry ``name`` (``algorithm`` or
    ``algorithm[grid=g]``) has reached in ``rows``: the smallest of the seeds' latest."""
    algorithm, _, rest = name.partition("[grid=")
    grid = int(rest.rstrip("]")) if rest else 0
    latest: dict[Any, float] = {}
    for r in rows:
        if r["algorithm"] == algorithm and int(r["grid"]) == grid:
            key = int(r["seed"])
            latest[key] = max(latest.get(key, -math.inf), float(r["sim_time"]))
    return min(latest.values()) if latest else 0.0


def summarize(rows: Sequence[dict], target: float | None) -> dict[str, Any]:
    """Per algorithm and grid point: final/best median eval return, time to ``target``.

    The time to target is :func:`jaxnigt.run.curves.median_time` of the seeds' first
    evaluations at or above it (None when no majority of the seeds reached it).

    Args:
      rows: the run's metrics rows (:func:`read_metrics` or :func:`metric_rows`).
      target: the evaluation return to reach, or None for no time to target.

    Returns:
      ``{name: entry}`` with ``name`` the algorithm, or ``algorithm[grid=g]`` past grid
      point 0, and ``entry`` its seeds, final and best median returns, learning rate, eta,
      largest evaluation gap and, with a target, ``target_return`` and ``time_to_target``;
      where the rows have the total worker time (``worker_time``), also
      ``final_worker_time`` and, with a target, ``worker_time_to_target``
      (:func:`worker_time_entry`).
    """
    summary: dict[str, Any] = {}
    for (algorithm, grid), seeds in group_curves(rows, x="sim_time", y="eval_return").items():
        finals = [ys[-1] for _, ys in seeds.values() if len(ys)]
        _, med = median_curve(seeds)
        first = next(r for r in rows if r["algorithm"] == algorithm and int(r["grid"]) == grid)
        entry = {
            "seeds": len(seeds),
            "final_median_return": float(np.median(finals)) if finals else None,
            "best_median_return": float(np.max(med)) if med.size else None,
            "learning_rate": float(first["learning_rate"]),
            "eta": float(first["eta"]),
            # the most simulated time between two evaluations of one seed (eval.every_time)
            "largest_eval_gap": max(
                (float(np.max(np.diff(xs))) for xs, _ in seeds.values() if len(xs) > 1),
                default=None,
            ),
        }
        if target is not None:
            times = [first_time(x, y, target) for x, y in seeds.values()]
            t = float(median_time(np.array(times)))
            entry["target_return"] = target
            entry["time_to_target"] = t if math.isfinite(t) else None
        mine = [r for r in rows if r["algorithm"] == algorithm and int(r["grid"]) == grid]
        entry.update(worker_time_entry(mine, target))
        summary[algorithm if grid == 0 else f"{algorithm}[grid={grid}]"] = entry
    return summary


def worker_time_entry(rows: Sequence[dict], target: float | None) -> dict[str, Any]:
    """A summary entry's total worker time, from one method's rows: ``final_worker_time``,
    the median over its seeds of each one's total worker time at its last step, and with a
    target ``worker_time_to_target``, the upper median (:func:`jaxnigt.run.curves.
    median_time`) of the seeds' total worker times at their first evaluation at or above it
    (None when no majority reached it); nothing for rows without ``worker_time`` (a run
    written before it was recorded).

    Args:
      rows: one algorithm's and grid point's metrics rows (every seed).
      target: the evaluation return to reach, or None.

    Returns:
      The entry's fields.
    """
    last: dict[int, tuple[int, float]] = {}
    for r in rows:
        value = r.get("worker_time", "")
        if value in ("", None) or math.isnan(float(value)):
            return {}
        seed, step = int(r["seed"]), int(r["round"])
        if seed not in last or step >= last[seed][0]:
            last[seed] = (step, float(value))
    if not last:
        return {}
    out: dict[str, Any] = {"final_worker_time": float(np.median([w for _, w in last.values()]))}
    if target is not None:
        seeds = group_curves(rows, x="worker_time", y="eval_return").values()
        times = [first_time(w, y, target) for curves in seeds for w, y in curves.values()]
        t = float(median_time(np.array(times)))
        out["worker_time_to_target"] = t if math.isfinite(t) else None
    return out
