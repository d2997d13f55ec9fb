"""``jaxnigt plan``: what a config will cost, without running it.

Per algorithm of a config: the trajectories one step rolls out and the simulated time a step
takes (from the algorithm's clock alone, :attr:`~jaxnigt.algorithms.core.Algorithm.
simulate_clock`, averaged over a few simulated steps), the steps and updates the budget
allows, the environment steps that implies (an upper bound for tasks that terminate), the
device memory of one step of the real vmapped program (``memory_analysis()`` of its compiled
form: arguments + outputs + temporaries), and, when this backend has benchmark figures in the
table shipped with the package (``plan_figures.json``), an estimated wall time.  Users pick
n, M and seeds per device from it.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

import jax

from jaxnigt.batch import batch_size
from jaxnigt.config import ExperimentConfig

CLOCK_STEPS = 16


def figures(backend: str | None = None) -> dict[str, dict]:
    """Benchmark figures of ``backend`` (default: JAX's) from ``plan_figures.json``."""
    table = json.loads(resources.files("jaxnigt").joinpath("plan_figures.json").read_text())
    return table.get(backend or jax.default_backend(), {})


def memory_bytes(tr, batch: int) -> int:
    """Device memory of one step of the vmapped program over ``batch`` runs (compiled)."""
    keys = jax.random.split(jax.random.key(0), batch)
    state = jax.eval_shape(jax.vmap(tr.init), keys, tr.hyper(batch=batch))
    program = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, 1)))
    stats = program.lower(state).compile().memory_analysis()
    return int(stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes)


def plan_algorithm(config: ExperimentConfig, algorithm: str, *, memory: bool = True) -> dict:
    """One row of the plan: ``algorithm``'s cost under ``config`` (the module docstring);
    ``memory=False`` skips compiling a step (``memory_mb`` None)."""
    from jaxnigt.trainer import make_trainer

    tr = make_trainer(config, algorithm)
    per_step, step_time = tr.clock(CLOCK_STEPS)
    steps = config.budget / step_time if config.budget is not None else math.inf
    if config.max_rounds is not None:
        steps = min(steps, config.max_rounds)
    per_update = tr.algorithm.trajectories_per_update
    updates = steps if per_update is None else steps * per_step / per_update
    batch = batch_size(config, algorithm)
    env_steps = steps * per_step * tr.setup.horizon
    row = {
        "algorithm": algorithm,
        "n": tr.setup.n,
        "trajectories_per_step": per_step,
        "step_time": step_time,
        "steps": steps,
        "updates": updates,
        "env_steps_per_run": env_steps,
        "runs": batch,
        "memory_mb": memory_bytes(tr, batch) / 2**20 if memory else None,
    }
    rate = figures().get(config.env.name, {}).get("steps_per_s")
    row["wall_s"] = batch * env_steps / rate if rate else None
    return row


def plan(config: ExperimentConfig, *, memory: bool = True) -> list[dict]:
    """One row per algorithm of ``config`` (see the module docstring)."""
    return [plan_algorithm(config, a, memory=memory) for a in config.algorithms]


def _fmt(v: Any, spec: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    return format(v, spec)


def table(rows: list[dict], config: ExperimentConfig) -> str:
    """The plan as a plain-text table with a header line naming the backend."""
    backend = jax.default_backend()
    head = (
        f"plan: {config.name} on {backend} ({len(jax.devices())} device(s)): "
        f"env {config.env.name}, n = {config.cluster.n}, budget {config.budget}, "
        f"{config.seeds} seed(s) per algorithm"
    )
    cols = [
        ("algorithm", "algorithm", ""),
        ("trajectories_per_step", "traj/step", ".1f"),
        ("step_time", "sim time/step", ".4g"),
        ("steps", "steps", ",.0f"),
        ("updates", "updates", ",.0f"),
        ("env_steps_per_run", "env steps/run (max)", ",.3g"),
        ("runs", "runs", "d"),
        ("memory_mb", "memory MB/step", ",.0f"),
        ("wall_s", "wall s (est.)", ",.0f"),
    ]
    cells = [[h for _, h, _ in cols]]
    cells += [[_fmt(r[k], f) if f else str(r[k]) for k, _, f in cols] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cols))]
    lines = ["  ".join(x.rjust(w) for x, w in zip(c, widths, strict=True)) for c in cells]
    note = figures().get(config.env.name, {}).get("source")
    tail = (
        f"wall time from {note}"
        if note
        else f"no benchmark figures for {backend}: wall not estimated"
    )
    return "\n".join([head, *lines, tail])
