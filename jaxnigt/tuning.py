"""``jaxnigt tune``: step sizes (and shape hyperparameters) chosen on seeds that no reported
run uses.

Protocol (SPEC §8), per algorithm:

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
* **Score.** The per-seed statistic the verdict compares (:mod:`jaxnigt.stats`), over the
  tuning seeds: the mean of the ``average`` return over the budget (the default) or of
  ``second_half``; for ``time_to_50`` / ``time_to_80``, minus the restricted mean time to the
  target (a seed that does not reach it by the budget counts as the budget).  A grid point
  with a diverged seed (or a non-finite score) is out.
* **Target of a time statistic** (:func:`pooled_target`): the target rule of
  :mod:`jaxnigt.stats` on the pool of every grid point of every algorithm tuned together, as
  run on the *initial* grid (before any extension, so the target is fixed before the search
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
  programs at once, one process each (:mod:`jaxnigt.processes`), so one algorithm's
  extensions run while another's slower programs still do; the results do not depend on it.

Writes ``DIR/tuning.json`` (every point, the winners, the grids run) and ``DIR/tuned.yaml``:
the config with the winners in its ``per_algorithm`` section (``learning_rate``, ``eta``, and
each tuned shape's keys: ``M`` = ``M_init``, ``msync_m``, ``ringmaster_R``); the algorithms not
tuned keep their values.  A scored point carries ``M`` (the config's where not tuned) and each
other tuned shape under its name.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from jaxnigt import report_text, run_data, stats

DEFAULT_LR_EXP = tuple(range(-10, 0))
DEFAULT_ETA = (0.001, 0.01, 0.1)
DEFAULT_TUNE_SEEDS = (100, 101)
MAX_EXTENSIONS = 4
TIE_TOL = 1e-6
STATISTICS = stats.RETURN_STATISTICS + stats.TIME_STATISTICS
SCORED = {"average": "the average return over [0, budget]",
          "second_half": "the return averaged over [budget/2, budget]",
          **{s: f"the time to the {round(100 * stats.fraction(s))} % target (pooled over the "
                "initial grids), a seed that does not reach it counting as the budget"
             for s in stats.TIME_STATISTICS}}  # fmt: skip
TUNED, TABLE, RECORD = "tuned.yaml", "tuning.json", "tune.json"
TIE_RULE = (
    "scores within 1e-6·max(1, |best|) tie: (time statistics: the higher average return, then) "
    "the smaller α, then the larger η, then the smaller value of each tuned shape (M, msync_m, "
    "ringmaster_R)"
)
#: The printed table of a report (``jaxnigt tune``, ``scripts/results.py``).
table = report_text.tuning_table


class TuningError(ValueError):
    """A bad tuning request: ``param`` names what is at fault in this module's words (a
    :class:`Grid` field, a parameter of :func:`tune`, or a config field such as ``budget``),
    ``reason`` says what is wrong, and the message is ``param: reason``.  The command line
    puts its flag for ``param`` in front instead."""

    def __init__(self, reason: str, *, param: str | None = None):
        super().__init__(f"{param}: {reason}" if param else reason)
        self.param, self.reason = param, reason


class Shape(NamedTuple):
    """A shape-changing hyperparameter ``jaxnigt tune`` can tune (a ``Traits.tuned_shapes``
    name): each value is its own compiled program."""

    keys: tuple[str, ...]  # the ``hparams`` keys one value sets
    what: str  # what it is, for the command line's help


#: The shape hyperparameters, in the tie rule's order (the command line's flags:
#: ``jaxnigt.cli.grids``).
SHAPES: dict[str, Shape] = {
    "M": Shape(("M", "M_init"), "M = M_init values for Rennala/Malenia"),
    "msync_m": Shape(("msync_m",), "workers an m-synchronous round waits for (msync_nigt)"),
    "ringmaster_R": Shape(("ringmaster_R",), "Ringmaster's delay threshold R (ringmaster_pg)"),
}


@dataclasses.dataclass(frozen=True)
class Grid:
    """The requested grid: α exponents, η values and ``shapes``, the values of each shape
    hyperparameter to tune (a :data:`SHAPES` name; one not given: each algorithm's own)."""

    lr_exp: tuple[int, ...] = DEFAULT_LR_EXP
    eta: tuple[float, ...] = DEFAULT_ETA
    shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    max_extensions: int = MAX_EXTENSIONS

    def __post_init__(self):
        object.__setattr__(self, "shapes", dict(self.shapes))

    def record(self) -> dict[str, Any]:
        """The grid as ``tune.json`` and ``tuning.json`` hold it: ``M`` (null: not tuned) and
        each other shape given under its name."""
        shapes = {k: list(v) for k, v in self.shapes.items()}
        return {"lr_exp": list(self.lr_exp), "eta": list(self.eta), "M": shapes.pop("M", None),
                "max_extensions": self.max_extensions, **shapes}  # fmt: skip


# --------------------------------------------------------------------------------- parsing


def parse_lr_exp(text: str) -> tuple[int, ...]:
    """``A:B`` (every integer from A to B), ``A:B:S`` (step S) or ``e1,e2,...``."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] <= 0):
                raise ValueError
            start, stop, step = (*parts, 1)[:3]
            values = tuple(range(start, stop + 1, step))
        else:
            values = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise TuningError(
            f"got {text!r}; expected A:B, A:B:STEP or integers e1,e2 (α = 2^e)", param="lr_exp"
        ) from None
    if not values:
        raise TuningError(f"got {text!r}; the grid is empty (A:B needs A <= B)", param="lr_exp")
    return tuple(sorted(set(values)))


def parse_numbers(text: str, param: str, kind: type, low: float, high: float) -> tuple:
    """Comma-separated ``kind`` values in ``(low, high]`` for ``param`` (a :class:`Grid`
    field, named by the error otherwise)."""
    what = f"comma-separated {'integers' if kind is int else 'numbers'}"
    try:
        values = tuple(kind(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise TuningError(f"got {text!r}; expected {what}", param=param) from None
    if not values:
        raise TuningError(f"got {text!r}; the grid is empty", param=param)
    bad = [v for v in values if not low < v <= high]
    if bad:
        bound = f"in ({low:g}, {high:g}]" if math.isfinite(high) else f"> {low:g}"
        raise TuningError(f"got {bad[0]:g}; every value must be {bound}", param=param)
    return tuple(sorted(set(values)))


def parse_seeds(text: str) -> tuple[int, ...]:
    """``A,A+1,...``: consecutive non-negative seeds."""
    seeds = parse_numbers(text, "seeds", int, -1, math.inf)
    if list(seeds) != list(range(seeds[0], seeds[0] + len(seeds))):
        raise TuningError(
            f"got {text!r}; expected consecutive seeds A,A+1,... (a base seed and a count)",
            param="seeds",
        )
    return seeds


# ------------------------------------------------------------------------------- selection


def choose(points: Sequence[Mapping[str, Any]]) -> dict | None:
    """The winner among scored grid points (the module's tie rule); None if none is valid."""
    ok = [p for p in points if not p["diverged_seeds"] and math.isfinite(p["score"])]
    if not ok:
        return None
    tied = _best(ok, lambda p: p["score"])
    if any("secondary" in p for p in tied):  # a time score: the higher average return first
        tied = _best(tied, lambda p: p.get("secondary", -math.inf))
    return dict(min(tied, key=lambda p: (p["lr_exp"], -p["eta"], *_shape_values(p))))


def _best(points: Sequence[Mapping[str, Any]], value) -> list:
    """The points whose ``value`` is within the tie tolerance of the best."""
    top = max(value(p) for p in points)
    if not math.isfinite(top):  # e.g. every average return non-finite: all tie
        return [p for p in points if value(p) == top]
    return [p for p in points if value(p) >= top - TIE_TOL * max(1.0, abs(top))]


def _shape_values(point: Mapping[str, Any]) -> list:
    return [point[s] for s in SHAPES if s in point]


def edge(best: Mapping[str, Any] | None, lr_exp: Sequence[int]) -> str | None:
    """``"low"`` / ``"high"`` when the winner's α is the smallest / largest of the grid."""
    if best is None or len(lr_exp) < 2:
        return None
    if best["lr_exp"] == min(lr_exp):
        return "low"
    return "high" if best["lr_exp"] == max(lr_exp) else None


def extension(lr_exp: Sequence[int], side: str) -> list[int]:
    """Two more exponents beyond ``side`` at the grid's spacing there (α ≤ 1: none above 0)."""
    grid = sorted(lr_exp)
    if side == "low":
        step = grid[1] - grid[0]
        return [grid[0] - 2 * step, grid[0] - step]
    step = grid[-1] - grid[-2]
    return [e for e in (grid[-1] + step, grid[-1] + 2 * step) if e <= 0]


def search(
    run_points: Callable[[Any, list[int]], list[dict]],
    lr_exp: Sequence[int],
    programs: Sequence[Any],
    *,
    max_extensions: int = MAX_EXTENSIONS,
    log: Callable[[str], None] = print,
    name: str = "",
) -> dict[str, Any]:
    """Runs the grid and extends it while the winner's α sits at an edge.

    Args:
      run_points: ``(program, exponents) -> scored points`` (each with ``lr_exp``, ``eta``,
        its shape values such as ``M``, ``score``, ``diverged_seeds``): one program per call.
      lr_exp: the initial exponents; programs: what ``run_points`` takes for each program
        (in :func:`tune`, its shape values ``{name: value}``).
      max_extensions: at most this many extensions.

    Returns:
      ``{"points", "chosen", "lr_exp" (every exponent run), "interior", "extensions"}``.
    """
    steps = search_steps(lr_exp, programs, max_extensions=max_extensions, log=log, name=name)
    points: list[list[dict]] = []  # by job id
    finished: list[int] = []

    def submit(key, program, exps):  # runs at once; the next ``wait`` returns it
        points.append(run_points(program, exps))
        finished.append(len(points) - 1)
        return finished[-1]

    def wait():
        done = finished[:]
        finished.clear()
        return done

    def score(key, ids):
        return [p for i in ids for p in points[i]]

    return drive({name: steps}, submit, wait, score)[name]


def search_steps(
    lr_exp: Sequence[int],
    programs: Sequence[Any],
    *,
    max_extensions: int = MAX_EXTENSIONS,
    log: Callable[[str], None] = print,
    name: str = "",
) -> Generator[list[tuple[Any, list[int]]], list[dict], dict[str, Any]]:
    """:func:`search` as a generator, so that several searches can share each round's runs
    (:func:`drive`): it yields a round's requests ``[(program, exponents)]``, is sent that
    round's scored points (one flat list) and returns :func:`search`'s result."""
    exps = sorted(lr_exp)
    points = list((yield [(prog, exps) for prog in programs]))
    done = 0
    while True:
        best = choose(points)
        side = edge(best, exps)
        new = extension(exps, side) if side and done < max_extensions else []
        if not new:
            break
        done += 1
        log(
            f"[tune] {name}: the winner α = 2^{best['lr_exp']} is at the {side} edge; "
            f"extension {done} (at most {max_extensions}): α = " + ", ".join(f"2^{e}" for e in new)
        )
        points += list((yield [(prog, new) for prog in programs]))
        exps = sorted({*exps, *new})
    interior = best is not None and min(exps) < best["lr_exp"] < max(exps)
    return {"points": points, "chosen": best, "lr_exp": exps, "interior": interior,
            "extensions": done}  # fmt: skip


def drive(
    searches: Mapping[str, Generator],
    submit: Callable[[str, Any, list[int]], int],
    wait: Callable[[], list[int]],
    score: Callable[[str, list[int]], list[dict]],
    *,
    first_rounds: Callable[[], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Runs :func:`search_steps` generators, each as fast as its own programs finish.

    Every request of a search's round is submitted at once (``submit(key, program,
    exponents) -> job id``); ``wait()`` blocks until some jobs finish and returns their ids;
    when the last job of a round is done, ``score(key, ids)`` (the round's jobs in request
    order) gives the points sent to the search, whose next round is submitted at once.  So
    one search's extensions run while another's slower programs still do.  ``first_rounds``:
    no first round is scored until every search's first round has finished, and it is called
    then (a time target pools the initial grids).  Returns ``{key: result}``."""
    rounds: dict[str, tuple[list[int], set[int]]] = {}
    owner: dict[int, str] = {}
    results: dict[str, dict] = {}
    unscored_first = set(searches)

    def start(key, requests):
        ids = [submit(key, program, exps) for program, exps in requests]
        owner.update(dict.fromkeys(ids, key))
        rounds[key] = (ids, set(ids))

    for key, steps in searches.items():
        start(key, next(steps))
    while rounds:
        for i in wait():
            rounds[owner.pop(i)][1].discard(i)
        if unscored_first and first_rounds is not None:
            if any(rounds[k][1] for k in unscored_first):
                continue
            first_rounds()
        for key in [k for k, (_, left) in rounds.items() if not left]:
            ids, _ = rounds.pop(key)
            unscored_first.discard(key)
            try:
                start(key, searches[key].send(score(key, ids)))
            except StopIteration as done:
                results[key] = done.value
    return {key: results[key] for key in searches}


# --------------------------------------------------------------------------------- running


def program_raw(
    raw: Mapping[str, Any], algorithm: str, shapes: Mapping[str, int], exps, etas, seeds
) -> dict:
    """The raw config of one tuning program: one algorithm, its ``shapes`` values
    (``{name: value}``, :data:`SHAPES` names; none: the config's), the (α × η) grid."""
    out = json.loads(json.dumps(_runnable(raw)))
    out.update(name=f"tune_{algorithm}{_tag(shapes)}", algorithms=[algorithm], seed=seeds[0])
    out.update(seeds=len(seeds), on_nonfinite="mark", target_return=None)
    per = dict(out.get("per_algorithm") or {})
    own = {k: v for k, v in dict(per.get(algorithm) or {}).items()
           if k not in ("learning_rate", "eta")}  # fmt: skip
    for name, value in shapes.items():
        own.update(dict.fromkeys(SHAPES[name].keys, int(value)))
    out["per_algorithm"] = {algorithm: own} if own else {}
    out["grid"] = {"learning_rate": [2.0**e for e in exps], "eta": [float(e) for e in etas]}
    return out


def score_run(
    run_dir: Path, statistic: str, exps, etas, shapes: Mapping[str, Any], target=None
) -> list[dict]:
    """Every grid point of one finished tuning program, scored (the module's score); each
    point carries the program's ``shapes`` values (``{name: value}``), the program's directory
    name (``program``, under ``DIR/runs``) and its ``summary.json`` key (``method``).  A time
    statistic needs its ``target`` (:func:`pooled_target`); its points carry the average
    return as ``secondary`` (the tie rule) and the per-seed times (``inf``: not reached)."""
    run = run_data.load_run(run_dir)
    timed = statistic in stats.TIME_STATISTICS
    if timed and target is None:
        raise TuningError(f"{statistic} needs a target", param="statistic")
    points = []
    for m in run.methods.values():
        # metrics hold float32 values: report the requested grid values
        e = min(exps, key=lambda x: abs(2.0**x - m.learning_rate))
        eta = min(etas, key=lambda x: abs(x - m.eta))
        point = {"lr_exp": int(e), "learning_rate": 2.0**e, "eta": float(eta), **shapes,
                 "program": Path(run_dir).name, "method": m.name}  # fmt: skip
        if timed:
            values = m.statistic("time", run.budget, target)
            score = -stats.restricted_mean_time(values, run.budget)
            secondary = float(np.mean(m.statistic("average", run.budget)))
            point["secondary"] = secondary if math.isfinite(secondary) else -math.inf
        else:
            values = m.statistic(statistic, run.budget)
            score = float(np.mean(values))
        point.update(
            score=score if math.isfinite(score) else math.nan,
            seed_values=[float(v) for v in values], diverged_seeds=list(m.diverged),
        )  # fmt: skip
        points.append(point)
    return sorted(points, key=lambda p: (p["lr_exp"], p["eta"]))


def pooled_target(run_dirs: Sequence[Path], fraction: float) -> dict[str, Any]:
    """The target of a time statistic (the module's rule) on the pool of every grid point of
    the finished programs ``run_dirs``: ``{"fraction", "value", "R0", "R_best", "pool"}``
    (``value`` NaN: no point improved on the initial return)."""
    initial, levels = [], []
    for run_dir in run_dirs:
        run = run_data.load_run(run_dir)
        for m in run.methods.values():
            initial.append(m.initial())
            levels.append(float(np.nanmedian(m.statistic("second_half", run.budget))))
    initial = np.concatenate(initial)
    value = stats.targets(initial, levels, (fraction,))[fraction]
    return {"fraction": fraction, "value": value, "R0": float(np.nanmedian(initial)),
            "R_best": float(np.nanmax(levels)), "pool": [str(d) for d in run_dirs]}  # fmt: skip


def run_program(cfg, run_dir: Path, *, progress: bool, log, stop=None) -> None:
    """Runs one tuning program into ``run_dir`` unless it already holds it finished."""
    from jaxnigt import checkpoint, experiment, files

    if checkpoint.finished(run_dir, cfg):
        log(f"[tune] {run_dir}: finished earlier with this config; kept")
        return
    again = (run_dir / "config.yaml").is_file()
    if again:
        try:
            files.check_resumable(cfg, run_dir)
        except ValueError:
            again = False
    experiment.run_experiment(
        cfg,
        run_dir,
        resume=again,
        progress=progress,
        plot=False,
        log=log,
        stop=stop,
    )


def _etas(algorithm: str, hp, grid: Grid) -> tuple[float, ...]:
    from jaxnigt.algorithms import traits

    return grid.eta if "eta" in traits(algorithm).step_sizes else (float(hp.eta),)


def _runnable(raw: Mapping[str, Any]) -> dict:
    """``raw`` without its ``sweep:`` section (read by ``jaxnigt sweep`` only)."""
    return {k: v for k, v in raw.items() if k != "sweep"}


def tuned_shapes(algorithm: str, grid: Grid) -> tuple[str, ...]:
    """The shapes of ``grid`` that ``algorithm`` tunes (its ``Traits.tuned_shapes``), in
    :data:`SHAPES` order."""
    from jaxnigt.algorithms import traits

    own = traits(algorithm).tuned_shapes
    return tuple(s for s in SHAPES if s in grid.shapes and s in own)


def _programs(algorithm: str, grid: Grid) -> list[dict[str, int]]:
    """The shape values ``{name: value}`` of each of ``algorithm``'s programs: the product of
    the values of the shapes it tunes (``[{}]``: one program, the config's values)."""
    names = tuned_shapes(algorithm, grid)
    values = itertools.product(*(grid.shapes[s] for s in names))
    return [dict(zip(names, v, strict=True)) for v in values]


def _tag(shapes: Mapping[str, int]) -> str:
    """The program's name suffix: ``_M20``, ``_msync_m3``, ``_ringmaster_R10``, ..."""
    return "".join(f"_{name}{value}" for name, value in shapes.items())


def _check_shapes(grid: Grid) -> None:
    for name, values in grid.shapes.items():
        if name not in SHAPES:
            raise TuningError(f"unknown {name!r}; expected some of {list(SHAPES)}",
                              param="shapes")  # fmt: skip
        ints = isinstance(values, (tuple, list)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        )
        if not ints or not values or min(values) < 1:
            raise TuningError(f"got {values!r}; expected integers >= 1", param=name)


def _plan(raw, algorithm, hp, out: Path, grid: Grid, shapes, exps, seeds) -> tuple[dict, Path, str]:
    """One tuning program of ``algorithm`` (``hp``: its hparams in ``raw``): ``(its raw
    config, its run directory, a line that announces it)``."""
    from jaxnigt import config as config_lib

    etas = _etas(algorithm, hp, grid)
    program = program_raw(raw, algorithm, shapes, exps, etas, seeds)
    config_lib.from_dict(program)  # a bad program stops here, before any runs of its round
    run_dir = out / "runs" / f"{algorithm}{_tag(shapes)}_lr{min(exps)}..{max(exps)}"
    values = "".join(f" {name}={value}" for name, value in shapes.items())
    line = (
        f"[tune] {algorithm}{values}: α = 2^{min(exps)} … "
        f"2^{max(exps)} ({len(exps)}) × η {', '.join(f'{e:g}' for e in etas)} × "
        f"{len(seeds)} seeds -> {run_dir}"
    )
    return program, run_dir, line


def _run_job(program: dict, run_dir: str, progress: bool, log=None, *, stop=None) -> None:
    """One program as a job of :func:`jaxnigt.processes.run_all` (``log`` None, in a child:
    lines printed with the program's name)."""
    from jaxnigt import config as config_lib

    if log is None:
        name = Path(run_dir).name

        def log(line: str) -> None:
            print(f"[{name}] {line}", flush=True)

    run_program(config_lib.from_dict(program), Path(run_dir), progress=progress, log=log,
                stop=stop)  # fmt: skip


def check_request(raw, algorithms: Sequence[str], grid: Grid, seeds, statistic: str) -> list:
    """Validates a request before anything is written; returns the algorithms to tune.

    Raises:
      TuningError: a bad request (its ``param``); ConfigError: a bad config or combination.
    """
    from jaxnigt import config as config_lib

    cfg = config_lib.from_dict(_runnable(raw))
    config_lib.warn(raw, cfg)
    algorithms = list(algorithms or cfg.algorithms)
    known = config_lib.algorithm_names()
    unknown = [a for a in algorithms if a not in known]
    if unknown:
        raise TuningError(
            f"unknown {unknown[0]!r}; expected some of {list(known)}", param="algorithms"
        )
    if statistic not in STATISTICS:
        raise TuningError(f"got {statistic!r}; expected one of {STATISTICS}", param="statistic")
    if cfg.budget is None:
        raise TuningError("the config has none; the scores need a simulated-time budget",
                          param="budget")  # fmt: skip
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
        for shapes in _programs(a, grid):
            config_lib.from_dict(
                program_raw(raw, a, shapes, grid.lr_exp, _etas(a, hp, grid), seeds)
            )
    return algorithms


def tuned_raw(raw: Mapping[str, Any], report: Mapping[str, Any]) -> dict:
    """``raw`` with every winner in its ``per_algorithm`` section (no ``grid``)."""
    out = json.loads(json.dumps(dict(raw)))
    out.pop("grid", None)
    per = dict(out.get("per_algorithm") or {})
    for a, r in report["algorithms"].items():
        best = r["chosen"]
        if best is None:
            continue
        own = dict(per.get(a) or {})
        own.update(learning_rate=best["learning_rate"], eta=best["eta"])
        for name in r["tuned_shapes"]:
            own.update(dict.fromkeys(SHAPES[name].keys, best[name]))
        per[a] = own
    out["per_algorithm"] = per
    return out


def speed(report: Mapping[str, Any], out: Path, fraction: float = 0.8) -> dict[str, Any]:
    """How fast each winner is on the tuning seeds: the per-seed times of every algorithm's
    chosen point to the target of ``fraction`` (the target rule on the pool of every program
    the tuning ran, extensions included; ``inf``: not reached within the budget), and the
    slowest winner's upper median.  What a report budget has to leave room for: every method
    should reach the target in most seeds (docs/results.md, "Budgets and evaluations").
    ``levels``: each winner's per-seed second-half return, to tell a winner that holds the
    target from one whose noisy evaluations only touch it.  ``out``: the tuning directory."""
    names = sorted({p["program"] for r in report["algorithms"].values() for p in r["points"]})
    target = pooled_target([Path(out) / "runs" / name for name in names], fraction)
    times, levels = {}, {}
    for a, r in report["algorithms"].items():
        best = r["chosen"]
        if best is not None:
            run = run_data.load_run(Path(out) / "runs" / best["program"])
            method = run.methods[best["method"]]
            values = method.statistic("time", run.budget, target["value"])
            times[a] = [float(t) for t in values]
            levels[a] = [float(v) for v in method.statistic("second_half", run.budget)]
    medians = [float(stats.median_time(np.asarray(t))) for t in times.values()]
    return {"target": target, "times": times, "levels": levels,
            "slowest_median": max(medians, default=math.nan)}  # fmt: skip


def _open(out: Path, record: dict, *, resume: bool, overwrite: bool) -> None:
    """Prepares ``out`` (or checks that it holds the same request, to resume) and records it."""
    from jaxnigt import files

    if resume:
        if not (out / RECORD).is_file():
            raise TuningError(f"{str(out)!r} is not a tuning directory (no {RECORD})",
                              param="resume")  # fmt: skip
        if json.loads((out / RECORD).read_text()) != record:
            raise TuningError(f"{str(out)!r} holds a different tuning request", param="resume")
    else:
        files.prepare_run_dir(out, overwrite)
    files.atomic_write_text(out / RECORD, json.dumps(record, indent=2) + "\n")


def _write(out: Path, raw, report: Mapping[str, Any], seeds) -> None:
    """Writes ``tuning.json`` and ``tuned.yaml`` (checked as a config first)."""
    import yaml

    from jaxnigt import config as config_lib
    from jaxnigt import files

    files.atomic_write_text(out / TABLE, json.dumps(report, indent=2) + "\n")
    written = tuned_raw(raw, report)
    config_lib.from_dict(_runnable(written))
    header = (
        f"# Tuned by: {report['command']}\n# Grid searched on seeds {', '.join(map(str, seeds))} "
        f"(never reported), score: {report['score']}; every point in {TABLE}.\n"
    )
    files.atomic_write_text(out / TUNED, header + yaml.safe_dump(written, sort_keys=False))


class _Searches:
    """Every algorithm's search of one tuning (:func:`drive`), its programs run by a
    :class:`jaxnigt.processes.Pool` of ``jobs``; ``report`` gets a time statistic's target."""

    def __init__(self, raw, cfg, out: Path, grid: Grid, seeds, statistic: str, report: dict, *,
                 log, progress: bool, jobs: int, stop):  # fmt: skip
        self.raw, self.out, self.grid, self.seeds = raw, out, grid, seeds
        self.statistic, self.report, self.log = statistic, report, log
        self.progress, self.jobs, self.stop = progress, jobs, stop
        self.cfg = cfg  # ``raw`` parsed
        self.hp: dict[str, Any] = {}
        self.runs: dict[str, list[str]] = {}
        self.asked: dict[int, tuple] = {}  # job id -> (algorithm, shapes, exponents, run dir)
        self.pool = None

    def run(self, algorithms: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``{algorithm: search result}`` (:func:`search`'s)."""
        from jaxnigt import processes

        self.hp = {a: self.cfg.hparams_for(a) for a in algorithms}
        self.runs = {a: [] for a in algorithms}
        steps = functools.partial(search_steps, max_extensions=self.grid.max_extensions,
                                  log=self.log)  # fmt: skip
        searches = {a: steps(self.grid.lr_exp, _programs(a, self.grid), name=a)
                    for a in algorithms}  # fmt: skip
        timed = self.statistic in stats.TIME_STATISTICS
        with processes.Pool(_run_job, workers=self.jobs, stop=self.stop) as self.pool:
            return drive(searches, self.submit, self.pool.wait, self.score,
                         first_rounds=self.first_rounds if timed else None)  # fmt: skip

    def submit(self, a: str, shapes, exps) -> int:
        program, run_dir, line = _plan(self.raw, a, self.hp[a], self.out, self.grid, shapes,
                                       exps, self.seeds)  # fmt: skip
        self.log(line)
        alone = self.jobs == 1
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
        points = []
        for i in ids:
            _, shapes, exps, run_dir = self.asked[i]
            self.runs[a].append(str(run_dir))
            points += score_run(run_dir, self.statistic, exps, _etas(a, self.hp[a], self.grid),
                                {"M": self.hp[a].M, **shapes}, target)  # fmt: skip
        return points


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
) -> dict[str, Any]:
    """Tunes ``algorithms`` of the config ``raw`` (read from ``source``; ``command`` is
    recorded) into ``out`` (the module docstring); writes ``tuning.json`` and ``tuned.yaml``
    there and returns the report.  ``stop`` (``signals.stop_on_signals``) ends it after the
    current chunk (``signals.Interrupted``); ``resume`` continues it.

    ``jobs`` > 1 runs that many programs at once, one process each (the module docstring,
    "Scheduling"; their lines prefixed by the program's directory, no progress bars); the
    results do not depend on it, and it is not part of the request."""
    from jaxnigt import config as config_lib

    seeds = tuple(seeds)
    algorithms = check_request(raw, algorithms, grid, seeds, statistic)
    if jobs < 1:
        raise TuningError(f"got {jobs}; expected >= 1", param="jobs")
    out = Path(out)
    record = {"config": dict(raw), "algorithms": algorithms, "grid": grid.record(),
              "seeds": list(seeds), "statistic": statistic}  # fmt: skip
    _open(out, json.loads(json.dumps(record)), resume=resume, overwrite=overwrite)
    timed = statistic in stats.TIME_STATISTICS
    cfg = config_lib.from_dict(_runnable(raw))
    report = {
        "config": source, "command": command, "statistic": statistic,
        "score": ("minus the mean over the tuning seeds of " if timed else
                  "mean over the tuning seeds of ") + SCORED[statistic],
        "tie_rule": TIE_RULE, "budget": cfg.budget, "tune_seeds": list(seeds),
        "grid": grid.record(), "algorithms": {},
    }  # fmt: skip
    searches = _Searches(raw, cfg, out, grid, seeds, statistic, report, log=log, progress=progress,
                         jobs=jobs, stop=stop)  # fmt: skip
    for a, result in searches.run(algorithms).items():
        names = tuned_shapes(a, grid)
        result.update(eta=list(_etas(a, searches.hp[a], grid)),
                      M=list(grid.shapes["M"]) if "M" in names else [searches.hp[a].M])  # fmt: skip
        result.update({name: list(grid.shapes[name]) for name in names if name != "M"})
        result.update(runs=searches.runs[a], M_tuned="M" in names, tuned_shapes=list(names))
        report["algorithms"][a] = result
    report["speed"] = speed(report, out)
    _write(out, raw, report, seeds)
    return report
