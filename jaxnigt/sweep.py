"""``jaxnigt sweep``: one experiment per point of a grid over config keys, one result table.

Values that set array shapes (the number of workers n, M, the horizon, Malenia's capacity)
cannot be vmapped like the learning-rate grid, so a sweep is a sequence of programs: the
Cartesian product of ``--over KEY=V1,V2,...`` (any key ``--set`` accepts).  Each point is a
normal run directory ``DIR/<key=value,...>/``; programs of the same shape are compiled once
(jit cache within the process, the persistent XLA cache across processes).

``DIR/sweep.csv`` has one row per point and algorithm: the swept values, the point's status,
seeds, final and best median evaluation return, the times to the sweep's targets (50 % and
80 % of the improvement from the common initial return R0 to the best final median return
over the *whole* sweep, so that points compare), with the 20 %/80 % quantiles over seeds,
updates, environment steps, wall and compile seconds.  ``DIR/sweep.png`` draws time to
target against the swept value (see :func:`jaxnigt.plotting.plot_sweep`).

A sweep config is a normal config with a ``sweep:`` section listing the values::

    sweep:
      over: {cluster.n: [10, 30, 100, 300, 1000]}

A point that fails (a bad combination, a non-finite stop) is recorded as failed with its
message and the sweep goes on; ``--resume`` skips finished points and continues an
interrupted one from its checkpoints.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxnigt import config as config_lib
from jaxnigt import files, results

SWEEP_FILE = "sweep.json"  # the sweep's own record: axes, points, status
TABLE = "sweep.csv"
FRACTIONS = (0.5, 0.8)
STATUS = "status.json"


class SweepError(ValueError):
    """A bad ``--over`` key or value; the message names it."""


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of the grid: its values (key -> value) and resolved config."""

    values: dict[str, Any]
    config: config_lib.ExperimentConfig

    @property
    def name(self) -> str:
        return ",".join(f"{k}={_text(v)}" for k, v in self.values.items())


def _text(v: Any) -> str:
    return json.dumps(v) if isinstance(v, list | dict) else str(v)


def parse_over(texts: Sequence[str]) -> dict[str, list[Any]]:
    """``{key: [values]}`` from ``KEY=V1,V2,...`` (values are YAML, like ``--set``)."""
    import yaml

    axes: dict[str, list[Any]] = {}
    for text in texts:
        if "=" not in text:
            raise SweepError(f"--over: got {text!r}; expected KEY=V1,V2,... e.g. cluster.n=10,100")
        key, raw = text.split("=", 1)
        key = key.strip()
        if not key or key in axes:
            raise SweepError(f"--over: got {text!r}; expected a new dotted key")
        try:
            values = [yaml.safe_load(v) for v in raw.split(",")]
        except yaml.YAMLError:
            raise SweepError(f"--over {key}: values {raw!r} are not valid YAML") from None
        if not values or any(v is None for v in values):
            raise SweepError(f"--over {key}: got {raw!r}; expected comma-separated values")
        axes[key] = values
    return axes


def sweep_section(raw: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The ``sweep: {over: {key: [values]}}`` section of a raw config (empty if absent)."""
    section = raw.get("sweep") or {}
    if not isinstance(section, Mapping) or set(section) - {"over"}:
        raise SweepError("sweep: expected a mapping with one key 'over' (key -> list of values)")
    over = section.get("over") or {}
    if not isinstance(over, Mapping) or not all(isinstance(v, list) and v for v in over.values()):
        raise SweepError("sweep.over: expected a mapping of dotted keys to non-empty lists")
    return {str(k): list(v) for k, v in over.items()}


def plan(raw: Mapping[str, Any], axes: dict[str, list[Any]], sets: Sequence[str]) -> list[Point]:
    """Every point of the grid with its validated config (raises on a bad key or value)."""
    if not axes:
        raise SweepError("--over: nothing to sweep; give --over KEY=V1,V2 or a sweep: section")
    base = {k: v for k, v in raw.items() if k != "sweep"}
    points = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo, strict=True))
        overrides = [*sets, *(f"{k}={json.dumps(v)}" for k, v in values.items())]
        try:
            cfg = config_lib.from_dict(config_lib.apply_overrides(base, overrides))
        except config_lib.ConfigError as e:
            where = ", ".join(f"{k}={_text(v)}" for k, v in values.items())
            raise SweepError(f"--over {where}: {e}") from None
        points.append(Point(values, cfg))
    return points


def _finished(point: Point, run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run of this point with every algorithm done."""
    from jaxnigt import checkpoint

    path = run_dir / "config.yaml"
    if not path.is_file() or (run_dir / STATUS).is_file():
        return False
    done = set(checkpoint.done_algorithms(run_dir))
    same = config_lib.from_dict(config_lib.read_yaml(path)) == point.config
    return same and done >= set(point.config.algorithms)


def run_point(point: Point, run_dir: Path, *, resume: bool, progress: bool, log, stop=None) -> dict:
    """Runs one point (or continues it) and returns its status record."""
    from jaxnigt import runner

    if resume and _finished(point, run_dir):
        log(f"[sweep] {point.name}: finished earlier; kept")
        return {"status": "done"}
    again = resume and (run_dir / "config.yaml").is_file() and not (run_dir / STATUS).is_file()
    (run_dir / STATUS).unlink(missing_ok=True)  # a failed point is run again
    try:
        if again:
            files.check_resumable(point.config, run_dir)
        runner.run_experiment(
            point.config, run_dir, overwrite=True, resume=again, progress=progress, log=log,
            stop=stop,
        )  # fmt: skip
        status = {"status": "done"}
    except (runner.RunError, config_lib.ConfigError, ValueError, FloatingPointError) as e:
        status = {"status": "failed", "message": str(e)}
        log(f"[sweep] {point.name}: failed: {e}")
    if status["status"] == "failed":
        run_dir.mkdir(parents=True, exist_ok=True)
        files.atomic_write_text(run_dir / STATUS, json.dumps(status) + "\n")
    return status


def run_sweep(
    raw: Mapping[str, Any],
    axes: dict[str, list[Any]],
    out: Path,
    *,
    sets: Sequence[str] = (),
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    stop=None,
) -> list[dict]:
    """Runs every point into ``out/<point>/`` and writes ``sweep.csv`` and ``sweep.png``.

    ``stop`` (``runner.stop_on_signals``) ends the sweep after the current chunk of the
    current point (``runner.Interrupted``); ``resume`` continues it."""
    points = plan(raw, axes, sets)
    out = Path(out)
    if not resume:
        files.prepare_run_dir(out, overwrite)
    elif not (out / SWEEP_FILE).is_file():
        raise SweepError(f"--resume: {str(out)!r} is not a sweep directory (no {SWEEP_FILE})")
    record = {"axes": axes, "sets": list(sets), "points": [p.name for p in points]}
    if resume and json.loads((out / SWEEP_FILE).read_text()) != record:
        raise SweepError(f"--resume: {str(out)!r} holds a different sweep")
    files.atomic_write_text(out / SWEEP_FILE, json.dumps(record, indent=2) + "\n")
    for k, point in enumerate(points, 1):
        log(f"[sweep] point {k}/{len(points)}: {point.name}")
        run_point(point, out / point.name, resume=resume, progress=progress, log=log, stop=stop)
    rows = table(out, points)
    results.write_csv(out / TABLE, rows, columns=list(rows[0]) if rows else ["point"])
    from jaxnigt.plotting import plot_sweep

    plot_sweep(out)
    return rows


def _seed_curves(rows: list[dict], algorithm: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    mine = [r for r in rows if r["algorithm"] == algorithm and r["grid"] == 0]
    return results.group_curves(mine, x="sim_time", y="eval_return").get((algorithm, 0), {})


def table(out: Path, points: list[Point]) -> list[dict]:
    """The rows of ``sweep.csv`` (see the module docstring)."""
    loaded = {}
    for p in points:
        d = out / p.name
        if (d / "summary.json").is_file() and not (d / STATUS).is_file():
            loaded[p.name] = (results.read_metrics(d), json.loads((d / "summary.json").read_text()))
    curves = {
        (name, a): _seed_curves(rows, a)
        for name, (rows, summary) in loaded.items()
        for a in summary
        if "[grid=" not in a
    }
    initial = [float(y[0]) for cs in curves.values() for x, y in cs.values() if x[0] == 0.0]
    finals = [np.median([y[-1] for _, y in cs.values()]) for cs in curves.values() if cs]
    r0 = float(np.median(initial)) if initial else float("nan")
    best = float(np.max(finals)) if finals else float("nan")
    targets = {f: r0 + f * (best - r0) for f in FRACTIONS}
    rows = []
    for p in points:
        base = {"point": p.name, **{k: _text(v) for k, v in p.values.items()}}
        if p.name not in loaded:
            status = out / p.name / STATUS
            message = json.loads(status.read_text())["message"] if status.is_file() else "not run"
            rows.append({**base, "status": "failed", "message": message})
            continue
        metric_rows, summary = loaded[p.name]
        for algorithm, entry in summary.items():
            if "[grid=" in algorithm:
                continue
            cs = curves[p.name, algorithm]
            row = {**base, "status": "done", "message": "", "algorithm": algorithm}
            row |= _point_stats(metric_rows, algorithm, entry, cs, targets)
            rows.append(row)
    return rows


def _point_stats(metric_rows, algorithm, entry, cs, targets) -> dict:
    last = {}
    for r in metric_rows:
        if r["algorithm"] == algorithm and r["grid"] == 0:
            if r["seed"] not in last or r["round"] >= last[r["seed"]]["round"]:
                last[r["seed"]] = r
    # a round is one update; an asynchronous method updates every trajectories_per_update
    # arrivals (summary.json, from the algorithm), and every arrival is one exchange (comms)
    per_update = entry.get("trajectories_per_update")
    updates = [r["round"] if per_update is None else r["comms"] / per_update for r in last.values()]
    out = {
        "seeds": entry["seeds"],
        "final_median_return": entry["final_median_return"],
        "best_median_return": entry["best_median_return"],
        "updates": float(np.median(updates)),
        "env_steps": float(np.median([r["env_steps"] for r in last.values()])),
        "wall_seconds": entry.get("wall_seconds"),
        "compile_seconds": entry.get("compile_seconds"),
    }
    xs, med = results.median_curve(cs)
    for f, target in targets.items():
        per_seed = [results.time_to_target(x, y, target) for x, y in cs.values()]
        per_seed = np.array([np.inf if t is None else t for t in per_seed])
        out[f"time_to_{f:g}"] = results.time_to_target(xs, med, target)
        q20, q80 = np.quantile(per_seed, [0.2, 0.8], method="nearest")  # inf: never reached
        out[f"time_to_{f:g}_q20"], out[f"time_to_{f:g}_q80"] = float(q20), float(q80)
        out[f"target_{f:g}"] = target
    return out
