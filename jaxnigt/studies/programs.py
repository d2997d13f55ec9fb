"""The tuning's programs: one program is one algorithm at one value of each shape it tunes,
over a grid of α (and η), run as a normal run directory ``DIR/runs/<algorithm><tag>_lr<A>..<B>/``.
Here are its raw config, its directory and the line that announces it, and running it, in
this process or as a job of :mod:`jaxnigt.run.executors`, or (:class:`PaddedPool`) every
program of a round that differs only in the sizes a run can carry (M, m, ...) together, as
one padded program (:mod:`jaxnigt.run.padded`).  :mod:`jaxnigt.studies.tuning` describes the
protocol."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxnigt.run.processes import JobQueue
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


class PaddedPool(JobQueue):
    """The executor interface (:mod:`jaxnigt.run.executors`) over tuning programs, run here:
    :meth:`wait` runs every program submitted since the last call, those of one algorithm
    that differ only in run sizes (Rennala's M grid) as one padded program
    (:func:`jaxnigt.run.padded.group`), and writes each program's own run directory
    (:func:`jaxnigt.run.experiment.record_algorithm`).  The padded program's checkpoints go
    to ``DIR/.programs/`` (``checkpoints``), so an interrupted tuning resumes it."""

    def __init__(self, checkpoints: Path, *, progress: bool, log, stop=None):
        super().__init__()
        self.checkpoints, self.progress, self.log, self.stop = checkpoints, progress, log, stop

    def close(self) -> None:
        """Nothing runs between calls of :meth:`wait`."""

    def wait(self) -> list[int]:
        """Runs every queued program (grouped); returns their ids."""
        from jaxnigt import config as config_lib
        from jaxnigt.run import checkpoint, padded

        if not self.queued:
            raise ValueError("wait: no job is queued or running")
        ids, self.queued = self.queued, []
        todo = []
        for i in ids:
            cfg, run_dir = config_lib.from_dict(self.jobs[i][0]), Path(self.jobs[i][1])
            if checkpoint.finished(run_dir, cfg):
                self.log(f"[tune] {run_dir}: finished earlier with this config; kept")
            else:
                todo.append((i, cfg, run_dir))
        for algorithm in dict.fromkeys(cfg.algorithms[0] for _, cfg, _ in todo):
            mine = [t for t in todo if t[1].algorithms[0] == algorithm]
            for members in padded.group([cfg for _, cfg, _ in mine], algorithm):
                self._run([mine[j] for j in members], algorithm)
        self.reported.update(ids)
        return ids

    def _run(self, members, algorithm: str) -> None:
        import hashlib

        configs, run_dirs = [cfg for _, cfg, _ in members], [d for _, _, d in members]
        if len(members) == 1:
            run_program(
                configs[0], run_dirs[0], progress=self.progress, log=self.log, stop=self.stop
            )
            return
        names = "\n".join(str(d) for d in run_dirs)
        where = self.checkpoints / f"{algorithm}_{hashlib.sha1(names.encode()).hexdigest()[:10]}"
        self.log(f"[tune] {algorithm}: {len(members)} programs as one padded program -> {where}")
        run_together(
            configs,
            run_dirs,
            algorithm,
            where,
            progress=self.progress,
            log=self.log,
            stop=self.stop,
        )


def run_together(configs, run_dirs, algorithm: str, where: Path, *, progress: bool, log, stop=None):
    """Tuning programs of ``algorithm`` as one padded program (:mod:`jaxnigt.run.padded`), its
    checkpoints in ``where``; each program's results written to its own run directory."""
    from jaxnigt.run import experiment, padded
    from jaxnigt.run.loop import run_algorithm

    where.mkdir(parents=True, exist_ok=True)
    prepared = padded.prepare(configs, algorithm)
    how = {"progress": progress, "log": log, "stop": stop, "prepared": prepared}
    m = run_algorithm(configs[0], algorithm, run_dir=where, resume=True, **how)
    for cfg, run_dir, part in zip(
        configs, run_dirs, padded.split(m, configs, algorithm), strict=True
    ):
        experiment.record_algorithm(cfg, run_dir, algorithm, part, plot=False, fresh=True)
