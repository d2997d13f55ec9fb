"""Central inference's cost: a SEED RL learner update against IMPALA's, and its clock's share.

For each (env, n) it measures, interleaved in one process, ``K`` learner updates of B = n
trajectories each:

(a) ``seed_rl``: the per-step clock (one ``while_loop`` turn per environment step: B·H turns
    per update), the rollout at per-step versions, the V-trace update;
(b) ``impala``: the per-arrival clock (B turns per update), the rollout at per-slot
    parameters, the same V-trace update;
(c) seed_rl's clock alone (``jaxnigt.cluster.step_clock.simulate``, the same B, H and K).

``seed / impala`` is what central inference's per-step bookkeeping costs in wall time per
update (the simulated times differ: that is the experiment, not the simulator);
``clock share`` = (c) / (a). κ = 0, h = √i with exponential noise (``make_config``).

Usage::

    python scripts/bench.py central [--quick]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from benchmarks.common import compiled_chunk, format_table, interleaved, make_config

from jaxnigt.cluster import step_clock

UPDATES = 4


def bench_one(env: str, n: int, reps: int) -> dict:
    cfg = make_config(env, n=n, algorithms=("seed_rl", "impala"))
    seed_tr, seed_state, seed_run, seed_compile = compiled_chunk(cfg, "seed_rl", UPDATES)
    _, impala_state, impala_run, impala_compile = compiled_chunk(cfg, "impala", UPDATES)
    setup = seed_tr.setup
    message = jnp.zeros((n,), jnp.float32)
    clock = jax.jit(
        lambda key: step_clock.simulate(
            setup.cluster, message, 0.0, key, horizon=setup.horizon, batch=n, updates=UPDATES
        )
    )
    key = jax.random.key(0)
    t = interleaved(
        {
            "seed": lambda: seed_run(seed_state),
            "impala": lambda: impala_run(impala_state),
            "clock": lambda: clock(key),
        },
        reps,
    )
    per = {k: v / UPDATES * 1e3 for k, v in t.items()}
    return {
        "env": env,
        "n": n,
        "H": setup.horizon,
        "updates": UPDATES,
        "seed_ms": per["seed"],
        "impala_ms": per["impala"],
        "clock_ms": per["clock"],
        "seed_over_impala": t["seed"] / t["impala"],
        "clock_share": t["clock"] / t["seed"],
        "compile_seed_s": seed_compile,
        "compile_impala_s": impala_compile,
    }


def run(quick: bool) -> list[dict]:
    cases = [("point_mass", 10)] if quick else [("point_mass", 10), ("point_mass", 100)]
    cases += [] if quick else [("reacher", 10)]
    return [bench_one(env, n, reps=3 if quick else 7) for env, n in cases]


def format_rows(rows: list[dict]) -> str:
    cols = (
        ("env", "env", "s"),
        ("n", "n", "d"),
        ("H", "H", "d"),
        ("seed_ms", "seed_rl ms/update", ".1f"),
        ("impala_ms", "impala ms/update", ".1f"),
        ("clock_ms", "seed clock alone ms/update", ".1f"),
        ("seed_over_impala", "seed / impala", ".2f"),
        ("clock_share", "clock share", ".2f"),
        ("compile_seed_s", "compile seed s", ".1f"),
        ("compile_impala_s", "compile impala s", ".1f"),
    )
    return format_table(rows, cols)
