"""Benchmark: Rennala NIGT runs of different n and M as one padded program vs one program each.

The demo's shapes: point_mass, n ∈ {10, 30, 100} × M ∈ {20, 30, 50}, 5 seeds each. *Separate*
is the library as ``jaxnigt sweep`` runs it today: 9 programs, each vmapped over its 5 seeds.
*Padded* is one program for n_max = 100 and M_max = 50 over all 45 runs: each run's cluster
record padded to 100 workers (:func:`jaxnigt.cluster.padding.pad`), stacked, and vmapped with
its keys and its M (``hyper``). Both run ``R`` rounds from the same keys; the columns are the
programs compiled, their compile seconds, the wall time of the R rounds of all 45 runs
(median of ``reps``), the rollouts a round computes (padded slots included) and the largest
difference between a padded run's parameters and its separate run's (0: bit for bit).

This measures the engine alone; ``jaxnigt sweep`` does not group its points into padded
programs yet.

Usage::

    python scripts/bench.py padding [--quick]
"""

from __future__ import annotations

import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np
from benchmarks.common import make_config

from jaxnigt.cluster import padding
from jaxnigt.run.batch import seed_keys
from jaxnigt.run.trainer import make_trainer

NS, MS, SEEDS = (10, 30, 100), (20, 30, 50), 5


def _trainer(env, n, M, horizon):
    cfg = make_config(env, n=n, M=M, horizon=horizon, seeds=SEEDS, noise="straggler:0.1:10")
    return cfg, make_trainer(cfg, "rennala_nigt")


def _timed(fn, *args, reps):
    """``(compile seconds, median wall seconds, outputs)`` of ``jax.jit(fn)(*args)``."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - start
    walls, out = [], None
    for _ in range(reps):
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        walls.append(time.perf_counter() - start)
    return compile_s, float(np.median(walls)), out


def run(quick: bool = False, env: str = "point_mass") -> list[dict]:
    rounds, reps, horizon = (3, 2, 50) if quick else (10, 3, None)
    pairs = list(itertools.product(NS, MS))
    # Separate: one program per (n, M), its seeds vmapped.
    separate, compile_sep, wall_sep = {}, 0.0, 0.0
    for n, M in pairs:
        cfg, tr = _trainer(env, n, M, horizon)
        keys, hyper = seed_keys(cfg, SEEDS), tr.hyper(batch=SEEDS)
        fn = lambda k, h, tr=tr: jax.vmap(lambda k1, h1: tr.run_chunk(tr.init(k1, h1), rounds))(
            k, h
        )
        c, w, out = _timed(fn, keys, hyper, reps=reps)
        compile_sep, wall_sep, separate[(n, M)] = compile_sep + c, wall_sep + w, out[0].params
    # Padded: one program over every run.
    cfg, bound = _trainer(env, max(NS), max(MS), horizon)
    records, keys, sizes = [], [], []
    for n, M in pairs:
        _, tr = _trainer(env, n, M, horizon)
        records += [padding.pad(tr.setup.cluster, max(NS))] * SEEDS
        keys.append(seed_keys(cfg, SEEDS))
        sizes += [M] * SEEDS
    stacked, keys = padding.stack(records), jnp.concatenate(keys)
    runs = len(sizes)
    hyper = bound.hyper(batch=runs) | {
        "M": jnp.asarray(sizes, jnp.float32),
        "M_init": jnp.asarray(sizes, jnp.float32),
    }

    def one(record, key, hy):
        tr = bound.bind(record)
        return tr.run_chunk(tr.init(key, hy), rounds)

    compile_pad, wall_pad, out = _timed(jax.vmap(one), stacked, keys, hyper, reps=reps)
    diff = 0.0
    for i, pair in enumerate(pairs):
        mine = jax.tree.map(lambda x, i=i: x[i * SEEDS : (i + 1) * SEEDS], out[0].params)
        for a, b in zip(jax.tree.leaves(mine), jax.tree.leaves(separate[pair]), strict=True):
            diff = max(diff, float(jnp.max(jnp.abs(a - b))))
    counted = SEEDS * sum(M for _, M in pairs)
    common = {"env": env, "runs": runs, "rounds": rounds, "reps": reps}
    return [
        common
        | {
            "form": "separate",
            "programs": len(pairs),
            "compile_s": compile_sep,
            "wall_s": wall_sep,
            "rollouts_per_round": counted,
            "largest_program_rollouts": SEEDS * max(MS),
            "max_param_diff": 0.0,
        },
        common
        | {
            "form": "padded",
            "programs": 1,
            "compile_s": compile_pad,
            "wall_s": wall_pad,
            "rollouts_per_round": runs * max(MS),
            "largest_program_rollouts": runs * max(MS),
            "max_param_diff": diff,
            "separate_programs": len(pairs),
            "compile_over_separate": compile_pad / compile_sep,
            "wall_over_separate": wall_pad / wall_sep,
        },
    ]


def format_rows(rows: list[dict]) -> str:
    from benchmarks.common import format_table

    cols = (
        ("form", "form", ""),
        ("programs", "programs", "d"),
        ("compile_s", "compile s", ".1f"),
        ("wall_s", "wall s (R rounds, all runs)", ".2f"),
        ("rollouts_per_round", "rollouts / round", "d"),
        ("largest_program_rollouts", "largest program's rollouts / round", "d"),
        ("max_param_diff", "max |Δ params|", ".1e"),
    )
    return format_table(rows, cols)
