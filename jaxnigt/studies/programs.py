"""The tuning's programs: one program is one algorithm at one value of each shape it tunes,
over a grid of α (and η), run as a normal run directory ``DIR/runs/<algorithm><tag>_lr<A>..<B>/``.
Here are its raw config, its directory and the line that announces it, and running it, in
this process or as a job of :mod:`jaxnigt.run.executors`.  :mod:`jaxnigt.studies.tuning`
describes the protocol."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxnigt.studies.grid import SHAPES, Grid


def program_raw(
    raw: Mapping[str, Any], algorithm: str, shapes: Mapping[str, int], exps, etas, seeds
) -> dict:
    """The raw config of one tuning program: one algorithm, its ``shapes`` values
    (``{name: value}``, :data:`SHAPES` names; none: the config's), the (α × η) grid."""
    out = json.loads(json.dumps(without_sweep(raw)))
    out.update(name=f"tune_{algorithm}{program_tag(shapes)}", algorithms=[algorithm], seed=seeds[0])
    out.update(seeds=len(seeds), on_nonfinite="mark", target_return=None)
    per = dict(out.get("per_algorithm") or {})
    own = {
        k: v for k, v in dict(per.get(algorithm) or {}).items() if k not in ("learning_rate", "eta")
    }
    for name, value in shapes.items():
        own.update(dict.fromkeys(SHAPES[name].keys, int(value)))
    out["per_algorithm"] = {algorithm: own} if own else {}
    out["grid"] = {"learning_rate": [2.0**e for e in exps], "eta": [float(e) for e in etas]}
    return out


def run_program(cfg, run_dir: Path, *, progress: bool, log, stop=None) -> None:
    """Runs one tuning program into ``run_dir`` unless it already holds it finished."""
    from jaxnigt.run import checkpoint, experiment
    from jaxnigt.run.run_dir import check_resumable

    if checkpoint.finished(run_dir, cfg):
        log(f"[tune] {run_dir}: finished earlier with this config; kept")
        return
    again = (run_dir / "config.yaml").is_file()
    if again:
        try:
            check_resumable(cfg, run_dir)
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


def program_etas(algorithm: str, hp, grid: Grid) -> tuple[float, ...]:
    from jaxnigt.algorithms import traits

    return grid.eta if "eta" in traits(algorithm).step_sizes else (float(hp.eta),)


def without_sweep(raw: Mapping[str, Any]) -> dict:
    """``raw`` without its ``sweep:`` section (read by ``jaxnigt sweep`` only)."""
    return {k: v for k, v in raw.items() if k != "sweep"}


def tuned_shapes(algorithm: str, grid: Grid) -> tuple[str, ...]:
    """The shapes of ``grid`` that ``algorithm`` tunes (its ``Traits.tuned_shapes``), in
    :data:`SHAPES` order."""
    from jaxnigt.algorithms import traits

    own = traits(algorithm).tuned_shapes
    return tuple(s for s in SHAPES if s in grid.shapes and s in own)


def program_shapes(algorithm: str, grid: Grid) -> list[dict[str, int]]:
    """The shape values ``{name: value}`` of each of ``algorithm``'s programs: the product of
    the values of the shapes it tunes (``[{}]``: one program, the config's values)."""
    names = tuned_shapes(algorithm, grid)
    values = itertools.product(*(grid.shapes[s] for s in names))
    return [dict(zip(names, v, strict=True)) for v in values]


def program_tag(shapes: Mapping[str, int]) -> str:
    """The program's name suffix: ``_M20``, ``_msync_m3``, ``_ringmaster_R10``, ..."""
    return "".join(f"_{name}{value}" for name, value in shapes.items())


def plan_program(
    raw, algorithm, hp, out: Path, grid: Grid, shapes, exps, seeds
) -> tuple[dict, Path, str]:
    """One tuning program of ``algorithm`` (``hp``: its hparams in ``raw``): ``(its raw
    config, its run directory, a line that announces it)``."""
    from jaxnigt import config as config_lib

    etas = program_etas(algorithm, hp, grid)
    program = program_raw(raw, algorithm, shapes, exps, etas, seeds)
    config_lib.from_dict(program)  # a bad program stops here, before any runs of its round
    run_dir = out / "runs" / f"{algorithm}{program_tag(shapes)}_lr{min(exps)}..{max(exps)}"
    values = "".join(f" {name}={value}" for name, value in shapes.items())
    line = (
        f"[tune] {algorithm}{values}: α = 2^{min(exps)} … "
        f"2^{max(exps)} ({len(exps)}) × η {', '.join(f'{e:g}' for e in etas)} × "
        f"{len(seeds)} seeds -> {run_dir}"
    )
    return program, run_dir, line


def run_job(program: dict, run_dir: str, progress: bool, log=None, *, stop=None) -> None:
    """One program as a job of :func:`jaxnigt.run.processes.run_all` (``log`` None, in a child:
    lines printed with the program's name)."""
    from jaxnigt import config as config_lib

    if log is None:
        name = Path(run_dir).name

        def log(line: str) -> None:
            print(f"[{name}] {line}", flush=True)

    run_program(config_lib.from_dict(program), Path(run_dir), progress=progress, log=log, stop=stop)
