"""The GPU benchmark's study rows: a sweep's padded programs against the card's rollout rate.

A study is a ``jaxnigt sweep`` command; the default (:data:`STUDIES`) is reacher over n ∈
{10, 30, 100} × 5 seeds, Rennala NIGT over M = M_init ∈ {20, 30, 50} and Sync NIGT over
three step sizes (it does not read M, and a sweep refuses an axis that cannot change an
algorithm's runs): 45 runs each.  Its points are built and grouped as the command builds and
groups them (:func:`jaxnigt.studies.sweep.sweep_points`,
:func:`jaxnigt.studies.sweep_programs.programs`) and each program is the library's padded
program (:func:`jaxnigt.run.padded.prepare`), so a row measures what the sweep runs: its
first evaluation chunk (``eval.every_time`` of simulated time, then the evaluation), from the
state after ``init`` (and round 0 when it has its own shape).

Each row follows the GPU benchmark's conventions: the first call compiles and warms up (JAX's
own compile events give ``lower_s``, tracing and lowering, and ``compile_s``, the backend),
then the median of ``reps`` calls from the same state.  *Alive steps* are the runs' counted
environment steps (``counters.env_steps``: padded slots and evaluation episodes excluded);
``over_rollout`` divides their rate by the reference rollout's (the same card, the study's
environment, batch 4,096).  *Point by point* runs each point's own program, as ``jaxnigt sweep
--per-point`` does (:func:`jaxnigt.run.loop.programs_for`), and sums them; each algorithm's
points run only when the padded program's time times their number fits before the deadline.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from types import SimpleNamespace

import jax
import numpy as np

_STUDY = "configs/reacher_n10.yaml --over cluster.n=10,30,100 --seeds 5 --over "
STUDIES = (
    _STUDY + "hparams.M=20,30,50 --set hparams.M_init=null --set algorithms=[rennala_nigt]",
    _STUDY + "hparams.learning_rate=0.015625,0.03125,0.0625 --set algorithms=[sync_nigt]",
)


def load(text: str) -> SimpleNamespace:
    """The study of ``jaxnigt sweep`` arguments ``text``: ``command``, ``points``,
    ``programs`` (parsed by the command's own parser; its ``--max-padding`` applies)."""
    from jaxnigt import config as config_lib
    from jaxnigt.cli import build_parser
    from jaxnigt.cli.common import resolve_config
    from jaxnigt.cli.grids import parse_over
    from jaxnigt.studies import sweep, sweep_programs

    args = build_parser().parse_args(["sweep", *shlex.split(text)])
    with contextlib.ExitStack() as stack:  # a file, or else a bundled config of that name
        raw = config_lib.read(resolve_config(args.config, stack))
    sets = list(args.set or []) + ([f"seeds={args.seeds}"] if args.seeds is not None else [])
    config_lib.apply_overrides(raw, sets)
    points = sweep.sweep_points(raw, parse_over(args.over or []), sets)
    return SimpleNamespace(
        command=shlex.join(["jaxnigt", "sweep", *shlex.split(text)]),
        points=points,
        programs=sweep_programs.programs(points, args.max_padding),
    )


@contextlib.contextmanager
def _compile_events(out: dict):
    """Adds JAX's compile events inside the block to ``out``: the backend's to
    ``compile_s``, tracing and lowering to ``lower_s`` (the events a run's compile time
    counts, :data:`jaxnigt.run.progress.COMPILE_EVENTS`)."""
    from jaxnigt.run.progress import COMPILE_EVENTS

    def listener(event: str, seconds: float, **kwargs) -> None:
        del kwargs
        if event in COMPILE_EVENTS:
            out["compile_s" if "backend" in event else "lower_s"] += seconds

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def _timed(init, first_step, program, keys, hyper, budgets, reps: int) -> dict:
    """One program's figures: init (and round 0) then its first chunk, compiled by the
    first call, then the median of ``reps`` calls from the same state."""
    from jaxnigt.run.batch import eval_keys

    figures = {"lower_s": 0.0, "compile_s": 0.0}
    ekeys, train = eval_keys(keys, 1), np.bool_(True)
    t0 = time.perf_counter()
    with _compile_events(figures):
        state = init(keys, hyper)
        if first_step is not None:
            state = first_step(state, budgets)[0]
        new, metrics, _ = jax.block_until_ready(program(state, ekeys, train, budgets))
    figures["first_chunk_s"] = time.perf_counter() - t0
    walls = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(program(state, ekeys, train, budgets))
        walls.append(time.perf_counter() - t0)
    wall = float(np.median(walls))
    steps = float(np.sum(np.asarray(new.counters.env_steps) - np.asarray(state.counters.env_steps)))
    return figures | {
        "chunk_steps": int(np.asarray(metrics["active"]).sum(axis=1).max()),
        "alive_steps": steps,
        "alive_steps_per_s": steps / wall,
        "wall_s": wall,
        "reps": reps,
    }


def padded_row(study, prog, reps: int) -> dict:
    """The row of one of the study's programs, as ``jaxnigt sweep`` builds it (a program of
    one point is that point's own run)."""
    from jaxnigt.run import padded
    from jaxnigt.studies import sweep_programs

    configs = [study.points[i].config for i in prog.members]
    if len(configs) == 1:
        return _point_row(study, prog.members[0], prog.algorithm, reps) | {"study": "padded"}
    t0 = time.perf_counter()
    run = padded.prepare(configs, prog.algorithm)
    prepare_s = time.perf_counter() - t0
    figures = _timed(
        run.init, run.first_step, run.program, run.keys, run.hyper, run.budgets, reps
    )  # fmt: skip
    return _common(study, prog.algorithm, configs[0]) | {
        "study": "padded",
        "points": len(configs),
        "runs": prog.runs,
        "n_max": prog.n_max,
        "M_max": prog.M_max,
        **sweep_programs.measure(study.points, prog),
        "prepare_s": prepare_s,
        **figures,
    }


def _point_row(study, i: int, algorithm: str, reps: int) -> dict:
    """Point ``i``'s own program, as ``jaxnigt sweep --per-point`` runs it."""
    import jax.numpy as jnp

    from jaxnigt.run import loop, padded
    from jaxnigt.run.batch import batch_size, grid_points, seed_keys
    from jaxnigt.studies import sweep_programs

    cfg = study.points[i].config
    batch, grid = batch_size(cfg, algorithm), grid_points(cfg, algorithm)
    t0 = time.perf_counter()
    progs = loop.programs_for(cfg, algorithm, batch)
    keys = jnp.concatenate([seed_keys(cfg, cfg.seeds)] * len(grid))
    values = {k: np.asarray([p[k] for p in grid for _ in range(cfg.seeds)]) for k in grid[0]}
    hyper = progs.trainer.hyper(batch=batch, **values)
    budget = cfg.budget if cfg.budget is not None else np.inf
    budgets = np.full(batch, budget, np.float32)
    prepare_s = time.perf_counter() - t0
    figures = _timed(progs.init, progs.first_step, progs.chunk, keys, hyper, budgets, reps)
    sizes = padded.sizes(cfg, algorithm)
    prog = sweep_programs.Program(algorithm, (i,), batch, sizes.n, sizes.M)
    return _common(study, algorithm, cfg) | {
        "study": "point",
        "point": study.points[i].name,
        "points": 1,
        "runs": batch,
        "n_max": sizes.n,
        "M_max": sizes.M,
        **sweep_programs.measure(study.points, prog),
        "prepare_s": prepare_s,
        **figures,
    }


def _common(study, algorithm: str, cfg) -> dict:
    return {
        "algorithm": algorithm,
        "env": cfg.env.name,
        "command": study.command,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
    }


def estimate_s(row: dict, programs: int) -> float:
    """Seconds ``programs`` programs like the measured ``row`` take (prepare, compile, first
    chunk and the timed calls of each): what the deadline logic checks before starting."""
    return programs * (row["prepare_s"] + row["first_chunk_s"] + row["reps"] * row["wall_s"])


def point_by_point(study, prog, padded: dict, reps: int, left) -> list[dict]:
    """Each point of ``prog`` in its own program, then their sum against ``padded`` (the
    padded program's row); skipped, with the estimate, when ``left()`` (seconds before the
    deadline) is smaller than the estimate, or when a point would start past it."""
    k = len(prog.members)
    head = {"study": "point by point", "algorithm": prog.algorithm, "command": study.command}
    if "skipped" in padded:
        return [head | {"skipped": "deadline (no padded row to compare)"}]
    need, remaining = estimate_s(padded, k), left()
    if need > remaining:
        late = f"deadline: about {need:.0f} s for {k} programs, {max(remaining, 0):.0f} s left"
        return [head | {"skipped": late}]
    rows = []
    for i in prog.members:
        if left() <= 0:
            return [*rows, head | {"skipped": f"deadline after {len(rows)} of {k} points"}]
        rows.append(_point_row(study, i, prog.algorithm, reps))
    return [*rows, summary(rows, padded)]


def summary(points: list[dict], padded: dict) -> dict:
    """The point-by-point sum of ``points`` (each point's row) and the padded row's ratios
    to it: the steady-state rate, the compile time and the time to the first chunk."""
    steps = sum(r["alive_steps"] for r in points)
    wall = sum(r["wall_s"] for r in points)
    rate = steps / wall
    total = lambda key: sum(r[key] for r in points)
    return {
        "study": "point by point",
        "algorithm": padded["algorithm"],
        "env": padded["env"],
        "points": len(points),
        "programs": len(points),
        "runs": total("runs"),
        "n_max": max(r["n_max"] for r in points),
        "M_max": max(r["M_max"] for r in points),
        "trajectories_per_step": max(r["trajectories_per_step"] for r in points),
        "alive_steps": steps,
        "alive_steps_per_s": rate,
        "wall_s": wall,
        "programs_lower_s": total("lower_s"),
        "programs_compile_s": total("compile_s"),
        "programs_first_chunk_s": total("prepare_s") + total("first_chunk_s"),
        "padded_rate_over_point_by_point": padded["alive_steps_per_s"] / rate,
        "padded_compile_over_point_by_point": (padded["lower_s"] + padded["compile_s"])
        / (total("lower_s") + total("compile_s")),
        "padded_first_chunk_over_point_by_point": (padded["prepare_s"] + padded["first_chunk_s"])
        / (total("prepare_s") + total("first_chunk_s")),
        "same_alive_steps": steps == padded["alive_steps"],
        "command": padded["command"],
    }


def with_reference(rows: list[dict], reference: dict | None) -> None:
    """Adds each measured row's ratio to the reference rollout's rate (in place; rows of
    another environment have none)."""
    for r in rows:
        if reference is not None and "alive_steps_per_s" in r and r["env"] == reference["env"]:
            r["over_rollout"] = r["alive_steps_per_s"] / reference["alive_steps_per_s"]
            r["rollout"] = f"rollout+pg {reference['env']} batch {reference['rollout_batch']:,}"


COLUMNS = (
    ("study", "study", ""),
    ("algorithm", "algorithm", ""),
    ("env", "env", ""),
    ("points", "points", ""),
    ("runs", "runs", ""),
    ("n_max", "n max", ""),
    ("trajectories_per_step", "trajectories/step", ",.0f"),
    ("chunk_steps", "steps/chunk", ""),
    ("alive_steps_per_s", "alive steps/s", ",.0f"),
    ("over_rollout", "/ rollout", ".3f"),
    ("prepare_s", "prepare s", ".1f"),
    ("lower_s", "lower s", ".1f"),
    ("compile_s", "compile s", ".1f"),
    ("programs_compile_s", "compile s (all)", ".1f"),
    ("padded_rate_over_point_by_point", "padded rate / point by point", ".2f"),
    ("skipped", "skipped", ""),
)


def table_rows(rows: list[dict]) -> list[dict]:
    """The rows of the study table: each padded program and each point-by-point sum (every
    point's own row stays in the JSON)."""
    return [r for r in rows if r.get("study") in ("padded", "point by point")]


def notes(rows: list[dict]) -> list[str]:
    """A line per study command measured, and the reference of the ratios."""
    out = []
    for command in dict.fromkeys(r["command"] for r in table_rows(rows)):
        out.append(f"Study: `{command}`")
    for rollout in dict.fromkeys(r["rollout"] for r in table_rows(rows) if "rollout" in r):
        out.append(f"`/ rollout`: alive steps/s over those of the {rollout}, lanes 1.0 (this run)")
    return out


def ratio_lines(rows: list[dict]) -> list[str]:
    """A summary line per measured study row: its rate, its ratio to the rollout and, point
    by point, the padded program's ratios."""
    out = []
    for r in table_rows(rows):
        if "skipped" in r:
            continue
        line = f"gpu study {r['algorithm']} {r['study']} ({r['runs']} runs): "
        line += f"{r['alive_steps_per_s']:,.0f} alive steps/s"
        if "over_rollout" in r:
            line += f", {r['over_rollout']:.3f} x the {r['rollout']}"
        if "padded_rate_over_point_by_point" in r:
            line += (
                f"; padded / point by point: rate {r['padded_rate_over_point_by_point']:.2f}, "
                f"compile {r['padded_compile_over_point_by_point']:.2f}"
            )
        out.append(line)
    return out
