"""``jaxnigt tune``: step sizes (and shape hyperparameters) chosen on seeds that no reported
run uses.

Protocol (docs/results.md), per algorithm:

* **Seeds.** The tuning programs run ``--tune-seeds A,A+1,...`` (default 100, 101): base seed
  ``A`` and that many seeds (the runner's seed ``i`` uses ``fold_in(key(A), i)``); they may
  not start at the config's own ``seed``, whose runs are the reported ones.
* **Grid.** α = 2^e for e in the ``--lr-exp`` grid (default −10 … −1) × the ``--eta`` values
  (default 0.001, 0.01, 0.1; only for the algorithms whose update reads η,
  ``Traits.step_sizes``), one vmapped program per combination of the values of the
  shape-changing hyperparameters requested (:data:`SHAPES`): ``--M`` (M = M_init; Rennala's
  and Malenia's collections), ``--msync-m`` (the workers an m-synchronous round waits for)
  and ``--ringmaster-R`` (Ringmaster's delay threshold).  An algorithm tunes those in its
  ``Traits.tuned_shapes`` and keeps the config's value of the others.  Each program is a
  normal run directory ``DIR/runs/<algorithm>[_M<M>][_msync_m<m>][_ringmaster_R<R>]_lr<A>..<B>/``
  at the config's budget, with ``on_nonfinite: mark``.
* **Score.** The per-seed statistic the verdict compares (:mod:`jaxnigt.analysis.stats`), over the
  tuning seeds: the mean of the ``average`` return over the budget (the default) or of
  ``second_half``; for ``time_to_50`` / ``time_to_80``, minus the restricted mean time to the
  target (a seed that does not reach it by the budget counts as the budget).  A grid point
  with a diverged seed (or a non-finite score) is out.
* **Target of a time statistic** (:func:`pooled_target`): the target rule of
  :mod:`jaxnigt.analysis.stats` on the pool of every grid point of every algorithm tuned together,
  as run on the *initial* grid (before any extension, so the target is fixed before the search
  goes on and does not move with it): ``R0`` the median return at time 0, ``R_best`` the best
  median second-half return of a point.
* **Tie rule.** Scores within 1e-6 · max(1, |best|) of the best tie; with a time statistic the
  tie goes first to the higher average return (many points reach a target at the same
  evaluation, or none does); then to the smaller α, then the larger η, then the smaller value
  of each tuned shape in the order M, msync_m, ringmaster_R (the most conservative step, the
  least momentum, the cheapest round or the least staleness).
* **Extension.** While the winner's α sits at an edge of the grid run so far, two more
  exponents on that side (at the grid's spacing there) run for every η and shape, at most
  ``max_extensions`` times (default 4) and never above α = 1; a winner still at an edge is
  reported as not interior.  A grid of one α is not extended.

* **Scheduling.** Every algorithm's initial grid is submitted first; each algorithm's search
  then goes on as soon as its own programs have finished (:func:`drive`; with a time
  statistic, once every initial grid has, for the target).  ``jobs`` > 1 runs that many
  programs at once, one process each (:mod:`jaxnigt.run.processes`), so one algorithm's
  extensions run while another's slower programs still do; the results do not depend on it.

Writes ``DIR/tuning.json`` (every point, the winners, the grids run) and ``DIR/tuned.yaml``:
the config with the winners in its ``per_algorithm`` section (``learning_rate``, ``eta``, and
each tuned shape's keys: ``M`` = ``M_init``, ``msync_m``, ``ringmaster_R``); the algorithms not
tuned keep their values.  A scored point carries ``M`` (the config's where not tuned) and each
other tuned shape under its name.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxnigt.analysis import report_text, stats

# The tuning's pieces (its grid and flags, its search rule, its scoring) are importable from
# here too: this module is the entry point the command line and the scripts use.
from jaxnigt.studies.grid import (  # noqa: F401
    DEFAULT_ETA,
    DEFAULT_LR_EXP,
    DEFAULT_TUNE_SEEDS,
    MAX_EXTENSIONS,
    RECORD,
    SCORED,
    SHAPES,
    TABLE,
    TIE_RULE,
    TUNED,
    Grid,
    Shape,
    TuningError,
    parse_lr_exp,
    parse_numbers,
    parse_seeds,
)
from jaxnigt.studies.programs import (  # noqa: F401
    PaddedPool,
    plan_program,
    program_etas,
    program_raw,
    program_shapes,
    run_job,
    run_program,
    tuned_shapes,
    without_sweep,
)
from jaxnigt.studies.scoring import pooled_target, score_run, speed
from jaxnigt.studies.search import choose, drive, edge, extension, search, search_steps  # noqa: F401
from jaxnigt.studies.sweep_programs import PROGRAMS_DIR

#: The printed table of a tuning's report.
table = report_text.tuning_table

# --------------------------------------------------------------------------------- request


def _check_shapes(grid: Grid) -> None:
    for name, values in grid.shapes.items():
        if name not in SHAPES:
            raise TuningError(f"unknown {name!r}; expected some of {list(SHAPES)}", param="shapes")
        ints = isinstance(values, (tuple, list)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        )
        if not ints or not values or min(values) < 1:
            raise TuningError(f"got {values!r}; expected integers >= 1", param=name)


def check_tuned(algorithms: Sequence[str], grid: Grid) -> None:
    """Raises :class:`TuningError` unless each shape of ``grid`` is tuned by one of
    ``algorithms`` at least (their ``Traits.tuned_shapes``): a user's values that none of
    them tunes would be ignored.  (:func:`tune` itself takes a grid shared by several calls,
    each algorithm tuning the shapes it tunes.)"""
    from jaxnigt import algorithms as registry

    for name in grid.shapes:
        if not any(name in registry.traits(a).tuned_shapes for a in algorithms):
            who = (
                f"{algorithms[0]} tunes no {name}"
                if len(algorithms) == 1
                else f"none of {', '.join(algorithms)} tunes {name}"
            )
            by = [a for a in registry.names() if name in registry.traits(a).tuned_shapes]
            raise TuningError(f"{who}; the algorithms that do: {', '.join(by)}", param=name)


def check_request(raw, algorithms: Sequence[str], grid: Grid, seeds, statistic: str) -> list:
    """Validates a request before anything is written; returns the algorithms to tune.

    Raises:
      TuningError: a bad request (its ``param``); ConfigError: a bad config or combination.
    """
    from jaxnigt import config as config_lib

    config_lib.sweep_over(raw)  # a malformed sweep: section, as every command refuses it
    cfg = config_lib.from_dict(without_sweep(raw))
    config_lib.warn(raw, cfg)
    algorithms = list(algorithms or cfg.algorithms)
    known = config_lib.algorithm_names()
    unknown = [a for a in algorithms if a not in known]
    if unknown:
        raise TuningError(
            f"unknown {unknown[0]!r}; expected some of {list(known)}", param="algorithms"
        )
    if statistic not in stats.STATISTICS:
        raise TuningError(
            f"got {statistic!r}; expected one of {stats.STATISTICS}", param="statistic"
        )
    if cfg.budget is None:
        raise TuningError(
            "the config has none; the scores need a simulated-time budget", param="budget"
        )
    if seeds[0] == cfg.seed:
        raise TuningError(
            f"starts at {seeds[0]}, the config's own seed (its runs are the reported ones); "
            f"choose others, e.g. {cfg.seed + 100},{cfg.seed + 101}",
            param="seeds",
        )
    if grid.max_extensions < 0:
        raise TuningError(f"got {grid.max_extensions}; expected >= 0", param="max_extensions")
    _check_shapes(grid)
    for a in algorithms:  # every program's config, before any runs
        hp = cfg.hparams_for(a)
        for shapes in program_shapes(a, grid):
            config_lib.from_dict(
                program_raw(raw, a, shapes, grid.lr_exp, program_etas(a, hp, grid), seeds)
            )
    return algorithms


def tuned_values(report: Mapping[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Each algorithm's winner in a tuning report (``tuning.json``) as the hparams a config
    sets: ``learning_rate``, ``eta`` and the keys of its tuned shapes (``M`` and ``M_init``
    for ``M``, ...); None for an algorithm with no finite score."""
    out = {}
    for a, r in report["algorithms"].items():
        best = r["chosen"]
        if best is None:
            out[a] = None
            continue
        values = {"learning_rate": best["learning_rate"], "eta": best["eta"]}
        for name in r.get("tuned_shapes", ()):
            values.update(dict.fromkeys(SHAPES[name].keys, best[name]))
        out[a] = values
    return out


def tuned_raw(raw: Mapping[str, Any], report: Mapping[str, Any]) -> dict:
    """``raw`` with every winner in its ``per_algorithm`` section (no ``grid``)."""
    out = json.loads(json.dumps(dict(raw)))
    out.pop("grid", None)
    per = dict(out.get("per_algorithm") or {})
    for a, values in tuned_values(report).items():
        if values is not None:
            per[a] = {**(per.get(a) or {}), **values}
    out["per_algorithm"] = per
    return out


def _open(out: Path, record: dict, *, resume: bool, overwrite: bool, ray=None) -> None:
    """Prepares ``out`` (or checks that it holds the same request, to resume) and records it;
    first checks that ``ray``, if asked for, is installed (a refused command writes
    nothing)."""
    from jaxnigt.run import executors, run_dir

    executors.check(ray)

    if resume:
        if not (out / RECORD).is_file():
            raise TuningError(
                f"{str(out)!r} is not a tuning directory (no {RECORD})", param="resume"
            )
        if json.loads((out / RECORD).read_text()) != record:
            raise TuningError(f"{str(out)!r} holds a different tuning request", param="resume")
    else:
        run_dir.prepare_run_dir(out, overwrite)
    run_dir.atomic_write_text(out / RECORD, json.dumps(record, indent=2) + "\n")


def _write(out: Path, raw, report: Mapping[str, Any], seeds) -> None:
    """Writes ``tuning.json`` and ``tuned.yaml`` (checked as a config first)."""
    import yaml

    from jaxnigt import config as config_lib
    from jaxnigt.run import run_dir

    run_dir.atomic_write_text(out / TABLE, json.dumps(report, indent=2) + "\n")
    written = tuned_raw(raw, report)
    config_lib.from_dict(without_sweep(written))
    header = (
        f"# Tuned by: {report['command']}\n# Grid searched on seeds {', '.join(map(str, seeds))} "
        f"(never reported), score: {report['score']}; every point in {TABLE}.\n"
    )
    run_dir.atomic_write_text(out / TUNED, header + yaml.safe_dump(written, sort_keys=False))


class _Searches:
    """Every algorithm's search of one tuning (:func:`drive`), its programs run by a pool of
    :mod:`jaxnigt.run.executors`; ``report`` (:func:`_report`) gets a time statistic's
    target.  ``cfg``: ``raw`` parsed."""

    def __init__(self, raw, cfg, out: Path, grid: Grid, seeds, report: dict, *, log, progress):
        self.raw, self.cfg, self.out, self.grid, self.seeds = raw, cfg, out, grid, seeds
        self.report, self.statistic = report, report["statistic"]
        self.log, self.progress = log, progress
        self.hp: dict[str, Any] = {}
        self.runs: dict[str, list[str]] = {}
        self.asked: dict[int, tuple] = {}  # job id -> (algorithm, shapes, exponents, run dir)
        self.pool = None
        self.alone = True  # one program at a time, in this process

    def run(self, algorithms: Sequence[str], where: Mapping[str, Any]) -> dict[str, dict]:
        """``{algorithm: search result}`` (:func:`search`'s, with :meth:`result`'s grid);
        ``where``: :func:`jaxnigt.run.executors.make`'s ``jobs``, ``ray``, ``stop`` and
        ``gpus_per_program``."""
        from jaxnigt.run import executors

        self.hp = {a: self.cfg.hparams_for(a) for a in algorithms}
        self.runs = {a: [] for a in algorithms}
        self.alone = where["jobs"] == 1 and where["ray"] is None
        steps = functools.partial(
            search_steps, max_extensions=self.grid.max_extensions, log=self.log
        )
        searches = {
            a: steps(self.grid.lr_exp, program_shapes(a, self.grid), name=a) for a in algorithms
        }
        timed = self.statistic in stats.TIME_STATISTICS
        first_rounds = self.first_rounds if timed else None
        stop = where.get("stop")
        pool = (
            PaddedPool(self.out / PROGRAMS_DIR, progress=self.progress, log=self.log, stop=stop)
            if self.alone
            else executors.make(run_job, **where, run_dir_arg=1)
        )
        with pool as self.pool:
            found = drive(
                searches, self.submit, self.pool.wait, self.score, first_rounds=first_rounds
            )
        return {a: self.result(a, r) for a, r in found.items()}

    def result(self, a: str, result: dict) -> dict:
        """``result`` with the grid it searched: η, M (the config's where not tuned) and
        each other tuned shape's values, the programs' directories."""
        names = tuned_shapes(a, self.grid)
        shapes = self.grid.shapes
        result.update(
            eta=list(program_etas(a, self.hp[a], self.grid)),
            M=list(shapes["M"]) if "M" in names else [self.hp[a].M],
        )
        result.update({name: list(shapes[name]) for name in names if name != "M"})
        result.update(runs=self.runs[a], M_tuned="M" in names, tuned_shapes=list(names))
        return result

    def submit(self, a: str, shapes, exps) -> int:
        program, run_dir, line = plan_program(
            self.raw, a, self.hp[a], self.out, self.grid, shapes, exps, self.seeds
        )
        self.log(line)
        alone = self.alone
        job = (program, str(run_dir), self.progress and alone, self.log if alone else None)
        i = self.pool.submit(job, run_dir.name)
        self.asked[i] = (a, shapes, exps, run_dir)
        return i

    def first_rounds(self) -> None:
        """A time statistic's target, on every initial program (all submitted so far)."""
        dirs = [run_dir for _, _, _, run_dir in self.asked.values()]
        self.report["target"] = t = pooled_target(dirs, stats.fraction(self.statistic))
        self.log(
            f"[tune] {self.statistic} target: {t['value']:.6g} = R0 + {t['fraction']:g} "
            f"(R_best - R0), R0 = {t['R0']:.6g}, R_best = {t['R_best']:.6g} (pool: the "
            f"{len(dirs)} initial programs)"
        )
        why = stats.no_target_reason(t["R0"], t["R_best"])
        if why is not None:
            self.log(f"[tune] warning: {why}: every point scores the budget")

    def score(self, a: str, ids) -> list[dict]:
        target = self.report.get("target", {}).get("value")
        etas = program_etas(a, self.hp[a], self.grid)
        points = []
        for i in ids:
            _, shapes, exps, run_dir = self.asked[i]
            self.runs[a].append(str(run_dir))
            shapes = {"M": self.hp[a].M, **shapes}
            points += score_run(run_dir, self.statistic, exps, etas, shapes, target)
        return points


def _report(cfg, grid: Grid, seeds, statistic: str, source: str, command: str) -> dict:
    """The report of a tuning before its searches (``algorithms`` empty)."""
    timed = statistic in stats.TIME_STATISTICS
    mean = "minus the mean over the tuning seeds of " if timed else "mean over the tuning seeds of "
    return {
        "config": source,
        "command": command,
        "statistic": statistic,
        "score": mean + SCORED[statistic],
        "tie_rule": TIE_RULE,
        "budget": cfg.budget,
        "tune_seeds": list(seeds),
        "grid": grid.record(),
        "algorithms": {},
    }


def tune(
    raw: Mapping[str, Any],
    out: str | Path,
    *,
    algorithms: Sequence[str] = (),
    grid: Grid = Grid(),
    seeds: Sequence[int] = DEFAULT_TUNE_SEEDS,
    statistic: str = "average",
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    source: str = "",
    command: str = "",
    stop=None,
    jobs: int = 1,
    ray: str | None = None,
    gpus_per_program: float = 0.0,
) -> dict[str, Any]:
    """Tunes ``algorithms`` of the config ``raw`` (read from ``source``; ``command`` is
    recorded) into ``out`` (the module docstring); writes ``tuning.json`` and ``tuned.yaml``
    there and returns the report.  ``stop`` (``signals.stop_on_signals``) ends it after the
    current chunk (``signals.Interrupted``); ``resume`` continues it.

    ``jobs`` > 1 runs that many programs at once, one process each (the module docstring,
    "Scheduling"; their lines prefixed by the program's directory, no progress bars); ``ray``
    (``"auto"`` or an address) runs them as tasks of a Ray cluster instead, each with one CPU
    or ``gpus_per_program`` GPUs (:mod:`jaxnigt.run.executors`).  The results do not depend
    on where the programs run, and it is not part of the request."""
    from jaxnigt import config as config_lib

    seeds = tuple(seeds)
    algorithms = check_request(raw, algorithms, grid, seeds, statistic)
    if jobs < 1:
        raise TuningError(f"got {jobs}; expected >= 1", param="jobs")
    out = Path(out)
    record = {
        "config": dict(raw),
        "algorithms": algorithms,
        "grid": grid.record(),
        "seeds": list(seeds),
        "statistic": statistic,
    }
    _open(out, json.loads(json.dumps(record)), resume=resume, overwrite=overwrite, ray=ray)
    cfg = config_lib.from_dict(without_sweep(raw))
    report = _report(cfg, grid, seeds, statistic, source, command)
    searches = _Searches(raw, cfg, out, grid, seeds, report, log=log, progress=progress)
    where = {"jobs": jobs, "ray": ray, "stop": stop, "gpus_per_program": gpus_per_program}
    report["algorithms"].update(searches.run(algorithms, where))
    report["speed"] = speed(report, out)
    _explain_no_target(report["speed"], log)
    _write(out, raw, report, seeds)
    return report


def _explain_no_target(record: dict, log: Callable[[str], None]) -> None:
    """Where returns ended at or below their start (R_best <= R0), the speed's target is NaN
    and every time to it "never": one line says why (kept as the record's ``no_target``)."""
    target = record.get("target") if record else None
    why = None if not target else stats.no_target_reason(target["R0"], target["R_best"])
    if why is not None:
        record["no_target"] = why
        log(f"[tune] the winners' times to a target below are 'never': {why}")
