"""A finished run directory read into numpy: its methods' curves and per-seed counts.

:func:`load_run` reads ``config.yaml``, ``summary.json`` and ``metrics.csv`` into a
:class:`Run` of :class:`Method` records (one per algorithm and grid point) whose
:meth:`Method.statistic` gives the per-seed statistics of :mod:`jaxnigt.analysis.stats`.  The only
module of the analysis that reads files; ``jaxnigt compare``, ``jaxnigt tune`` and
``jaxnigt sweep``'s table start from it.

A seed's *updates*: its trajectories that entered updates (the sum of ``grads``) over
``trajectories_per_update`` for the methods whose ``summary.json`` entry has it (the
per-arrival methods update every that many trajectories; NaN where no fixed share is,
Ringleader's cycles), the step count at its last step otherwise (a round is one update).
A seed is *diverged* when ``summary.json`` marks it (``on_nonfinite: mark``) or it stopped
before the budget (and the step cap).  A seed's total
worker time (``metrics.csv``'s ``worker_time``; absent in runs written before it) is read at
each of its evaluations and at its last step.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxnigt.analysis.stats import Curve, average_return, first_time, second_half


class AnalysisError(ValueError):
    """A run directory cannot be analysed as asked.  ``param``, when set, names the parameter
    at fault (``statistic``, ``reference``, ``baselines`` of :func:`jaxnigt.analysis.compare`)
    and the message is ``param: reason``; else the message names the directory."""

    def __init__(self, reason: str, *, param: str | None = None):
        super().__init__(f"{param}: {reason}" if param else reason)
        self.param, self.reason = param, reason


class UnfinishedRunError(AnalysisError):
    """The run in ``path`` has not finished: resuming it finishes it."""

    def __init__(self, reason: str, *, path: Path | None = None):
        super().__init__(reason)
        self.path = path


@dataclasses.dataclass(frozen=True)
class Method:
    """One algorithm at one grid point of a run: its seeds' curves and per-seed counts.

    Attributes:
      name: its ``summary.json`` key (``algorithm``, or ``algorithm[grid=g]``).
      algorithm, grid, learning_rate, eta: what ran.
      seeds: the seed indices, in order; every per-seed array below follows it.
      curves: per seed, its evaluations ``(sim_time, eval_return)``.
      per_type: ``eval_type{v}`` -> per-seed curves (heterogeneous runs).
      updates, env_steps, end_time: ``[seeds]`` at each seed's last step.
      diverged: seeds marked diverged (``on_nonfinite: mark``) or that stopped before the
        budget.
      worker_times: per seed, its total worker time at each evaluation of its curve; None
        when the run did not record it (a run written before the ``worker_time`` column).
      final_worker_time: ``[seeds]`` the total worker time at each seed's last step (None
        likewise).
    """

    name: str
    algorithm: str
    grid: int
    learning_rate: float
    eta: float
    seeds: tuple[int, ...]
    curves: tuple[Curve, ...]
    per_type: dict[str, tuple[Curve, ...]]
    updates: np.ndarray
    env_steps: np.ndarray
    end_time: np.ndarray
    diverged: tuple[int, ...]
    worker_times: tuple[np.ndarray, ...] | None = None
    final_worker_time: np.ndarray | None = None

    def statistic(self, name: str, budget: float, target: float | None = None) -> np.ndarray:
        """``[seeds]`` per-seed values of ``average``, ``second_half``, ``time`` (to
        ``target``) or ``worker_time`` (the total worker time at that same first evaluation
        at or above ``target`` within the budget; ``inf``: censored).

        Raises:
          AnalysisError: ``worker_time`` of a run that did not record it.
        """
        if name == "time":
            return np.array([first_time(x, y, target, budget) for x, y in self.curves])
        if name == "worker_time":
            within = [np.where(np.asarray(x) <= budget, y, np.nan) for x, y in self.curves]
            worker = self._worker_times()
            return np.array([first_time(w, y, target) for w, y in zip(worker, within, strict=True)])
        per_seed = {"average": average_return, "second_half": second_half}[name]
        return np.array([per_seed(x, y, budget) for x, y in self.curves])

    def censoring(self, name: str, budget: float) -> np.ndarray:
        """Where each seed's ``time`` or ``worker_time`` (:meth:`statistic`) is censored when
        it never reaches the target: the budget, or the seed's final total worker time.

        Args:
          name: ``time`` or ``worker_time``.
          budget: the run's budget.

        Returns:
          ``[seeds]``.
        """
        if name == "worker_time":
            self._worker_times()
            return np.asarray(self.final_worker_time, np.float64)
        return np.full(len(self.seeds), float(budget))

    def _worker_times(self) -> tuple[np.ndarray, ...]:
        if self.worker_times is None:
            raise AnalysisError(
                f"{self.name}: its metrics.csv has no worker_time column (a run written before "
                "it was recorded): run it again for a worker-time statistic",
                param="statistic",
            )
        return self.worker_times

    def initial(self) -> np.ndarray:
        """``[seeds]`` return at time 0 (NaN for a seed without an evaluation there)."""
        return np.array([y[0] if x.size and x[0] == 0.0 else np.nan for x, y in self.curves])

    def identical_to(self, other: Method) -> bool:
        """Whether both have the same seeds with the same evaluation curves."""
        return self.seeds == other.seeds and all(
            np.array_equal(x1, x2) and np.array_equal(y1, y2)
            for (x1, y1), (x2, y2) in zip(self.curves, other.curves, strict=True)
        )


@dataclasses.dataclass(frozen=True)
class Run:
    """A run directory's methods (:class:`Method` by ``summary.json`` key) and budget;
    ``trace_sha256``: what its power trace file held when it began (``trace.sha256``; None
    without a trace file or a record)."""

    path: Path
    config: Any
    budget: float
    methods: dict[str, Method]
    trace_sha256: str | None = None

    def algorithms(self) -> dict[str, Method]:
        """Grid point 0 of every algorithm, by name, in the run's order."""
        return {m.algorithm: m for m in self.methods.values() if m.grid == 0}


def load_run(run_dir: str | Path) -> Run:
    """Reads a finished run directory (config.yaml, summary.json, metrics.csv) into a
    :class:`Run`.

    Args:
      run_dir: the directory ``jaxnigt run`` wrote.

    Returns:
      The :class:`Run`: its budget and, per method, the seeds' curves and counts.

    Raises:
      AnalysisError: not a run directory, one another process is writing, one whose
        summary.json or metrics.csv cannot be read (naming the file and row), or without a
        simulated-time budget; UnfinishedRunError (an AnalysisError): not finished.
    """
    from jaxnigt import config as config_lib
    from jaxnigt.run import checkpoint, metrics
    from jaxnigt.run import run_dir as run_dir_lib

    run_dir = Path(run_dir)
    for name in ("config.yaml", "summary.json", "metrics.csv"):
        if not (run_dir / name).is_file():
            raise AnalysisError(f"{str(run_dir)!r} is not a run directory (no {name})")
    try:  # a run still being written: not "unfinished, resume it"
        run_dir_lib.check_not_in_use(run_dir)
    except run_dir_lib.InUseError as e:
        raise AnalysisError(str(e)) from None
    try:
        cfg = config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml"))
    except config_lib.ConfigError as e:
        raise AnalysisError(f"{str(run_dir)!r}: {e}") from None
    if not checkpoint.finished(run_dir):
        missing = set(cfg.algorithms) - set(checkpoint.done_algorithms(run_dir))
        raise UnfinishedRunError(
            f"{str(run_dir)!r} is not finished ({', '.join(sorted(missing))} not done); "
            "resume its run to finish it",
            path=run_dir,
        )
    if cfg.budget is None:
        raise AnalysisError(f"{str(run_dir)!r}: the run has no simulated-time budget")
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        rows = metrics.read_metrics(run_dir)
    except metrics.MetricsFileError as e:
        raise AnalysisError(str(e)) from None
    except (OSError, ValueError) as e:  # summary.json: unreadable, or not JSON
        raise AnalysisError(f"{str(run_dir / 'summary.json')!r} cannot be read: {e}") from None
    if not isinstance(summary, dict):
        raise AnalysisError(f"{str(run_dir / 'summary.json')!r} is not a run's summary")
    curves = metrics.group_curves(rows, x="sim_time", y="eval_return")
    types = sorted(k for k in (rows[0] if rows else {}) if k.startswith("eval_type"))
    per_type = {t: metrics.group_curves(rows, x="sim_time", y=t) for t in types}
    # the total worker time at each evaluation (rows without an evaluation left out)
    evaluated = [r for r in rows if not np.isnan(r["eval_return"])]
    worker = metrics.group_curves(evaluated, x="sim_time", y="worker_time")
    methods = {}
    for (algorithm, grid), seeds in curves.items():
        name = algorithm if grid == 0 else f"{algorithm}[grid={grid}]"
        mine = [r for r in rows if r["algorithm"] == algorithm and r["grid"] == grid]
        workers = worker.get((algorithm, grid), {})
        methods[name] = _method(name, algorithm, grid, mine, seeds, per_type, summary, cfg, workers)
    return Run(run_dir, cfg, float(cfg.budget), methods, run_dir_lib.recorded_trace(run_dir))


def _worker_times(worker: dict, seeds: dict, order: list, last: dict) -> dict[str, Any]:
    """:class:`Method`'s ``worker_times`` and ``final_worker_time`` (None where a seed's
    evaluations or its last step have no total worker time: a run that did not record it).
    ``worker``: per seed, ``(times, worker times)`` at its evaluations; ``last``: per seed,
    its last row."""
    final = np.array([last[s].get("worker_time", np.nan) for s in order], np.float64)
    recorded = all(len(worker.get(s, ((),))[0]) == len(seeds[s][0]) for s in order)
    if np.isnan(final).any() or not recorded:
        return {"worker_times": None, "final_worker_time": None}
    return {"worker_times": tuple(worker[s][1] for s in order), "final_worker_time": final}


def _method(name, algorithm, grid, rows, seeds, per_type, summary, cfg, worker) -> Method:
    order = sorted(seeds)
    last = {}
    for r in rows:
        if r["seed"] not in last or r["round"] >= last[r["seed"]]["round"]:
            last[r["seed"]] = r
    entry = summary.get(name, {})
    # an algorithm's fact: summary.json records it on its grid point 0 entry
    per_update = summary.get(algorithm, {}).get("trajectories_per_update")
    used = {s: 0.0 for s in order}
    for r in rows:
        if np.isfinite(r["grads"]):
            used[r["seed"]] += r["grads"]
    # 0: no fixed share of the trajectories is an update (Ringleader's cycles): not known here
    updates = [
        last[s]["round"] if per_update is None else used[s] / per_update if per_update else np.nan
        for s in order
    ]
    end = np.array([last[s]["sim_time"] for s in order])
    # a seed that stopped before the budget (and the step cap) did not finish: diverged
    capped = np.array(
        [cfg.max_rounds is not None and last[s]["round"] >= cfg.max_rounds for s in order]
    )
    stopped = {s for s, t, c in zip(order, end, capped, strict=True) if t < cfg.budget and not c}
    return Method(
        name=name,
        algorithm=algorithm,
        grid=grid,
        learning_rate=float(rows[0]["learning_rate"]),
        eta=float(rows[0]["eta"]),
        seeds=tuple(order),
        curves=tuple(seeds[s] for s in order),
        per_type={t: tuple(c[(algorithm, grid)][s] for s in order) for t, c in per_type.items()},
        updates=np.array(updates, np.float64),
        env_steps=np.array([last[s]["env_steps"] for s in order], np.float64),
        end_time=end,
        diverged=tuple(sorted(stopped | set(entry.get("diverged_seeds", ())))),
        **_worker_times(worker, seeds, order, last),
    )


def _merged_worker_times(parts: list[Method], order: np.ndarray) -> dict[str, Any]:
    """:func:`merge_runs`' worker times of one method's blocks (None unless every block has
    them)."""
    if any(p.worker_times is None for p in parts):
        return {"worker_times": None, "final_worker_time": None}
    times = [w for p in parts for w in p.worker_times]
    final = np.concatenate([p.final_worker_time for p in parts])[order]
    return {"worker_times": tuple(times[i] for i in order), "final_worker_time": final}


#: Config fields in which seed blocks of one config may differ: the seed fields, and what
#: only says how a run was carried out and written (its name, checkpoints, live writes,
#: TensorBoard), never what it computes.
BLOCK_FIELDS = (
    "seeds",
    "seed",
    "first_seed",
    "name",
    "checkpoint_every",
    "live_every_s",
    "plot_every_s",
    "tensorboard",
)


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_seed_blocks(runs: list[Run]) -> None:
    """Raises :class:`AnalysisError` unless the runs are seed blocks of one config: their
    configs differ in nothing but :data:`BLOCK_FIELDS` (the message names the run and the
    dotted keys in which it differs from the first), and their power trace file held the
    same contents (:attr:`Run.trace_sha256`, where both record it)."""
    first = _flat(runs[0].config.to_dict())
    for run in runs[1:]:
        other = _flat(run.config.to_dict())
        differs = sorted(
            k
            for k in first.keys() | other.keys()
            if k.split(".")[0] not in BLOCK_FIELDS and first.get(k) != other.get(k)
        )
        if differs:
            raise AnalysisError(
                f"{str(run.path)!r} and {str(runs[0].path)!r} are not seed blocks of one "
                f"config: they differ in {', '.join(differs)} (blocks may differ only in "
                f"{', '.join(BLOCK_FIELDS[:3])} and how they were written)"
            )
        mine, theirs = runs[0].trace_sha256, run.trace_sha256
        if mine is not None and theirs is not None and mine != theirs:
            raise AnalysisError(
                f"{str(run.path)!r} and {str(runs[0].path)!r} are not seed blocks of one "
                f"config: they ran on different contents of the power trace "
                f"{runs[0].config.cluster.power.removeprefix('trace:')!r} (sha256 {mine[:16]} "
                f"and {theirs[:16]}, as their trace.sha256 records)"
            )


def first_seeds(method: Method, k: int) -> Method:
    """``method`` restricted to its first ``k`` seeds (in seed order)."""
    if k > len(method.seeds):
        raise AnalysisError(f"{method.name} has {len(method.seeds)} seeds; a look needs {k}")
    pick = lambda xs: tuple(xs[:k])
    return dataclasses.replace(
        method,
        seeds=pick(method.seeds),
        curves=pick(method.curves),
        per_type={t: pick(c) for t, c in method.per_type.items()},
        updates=method.updates[:k],
        env_steps=method.env_steps[:k],
        end_time=method.end_time[:k],
        diverged=tuple(s for s in method.diverged if s in method.seeds[:k]),
        worker_times=None if method.worker_times is None else pick(method.worker_times),
        final_worker_time=None if method.worker_times is None else method.final_worker_time[:k],
    )


def merge_runs(runs: Sequence[Run]) -> Run:
    """Runs of one config over disjoint seed blocks (``first_seed``) as one run: each method's
    seeds in order.  Raises AnalysisError when the blocks' methods or budgets differ, or a
    seed is in two blocks."""
    first = runs[0]
    if any(r.budget != first.budget or set(r.methods) != set(first.methods) for r in runs):
        raise AnalysisError("the runs to merge differ in budget or methods")
    methods = {}
    for name, m in first.methods.items():
        parts = [r.methods[name] for r in runs]
        seeds = [s for p in parts for s in p.seeds]
        if len(set(seeds)) != len(seeds):
            raise AnalysisError(f"{name}: a seed is in two of the runs to merge")
        order = np.argsort(seeds, kind="stable")
        cat = lambda f: tuple(np.asarray([x for p in parts for x in f(p)], object)[order])
        arr = lambda f: np.concatenate([f(p) for p in parts])[order]
        methods[name] = dataclasses.replace(
            m,
            seeds=tuple(int(s) for s in np.asarray(seeds)[order]),
            curves=cat(lambda p: p.curves),
            per_type={t: cat(lambda p, t=t: p.per_type[t]) for t in m.per_type},
            updates=arr(lambda p: p.updates),
            env_steps=arr(lambda p: p.env_steps),
            end_time=arr(lambda p: p.end_time),
            diverged=tuple(sorted(s for p in parts for s in p.diverged)),
            **_merged_worker_times(parts, order),
        )
    return dataclasses.replace(first, methods=methods)
