"""Seeds and hyperparameter grids as one vmapped program vs one run after another.

* **seeds**: 8 seeds of ``rennala_nigt`` as ``jit(vmap(run_chunk))`` at batch 8, vs the same
  8 runs one after another through the same jitted function at batch 1 (one compile per
  batch shape, both in this process).
* **grid**: the config's 4 × 2 learning-rate × η grid (``grid:`` section, expanded by
  ``jaxnigt.run.batch.grid_points``), one seed per point, through the *same* batch-8 program
  (the values are traced, so the grid must not recompile) vs sequential batch-1 runs.

``speedup = wall(sequential) / wall(vmapped)`` (interleaved medians). Compile time is
reported separately: the first call minus the median of the later ones.

Usage::

    python scripts/bench.py seeds [--quick]
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
from benchmarks.common import format_table, interleaved, make_config

from jaxnigt.run import batch
from jaxnigt.run.trainer import make_trainer

SEEDS = 8
GRID = {"learning_rate": [0.0078125, 0.015625, 0.03125, 0.0625], "eta": [0.01, 0.1]}


def _cache_size(fn) -> int | None:
    try:
        return int(fn._cache_size())
    except Exception:
        return None


def _first_call(fn, *args) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0


def run(quick: bool = False, env: str = "reacher", M: int = 20, n: int = 10) -> list[dict]:
    rounds = 3 if quick else 10
    reps = 2 if quick else 3
    cfg = make_config(env, n=n, M=M, horizon=50 if env == "reacher" else None, grid=GRID)
    tr = make_trainer(cfg, "rennala_nigt")
    init = jax.jit(jax.vmap(tr.init))
    program = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, rounds)))

    keys = batch.seed_keys(cfg, SEEDS)
    seeds_state = init(keys, tr.hyper(batch=SEEDS))
    points = batch.grid_points(cfg, "rennala_nigt")
    grid_hyper = {
        k: jnp.asarray([p[k] for p in points], jnp.float32) for k in ("learning_rate", "eta")
    }
    grid_hyper["gamma"] = jnp.full((len(points),), tr.hparams.gamma, jnp.float32)
    grid_state = init(jnp.concatenate([batch.seed_keys(cfg, 1)] * len(points)), grid_hyper)
    one = lambda st, i: jax.tree.map(lambda x: x[i : i + 1], st)

    first_b = _first_call(program, seeds_state)
    size_after_b = _cache_size(program)
    first_1 = _first_call(program, one(seeds_state, 0))
    first_grid = _first_call(program, grid_state)
    recompiled_grid = (
        None if size_after_b is None else _cache_size(program) - size_after_b - 1  # minus batch 1
    )

    def sequential(st, count):
        return [program(one(st, i)) for i in range(count)]

    med = interleaved(
        {
            "seeds_vmap": lambda: program(seeds_state),
            "seeds_seq": lambda: sequential(seeds_state, SEEDS),
            "grid_vmap": lambda: program(grid_state),
            "grid_seq": lambda: sequential(grid_state, len(points)),
        },
        reps,
    )
    steps = rounds * M * tr.setup.horizon
    common = {"env": env, "n": n, "M": M, "rounds": rounds, "reps": reps}
    return [
        {
            **common,
            "case": f"{SEEDS} seeds",
            "batch": SEEDS,
            "vmap_s": med["seeds_vmap"],
            "seq_s": med["seeds_seq"],
            "speedup": med["seeds_seq"] / med["seeds_vmap"],
            "vmap_steps_per_s": SEEDS * steps / med["seeds_vmap"],
            "seq_steps_per_s": SEEDS * steps / med["seeds_seq"],
            "compile_vmap_s": first_b - med["seeds_vmap"],
            "compile_batch1_s": first_1 - med["seeds_seq"] / SEEDS,
            "recompiles": None,
        },
        {
            **common,
            "case": f"grid {len(GRID['learning_rate'])}x{len(GRID['eta'])}",
            "batch": len(points),
            "vmap_s": med["grid_vmap"],
            "seq_s": med["grid_seq"],
            "speedup": med["grid_seq"] / med["grid_vmap"],
            "vmap_steps_per_s": len(points) * steps / med["grid_vmap"],
            "seq_steps_per_s": len(points) * steps / med["grid_seq"],
            # The grid reuses the batch-8 program: its first call is a plain run.
            "compile_vmap_s": max(first_grid - med["grid_vmap"], 0.0),
            "compile_batch1_s": 0.0,
            "recompiles": recompiled_grid,
        },
    ]


COLUMNS = (
    ("case", "case", ""),
    ("env", "env", ""),
    ("M", "M", "d"),
    ("rounds", "R", "d"),
    ("vmap_s", "vmapped s", ".2f"),
    ("seq_s", "sequential s", ".2f"),
    ("speedup", "speedup", ".2f"),
    ("vmap_steps_per_s", "vmap steps/s", ",.0f"),
    ("seq_steps_per_s", "seq steps/s", ",.0f"),
    ("compile_vmap_s", "compile vmap s", ".1f"),
    ("compile_batch1_s", "compile b=1 s", ".1f"),
    ("recompiles", "recompiles", ""),
)


def format_rows(rows: list[dict]) -> str:
    return format_table(rows, COLUMNS)
