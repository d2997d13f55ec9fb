"""A sweep's programs: each algorithm's points grouped into padded programs, and running them.

:func:`programs` says which points of a sweep share a program (:func:`jaxnigt.run.padded.group`)
and what each program is: its points, runs (points × grid points × seeds), bounds and the
trajectories it rolls out per step (``jaxnigt plan`` prints them).  :func:`run_grouped` runs
them, algorithm by algorithm, and writes each point's run directory as the point's own run
would (:func:`jaxnigt.run.experiment.record_algorithm`): ``DIR/<point>/``, with every
program's checkpoints in ``DIR/.programs/<algorithm>_<id>/`` (a resumed sweep continues from
them).  A program of one point is that point's own run, unpadded.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

PROGRAMS_DIR = ".programs"
STATUS = "status.json"  # a failed point's record


class Program(NamedTuple):
    """One program of a sweep.

    Attributes:
      algorithm: its algorithm.
      members: indices of its points (in the sweep's order).
      runs: runs in its batch (points × grid points × seeds).
      n_max: its workers (the largest n of its points).
      M_max: its largest M.
    """

    algorithm: str
    members: tuple[int, ...]
    runs: int
    n_max: int
    M_max: int

    def directory(self, out: Path, names: Sequence[str]) -> Path:
        """Where its checkpoints go (named by its points, so a resumed sweep finds them)."""
        digest = hashlib.sha1("\n".join(names[i] for i in self.members).encode()).hexdigest()
        return Path(out) / PROGRAMS_DIR / f"{self.algorithm}_{digest[:10]}"


def _algorithms(points) -> list[str]:
    """Every algorithm of the points, in the order of their first appearance."""
    out: list[str] = []
    for p in points:
        out += [a for a in p.config.algorithms if a not in out]
    return out


def programs(points, cap: float | None = None, skip=lambda i, a: False) -> list[Program]:
    """The programs of a sweep's ``points`` (:class:`jaxnigt.studies.sweep.Point`), algorithm
    by algorithm, without the pairs ``skip(point index, algorithm)`` (finished earlier).

    Args:
      points: the sweep's points.
      cap: the largest n_max / n and M_max / M a point may be padded by (None: any).
      skip: which (point, algorithm) pairs to leave out.

    Returns:
      The programs, each algorithm's in order of their first point.
    """
    from jaxnigt.run import padded
    from jaxnigt.run.batch import batch_size

    out = []
    for algorithm in _algorithms(points):
        todo = [
            i
            for i, p in enumerate(points)
            if algorithm in p.config.algorithms and not skip(i, algorithm)
        ]
        configs = [points[i].config for i in todo]
        for members in padded.group(configs, algorithm, cap):
            sizes = [padded.sizes(configs[j], algorithm) for j in members]
            out.append(
                Program(
                    algorithm,
                    tuple(todo[j] for j in members),
                    sum(batch_size(configs[j], algorithm) for j in members),
                    max(s.n for s in sizes),
                    max(s.M for s in sizes),
                )
            )
    return out


def run_grouped(points, out: Path, *, resume: bool, progress: bool, log, stop, cap) -> None:
    """Runs a sweep's points as :func:`programs` and writes each point's run directory.  A
    program of several points that fails runs them again one at a time, so that only the
    points that fail on their own are marked failed (``status.json``); the sweep goes on.
    """
    from jaxnigt.run import checkpoint
    from jaxnigt.run.run_dir import check_resumable

    names = [p.name for p in points]
    failed: dict[int, str] = {}
    written: set[int] = set()  # points whose directory this run has begun
    if resume:
        for i, p in enumerate(points):
            (out / p.name / STATUS).unlink(missing_ok=True)  # a failed point runs again
            if (out / p.name / "config.yaml").is_file():
                check_resumable(p.config, out / p.name)
                written.add(i)
    done = lambda i, a: (
        (out / names[i] / "config.yaml").is_file()
        and a in checkpoint.done_algorithms(out / names[i])
    )
    plan = programs(points, cap, skip=done if resume else (lambda i, a: False))
    for i, point in enumerate(points):
        kept = [a for a in point.config.algorithms if resume and done(i, a)]
        if kept:
            log(f"[sweep] {point.name}: {', '.join(kept)} finished earlier; kept")
    many = "program" if len(plan) == 1 else "programs"
    log(f"[sweep] {len(points)} points in {len(plan)} {many} ({_counts(plan)})")
    for k, prog in enumerate(plan, 1):
        members = [i for i in prog.members if i not in failed]
        if not members:
            continue
        label = f"{prog.algorithm} (program {k} of {len(plan)}: {len(members)} points)"
        log(
            f"[sweep] program {k}/{len(plan)}: {prog.algorithm}, {len(members)} points, "
            f"{prog.runs} runs, n <= {prog.n_max}, M <= {prog.M_max}"
        )
        run = lambda prog, members, label: _run_program(
            points, out, prog, members, names, label, resume, progress, log, stop, written
        )
        message = run(prog, members, label)
        if message is not None and len(members) > 1:  # which point failed? each on its own
            log(f"[sweep] program {k} failed ({message}); its points run one at a time")
            for i in members:
                alone = prog._replace(members=(i,), runs=0, n_max=points[i].config.cluster.n)
                if (message := run(alone, [i], f"{prog.algorithm} ({names[i]})")) is not None:
                    _fail(out, names, failed, i, message, log)
        elif message is not None:
            _fail(out, names, failed, members[0], message, log)


def _counts(plan: list[Program]) -> str:
    per: dict[str, int] = {}
    for prog in plan:
        per[prog.algorithm] = per.get(prog.algorithm, 0) + 1
    return ", ".join(f"{a} {k}" for a, k in per.items())


def _run_program(points, out, prog, members, names, label, resume, progress, log, stop, written):
    """Runs one program and records its points' results; returns a failure's message."""
    from jaxnigt import config as config_lib
    from jaxnigt.run import experiment, padded
    from jaxnigt.run.loop import RunError, run_algorithm

    configs = [points[i].config for i in members]
    algorithm = prog.algorithm
    run_dir = prog.directory(out, names)
    if not resume:
        shutil.rmtree(run_dir, ignore_errors=True)  # an earlier sweep's (--overwrite)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        # A program of one point is that point's own run (no padding).
        prepared = padded.prepare(configs, algorithm) if len(members) > 1 else None
        how = {"progress": progress, "log": log, "stop": stop, "label": label}
        m = run_algorithm(
            configs[0], algorithm, run_dir=run_dir, resume=resume, prepared=prepared, **how
        )
        parts = padded.split(m, configs, algorithm) if prepared is not None else [m]
    except (RunError, config_lib.ConfigError, ValueError, FloatingPointError) as e:
        return str(e)
    for i, part in zip(members, parts, strict=True):
        cfg = points[i].config
        last, fresh = algorithm == cfg.algorithms[-1], i not in written
        experiment.record_algorithm(cfg, out / names[i], algorithm, part, plot=last, fresh=fresh)
        written.add(i)
    return None


def _fail(out: Path, names, failed: dict, i: int, message: str, log) -> None:
    """Point ``i`` failed: its other algorithms are not run, its ``status.json`` says why."""
    failed[i] = message
    log(f"[sweep] {names[i]}: failed: {message}")
    record_failure(out / names[i], message)


def record_failure(run_dir: Path, message: str) -> None:
    """A failed point's ``status.json`` (what :func:`jaxnigt.studies.sweep.table` reports)."""
    from jaxnigt.run.run_dir import atomic_write_text

    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / STATUS, json.dumps({"status": "failed", "message": message}) + "\n")


def per_point(points) -> list[Program]:
    """The programs of a sweep run point by point (``--per-point``): one per point and
    algorithm."""
    from jaxnigt.run import padded
    from jaxnigt.run.batch import batch_size

    return [
        Program(a, (i,), batch_size(p.config, a), p.config.cluster.n, padded.sizes(p.config, a).M)
        for a in _algorithms(points)
        for i, p in enumerate(points)
        if a in p.config.algorithms
    ]


def measure(points, prog: Program) -> dict[str, float]:
    """What one program rolls out and holds: ``trajectories_per_step`` over all its runs
    (each run's clock of the program's bounds: padded slots included) and
    ``memory_floor_mb``, a lower bound of one step's device memory
    (:func:`jaxnigt.run.plan.memory_floor`; nothing compiled)."""
    from jaxnigt.run import padded, plan
    from jaxnigt.run.trainer import make_trainer

    configs = [points[i].config for i in prog.members]
    config = configs[0] if len(configs) == 1 else padded.bound_config(configs, prog.algorithm)
    tr = make_trainer(config, prog.algorithm)
    per_run = tr.clock(plan.CLOCK_STEPS)[0]
    floor = plan.memory_floor(tr, prog.runs)["step"]
    return {"trajectories_per_step": per_run * prog.runs, "memory_floor_mb": floor / 2**20}


def describe(plan: list[Program], names: Sequence[str], measured: Callable[[Program], dict]) -> str:
    """What ``jaxnigt plan`` prints for a sweep's programs: per program its algorithm,
    points, runs, bounds, trajectories per step and memory floor (``measured(program)``,
    :func:`measure`)."""
    lines = [f"{len(plan)} programs ({_counts(plan)}):"]
    for k, prog in enumerate(plan, 1):
        m = measured(prog)
        who = "; ".join(names[i] for i in prog.members)
        lines.append(
            f"  {k}. {prog.algorithm}: {len(prog.members)} points, {prog.runs} runs, "
            f"n <= {prog.n_max}, M <= {prog.M_max}: {m['trajectories_per_step']:,.0f} "
            f"trajectories per step, >= {m['memory_floor_mb']:,.1f} MB per step  [{who}]"
        )
    return "\n".join(lines)
