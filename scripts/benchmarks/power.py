"""Benchmark: what a computation-power trace costs a Rennala NIGT round.

Rennala NIGT rounds (M = 50, reacher) at n = 10 and n = 10,000 workers, each under constant
power and under outages (``power: outages:90:10``: every worker down about 10 % of the time
in bouts of mean 10, drawn once per run to cover ``HORIZON``), ``allreduce: contributors``
and κ = 0.1 for both, so the AllReduce waits for its down members. A round is the schedule
(every completion through the workers' work clocks, the AllReduce through their up clocks),
the M rollouts, one backward pass and the update. Programs are compiled first, then timed
interleaved (median of ``reps`` calls of ``run_chunk(state, R)``); the ratio column is a
round under outages over the same round under constant power. The schedule alone (no
rollouts) is the ``schedule`` benchmark's ``outages / constant`` column.

Usage::

    python scripts/bench.py power [--quick]
"""

from __future__ import annotations

import jax
import numpy as np
from benchmarks.common import compile_timed, format_table, interleaved, make_config

from jaxnigt.run.trainer import make_trainer

M = 50
SIZES = (10, 10_000)
OUTAGES = "outages:90:10"
HORIZON = 4000.0
TARGET = 1.5


def _program(env: str, horizon: int, n: int, power: str, rounds: int):
    cluster = {"kappa": 0.1, "allreduce": "contributors", "power": power}
    if power != "constant":
        cluster["power_horizon"] = HORIZON
    cfg = make_config(env, n=n, M=M, horizon=horizon, cluster=cluster)
    tr = make_trainer(cfg, "rennala_nigt")
    state = jax.jit(tr.init)(jax.random.key(0), tr.hyper())
    compiled, lower_s, compile_s = compile_timed(lambda s: tr.run_chunk(s, rounds), state)
    return compiled, state, lower_s + compile_s


def run(quick: bool = False, env: str = "reacher") -> list[dict]:
    """One row per (n, power): round ms, simulated time per round and the ratio."""
    horizon, rounds, reps = (50, 3, 3) if quick else (100, 5, 5)
    progs = {
        (n, p): _program(env, horizon, n, p, rounds) for n in SIZES for p in ("constant", OUTAGES)
    }
    med = interleaved({k: (lambda c=c, s=s: c(s)) for k, (c, s, _) in progs.items()}, reps)
    rows = []
    for (n, p), (compiled, state, compile_s) in progs.items():
        _, metrics = compiled(state)
        sim = np.asarray(metrics["round_time"], np.float64)
        rows.append(
            {
                "env": env,
                "H": horizon,
                "n": n,
                "M": M,
                "power": p,
                "rounds": rounds,
                "round_ms": 1e3 * med[(n, p)] / rounds,
                "sim_time_per_round": float(np.mean(sim)),
                "over_constant": med[(n, p)] / med[(n, "constant")],
                "target": TARGET if p != "constant" else None,
                "met": bool(med[(n, p)] / med[(n, "constant")] <= TARGET)
                if p != "constant"
                else None,
                "compile_s": compile_s,
                "reps": reps,
            }
        )
    return rows


def format_rows(rows: list[dict]) -> str:
    cols = (
        ("n", "n", ",d"),
        ("power", "power", ""),
        ("round_ms", "ms / round", ".1f"),
        ("sim_time_per_round", "sim time / round", ".2f"),
        ("over_constant", "outages / constant", ".3f"),
        ("compile_s", "compile s", ".1f"),
    )
    return format_table(rows, cols)
