"""Sweeps (``jaxnigt sweep``): one experiment per point of a grid over config keys, one table.

The grid is the Cartesian product of its axes, dotted config keys with lists of values: the
config's ``sweep:`` section and, over it, the command line's ``--over KEY=V1,V2,...`` (any key
an override accepts; :func:`sweep_points`, which ``jaxnigt plan --over`` uses too).  A value
listed twice, or an axis that cannot change an algorithm's runs (two points would run them
alike: :func:`check_distinct_runs`), is refused before anything runs.  Each point is a normal
run directory ``DIR/<key=value,...>/`` (a value's ``/`` written ``%2F``: :attr:`Point.name`).
By default each algorithm's points run as few programs as their sizes allow: points that
differ only in n and the sizes a run carries as values (M, M_init, m-sync's m, Malenia's
capacity, the asynchronous block) and the traced step sizes share one vmapped program
padded to the largest of each (:mod:`jaxnigt.studies.sweep_programs`,
:mod:`jaxnigt.run.padded`; ``--max-padding`` caps n_max / n and M_max / M); any other
difference (γ, the horizon, a power trace, ...) is a program of its own, compiled once per
shape (jit cache within the process, the persistent XLA cache across processes).

``DIR/sweep.csv`` has one row per point and algorithm: the swept values, the point's status,
seeds, final and best median evaluation return, the times to the sweep's targets (50 % and
80 % of the improvement, by the target rule of :mod:`jaxnigt.analysis` pooled over every
algorithm of every point, so that points compare: R0 the median return at time 0, R_best the
best median second-half return), each the median time over seeds
(:func:`~jaxnigt.analysis.median_time`; empty when no majority reached it) with the 20 %/80 %
quantiles over seeds (``inf``: censored, not reached within the point's budget), the median
updates (:class:`~jaxnigt.analysis.Method`), environment steps, wall and compile seconds.
``DIR/sweep.png`` draws time to target against the swept value (see
:func:`jaxnigt.run.plots.plot_sweep`).

A sweep config is a normal config with a ``sweep:`` section listing the values::

    sweep:
      over: {cluster.n: [10, 30, 100, 300, 1000]}

A point that fails (a bad combination, a non-finite stop) is recorded as failed with its
message and the sweep goes on; a resumed sweep skips finished points and continues an
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

from jaxnigt import analysis
from jaxnigt import config as config_lib
from jaxnigt.analysis import stats
from jaxnigt.run import metrics
from jaxnigt.run.run_dir import (
    NotResumableError,
    atomic_write_text,
    check_resumable,
    prepare_run_dir,
)
from jaxnigt.studies.sweep_programs import STATUS, record_failure

SWEEP_FILE = "sweep.json"  # the sweep's own record: axes, points, status
TABLE = "sweep.csv"
FRACTIONS = analysis.FRACTIONS


class SweepError(ValueError):
    """A bad sweep: an axis key or value, or a point whose config is invalid; the message
    names it."""


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of the grid: its values (key -> value) and resolved config."""

    values: dict[str, Any]
    config: config_lib.ExperimentConfig

    @property
    def name(self) -> str:
        """Its directory's name, ``key=value,...``: a value's ``%``, ``/`` and ``\\`` are
        written ``%25``, ``%2F`` and ``%5C``, so a name is one path component and two
        points' names differ."""
        return ",".join(f"{k}={_escape(_text(v))}" for k, v in self.values.items())


def _text(v: Any) -> str:
    return json.dumps(v) if isinstance(v, list | dict) else str(v)


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("/", "%2F").replace("\\", "%5C")


def grid_axes(raw: Mapping[str, Any], axes: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
    """The axes of a sweep of the config ``raw``: its ``sweep:`` section
    (:func:`jaxnigt.config.loader.sweep_over`), then ``axes`` (the command line's) over it;
    raises :class:`SweepError` when there are none or an axis lists a value twice."""
    out = {**config_lib.sweep_over(raw), **axes}
    if not out:
        raise SweepError(
            "nothing to sweep: the config has no sweep: section and no axis (KEY=V1,V2,...) "
            "is given"
        )
    for key, values in out.items():
        config_lib.check_distinct(key, values)
    return out


def sweep_points(
    raw: Mapping[str, Any], axes: Mapping[str, list[Any]], sets: Sequence[str] = ()
) -> list[Point]:
    """Every point of the grid of :func:`grid_axes` (the config's ``sweep:`` section and
    ``axes``, dotted key -> values) over the config ``raw`` with the overrides ``sets``,
    each with its validated config.  ``jaxnigt sweep`` and ``jaxnigt plan`` both build their
    points here.  A relative ``trace:FILE`` that ``sets`` or ``axes`` gives is read from the
    working directory, as ``--set``'s is by ``jaxnigt run``, and the point's config records
    it absolute (its name keeps the value as given).

    Raises:
      SweepError: no axis, a bad key or value, or two points that would run one algorithm's
        runs alike (:func:`check_distinct_runs`).
      ConfigError: a value listed twice, or a malformed ``sweep:`` section.
    """
    axes = grid_axes(raw, axes)
    base = {k: v for k, v in raw.items() if k != "sweep"}
    points = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo, strict=True))
        overrides = [*sets, *(f"{k}={json.dumps(v)}" for k, v in values.items())]
        try:
            # a trace path the command line gives (--set, --over) is the working directory's,
            # recorded absolute (as jaxnigt run's --set; the file's are its folder's already)
            here = config_lib.trace_paths_in(
                config_lib.apply_overrides(base, overrides), Path.cwd()
            )
            cfg = config_lib.from_dict(here)
        except config_lib.ConfigError as e:
            where = ", ".join(f"{k}={_text(v)}" for k, v in values.items())
            raise SweepError(f"sweep point {where}: {e}") from None
        config_lib.warn(base, cfg, overrides)
        points.append(Point(values, cfg))
    check_distinct_runs(points, base)
    return points


def run_identity(config: config_lib.ExperimentConfig, algorithm: str) -> str:
    """What ``algorithm``'s runs of ``config`` depend on: the config but for its name, its
    other algorithms, the hyperparameters ``algorithm`` does not read and the cluster
    choices that do not change its runs (``Traits.cluster_options``)."""
    from jaxnigt.algorithms import traits
    from jaxnigt.cluster.model import CHOICES
    from jaxnigt.config.loader import readers

    raw = {k: v for k, v in config.to_dict().items() if k not in ("name", "per_algorithm")}
    raw["algorithms"] = [algorithm]
    own = traits(algorithm).cluster_options
    raw["cluster"] = {
        k: v for k, v in raw["cluster"].items() if k in own or k not in {c.name for c in CHOICES}
    }
    hp = config_lib.text.plain(dataclasses.asdict(config.hparams_for(algorithm)))
    raw["hparams"] = {k: v for k, v in hp.items() if algorithm in readers(k)}
    return json.dumps(raw, sort_keys=True, default=str)


def check_distinct_runs(points: Sequence[Point], base: Mapping[str, Any]) -> None:
    """Raises :class:`SweepError` when two points would run an algorithm's runs alike (a
    swept key it does not read, or that ``per_algorithm`` sets again for it): the sweep would
    run them twice; the message names the algorithm, the keys and the fix."""
    for algorithm in dict.fromkeys(a for p in points for a in p.config.algorithms):
        seen: dict[str, Point] = {}
        for p in points:
            if algorithm not in p.config.algorithms:
                continue
            twin = seen.setdefault(run_identity(p.config, algorithm), p)
            if twin is p:
                continue
            keys = [k for k in p.values if p.values[k] != twin.values[k]]
            per = (base.get("per_algorithm") or {}).get(algorithm) or {}
            pinned = [k for k in keys if k.startswith("hparams.") and k[8:] in per]
            if pinned:
                why = f"per_algorithm.{algorithm} sets {', '.join(k[8:] for k in pinned)}"
                fix = " or ".join(f"per_algorithm.{algorithm}.{k[8:]}" for k in pinned)
            else:
                why, fix = f"{algorithm}'s runs do not depend on it", "a key they depend on"
            raise SweepError(
                f"sweep: {', '.join(keys)} cannot change {algorithm}'s runs ({why}): points "
                f"{twin.name} and {p.name} would run them alike; sweep {fix}, or leave "
                f"{algorithm} out of algorithms"
            )


def _finished(point: Point, run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a finished run of this point (and no failure record)."""
    from jaxnigt.run import checkpoint

    return not (run_dir / STATUS).is_file() and checkpoint.finished(run_dir, point.config)


def run_point(point: Point, run_dir: Path, *, resume: bool, progress: bool, log, stop=None) -> dict:
    """Runs one point (or continues it) and returns its status record."""
    from jaxnigt.run import experiment
    from jaxnigt.run.loop import RunError

    if resume and _finished(point, run_dir):
        log(f"[sweep] {point.name}: finished earlier; kept")
        return {"status": "done"}
    again = resume and (run_dir / "config.yaml").is_file() and not (run_dir / STATUS).is_file()
    (run_dir / STATUS).unlink(missing_ok=True)  # a failed point is run again
    try:
        if again:
            check_resumable(point.config, run_dir)
        experiment.run_experiment(
            point.config, run_dir, resume=again, progress=progress, log=log, stop=stop
        )
        status = {"status": "done"}
    except (RunError, config_lib.ConfigError, ValueError, FloatingPointError) as e:
        status = {"status": "failed", "message": str(e)}
        log(f"[sweep] {point.name}: failed: {e}")
    if status["status"] == "failed":
        record_failure(run_dir, status["message"])
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
    jobs: int = 1,
    ray: str | None = None,
    gpus_per_program: float = 0.0,
    per_point: bool = False,
    max_padding: float | None = None,
) -> list[dict]:
    """Runs every point into ``out/<point>/`` and writes ``sweep.csv`` and ``sweep.png``.

    By default each algorithm's points run in as few programs as their sizes allow (points
    that differ only in n and the run sizes share one program padded to the largest, each
    within ``max_padding`` of it: :mod:`jaxnigt.studies.sweep_programs`).  ``per_point``
    runs each point by itself, one after another; ``jobs`` > 1 runs that many points at once
    in local processes, ``ray`` as tasks of a Ray cluster (``gpus_per_program`` GPUs each;
    :mod:`jaxnigt.run.executors`); the files do not depend on where the points ran.

    A fresh sweep refuses an ``out`` that holds files unless ``overwrite``.  ``stop`` ends the
    sweep after the current chunk (:class:`~jaxnigt.run.signals.Interrupted`); ``resume`` too.

    Raises:
      SweepError: a bad axis or point; NotResumableError: ``resume`` and ``out`` holds no
        sweep of these points; RunDirError: ``out`` cannot be used; MissingRay: ``ray``
        without the ``ray`` extra (all before anything is written).
    """
    from jaxnigt.run import executors

    axes = grid_axes(raw, axes)
    points, out = sweep_points(raw, axes, sets), Path(out)
    executors.check(ray)  # before the directory or its record is written
    record = {"axes": axes, "sets": list(sets), "points": [p.name for p in points]}
    _open(out, record, resume=resume, overwrite=overwrite)
    if jobs > 1 or ray is not None:
        again = resume or ray is not None
        _run_points(
            points, out, resume=again, log=log, stop=stop, jobs=jobs, ray=ray, gpus=gpus_per_program
        )
    elif per_point:
        for k, point in enumerate(points, 1):
            log(f"[sweep] point {k}/{len(points)}: {point.name}")
            run_point(point, out / point.name, resume=resume, progress=progress, log=log, stop=stop)
    else:
        from jaxnigt.studies import sweep_programs

        sweep_programs.run_grouped(
            points, out, resume=resume, progress=progress, log=log, stop=stop, cap=max_padding
        )
    rows = table(out, points, log=log)
    metrics.write_csv(out / TABLE, rows, columns=list(rows[0]) if rows else ["point"])
    _plot(out, points, axes, rows)
    return rows


def _open(out: Path, record: dict, *, resume: bool, overwrite: bool) -> None:
    """Prepares ``out`` for a fresh sweep (or checks that it holds this one, to resume) and
    records the sweep there."""
    if not resume:
        prepare_run_dir(out, overwrite)
    elif not (out / SWEEP_FILE).is_file():
        raise NotResumableError(out, f"{str(out)!r} is not a sweep directory (no {SWEEP_FILE})")
    if resume and json.loads((out / SWEEP_FILE).read_text()) != record:
        raise NotResumableError(out, f"{str(out)!r} holds a different sweep")
    atomic_write_text(out / SWEEP_FILE, json.dumps(record, indent=2) + "\n")


def _plot(out: Path, points: list[Point], axes: dict[str, list[Any]], rows: list[dict]) -> None:
    """``sweep.png`` from the rows of ``sweep.csv`` just written and the points' configs."""
    from jaxnigt.run.plots import plot_sweep_rows, round_time

    configs = {p.name: p.config for p in points}
    times = lambda name: round_time(configs[name])
    plot_sweep_rows(rows, axes, out.name, times, out=out / "sweep.png")


def _point_job(point: Point, run_dir: str, resume: bool, *, stop=None) -> dict:
    """One point as a job of an executor (its lines prefixed by the point's name). A Ray
    task resumes: a retried attempt continues from the point's checkpoints."""

    def log(line: str) -> None:
        print(f"[{point.name}] {line}", flush=True)

    return run_point(point, Path(run_dir), resume=resume, progress=False, log=log, stop=stop)


def _run_points(points, out: Path, *, resume, log, stop, jobs, ray, gpus) -> None:
    """Every point on an executor, reporting each as it finishes (done/total)."""
    from jaxnigt.run import executors

    where = f"Ray ({ray})" if ray is not None else f"{jobs} processes"
    log(f"[sweep] {len(points)} points on {where}")
    with executors.make(
        _point_job, jobs=jobs, ray=ray, gpus_per_program=gpus, stop=stop, run_dir_arg=1
    ) as pool:
        for point in points:
            pool.submit((point, str(out / point.name), resume), point.name)
        finished = 0
        while pool.busy:
            for i in pool.wait():
                finished += 1
                log(f"[sweep] {finished}/{len(points)} done: {points[i].name}")


def table(out: Path, points: list[Point], log: Callable[[str], None] | None = None) -> list[dict]:
    """The rows of ``sweep.csv`` (see the module docstring); ``log`` is told why the time
    columns are empty when no point improved on its start."""
    runs, messages = {}, {}
    for p in points:
        d = out / p.name
        if (d / STATUS).is_file():
            messages[p.name] = json.loads((d / STATUS).read_text())["message"]
            continue
        try:
            runs[p.name] = (analysis.load_run(d), json.loads((d / "summary.json").read_text()))
        except analysis.AnalysisError as e:
            messages[p.name] = str(e)
    methods = [m for run, _ in runs.values() for m in run.algorithms().values()]
    initial = np.concatenate([m.initial() for m in methods]) if methods else np.array([np.nan])
    levels = [
        float(np.median(m.statistic("second_half", run.budget)))
        for run, _ in runs.values()
        for m in run.algorithms().values()
    ]
    targets = analysis.targets(initial, levels, FRACTIONS) if levels else {}
    why = stats.no_target_reason(float(np.nanmedian(initial)), max(levels)) if levels else None
    if why is not None and log is not None:
        log(f"[sweep] warning: {why}: the time columns of {TABLE} are empty")
    rows = []
    for p in points:
        base = {"point": p.name, **{k: _text(v) for k, v in p.values.items()}}
        if p.name not in runs:
            rows.append({**base, "status": "failed", "message": messages[p.name]})
            continue
        run, summary = runs[p.name]
        for algorithm, m in run.algorithms().items():
            row = {**base, "status": "done", "message": "", "algorithm": algorithm}
            rows.append(row | _point_stats(m, summary[algorithm], run.budget, targets))
    return rows


def _point_stats(m: analysis.Method, entry: dict, budget: float, targets: dict) -> dict:
    out = {
        "seeds": entry["seeds"],
        "final_median_return": entry["final_median_return"],
        "best_median_return": entry["best_median_return"],
        "updates": float(np.median(m.updates)),
        "env_steps": float(np.median(m.env_steps)),
        "wall_seconds": entry.get("wall_seconds"),
        "compile_seconds": entry.get("compile_seconds"),
    }
    for f, target in targets.items():
        per_seed = m.statistic("time", budget, target)  # inf: censored at the budget
        median = float(analysis.median_time(per_seed))
        out[f"time_to_{f:g}"] = median if np.isfinite(median) else None
        q20, q80 = np.quantile(per_seed, [0.2, 0.8], method="nearest")
        out[f"time_to_{f:g}_q20"], out[f"time_to_{f:g}_q80"] = float(q20), float(q80)
        out[f"target_{f:g}"] = target
    return out
