"""Benchmark: one jitted Rennala schedule + weights call (sample times, top_k, weights).

Times ``rennala(tm, key, t0, busy_until, M=50)`` followed by ``rennala_weights`` at
n = 10, 100, 1000, 10000 workers (exponential noise, h = sqrt profile), reporting the median
wall time of several calls after a warm-up (compile excluded).

Side by side (interleaved) it times the method the library used before: draw all
``n * (M + 1)`` compute times and take one ``top_k`` over the ``n * M`` completion times
(:func:`_full_draw_end`, kept here as the reference). The library draws every worker's first
time and ``M`` more only for the ``min(n, M)`` workers that can contribute. Only ``T``
(the round's collection end) is computed by the reference; the library call also does the
per-worker bookkeeping and the weights, so the comparison is conservative.

The third column times the same call on a cluster whose workers have outages
(``power: outages:90:10``, each worker down about 10 % of the time, drawn once to cover
``OUTAGE_HORIZON``; ``allreduce: contributors``, ``t0`` inside the trace): every completion
goes through the workers' work clocks and the AllReduce waits for its members to be up.

Usage::

    python scripts/benchmarks/schedule.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from jaxnigt.cluster.aggregators import rennala_weights
from jaxnigt.cluster.model import make_cluster_model, realize, sample_compute_times
from jaxnigt.cluster.schedules import rennala, sequential_cumsum

SIZES = (10, 100, 1000, 10_000)
M = 50
OUTAGES = "outages:90:10"
OUTAGE_HORIZON = 2000.0
OUTAGE_T0 = 700.0  # a round inside the drawn trace


def _step(tm, key, t0, busy):
    sched = rennala(tm, key, t0, busy, M=M)
    return sched, rennala_weights(sched)


def _full_draw_end(tm, key, t0, busy):
    """The previous method's collection end T: all n * (M + 1) draws, one top_k over n * M."""
    del busy
    cum = sequential_cumsum(sample_compute_times(tm, key, M + 1))
    _, idx = jax.lax.top_k(-cum[:, :M].reshape(-1), M)
    idx = jax.lax.optimization_barrier(idx)
    return t0 + cum[:, :M].reshape(-1)[idx[M - 1]]


def run(quick: bool = False) -> list[dict]:
    """One row per n: ``{"name", "n", "M", "median_ms", "full_draw_ms", "compile_s", ...}``."""
    calls = 5 if quick else 30
    fns = {"lazy": jax.jit(_step), "full": jax.jit(_full_draw_end), "outages": jax.jit(_step)}
    rows = []
    for n in SIZES:
        tm = make_cluster_model(n, h="sqrt", noise="exponential", kappa="sqrt")
        out = make_cluster_model(
            n,
            h="sqrt",
            noise="exponential",
            kappa="sqrt",
            allreduce="contributors",
            power=OUTAGES,
            power_horizon=OUTAGE_HORIZON,
        )
        out = realize(out, jax.random.key(0))[0]
        models = {"lazy": tm, "full": tm, "outages": out}
        t0s = {"lazy": 0.0, "full": 0.0, "outages": OUTAGE_T0}
        busy = jnp.zeros((n,), jnp.float32)
        t = time.perf_counter()
        jax.block_until_ready(fns["lazy"](tm, jax.random.key(0), jnp.float32(0.0), busy))
        compile_s = time.perf_counter() - t
        for k in ("full", "outages"):
            jax.block_until_ready(fns[k](models[k], jax.random.key(0), jnp.float32(t0s[k]), busy))
        times = {k: [] for k in fns}
        for i in range(calls):
            key = jax.random.key(i + 1)
            for k, fn in fns.items():
                t = time.perf_counter()
                jax.block_until_ready(fn(models[k], key, jnp.float32(t0s[k]), busy))
                times[k].append(time.perf_counter() - t)
        lazy, full, outage = (1e3 * statistics.median(times[k]) for k in fns)
        rows.append(
            {
                "name": "rennala_schedule_weights",
                "n": n,
                "M": M,
                "median_ms": lazy,
                "full_draw_ms": full,
                "full_over_lazy": full / lazy,
                "outages_ms": outage,
                "outages_over_constant": outage / lazy,
                "stretches": int(out.power.start.shape[1]),
                "compile_s": compile_s,
                "calls": calls,
                "backend": jax.default_backend(),
            }
        )
    return rows


def format_rows(rows: list[dict]) -> str:
    """The rows as a table, each with ``ratio_vs_n10`` (its median over the first row's)
    added."""
    from benchmarks.common import format_table

    base = rows[0]["median_ms"]
    for r in rows:
        r["ratio_vs_n10"] = r["median_ms"] / base
    cols = (
        ("n", "n", ",d"),
        ("M", "M", "d"),
        ("calls", "calls", "d"),
        ("median_ms", "median ms", ".3f"),
        ("ratio_vs_n10", "ratio vs n=10", ".2f"),
        ("full_draw_ms", "full-draw ms (previous method)", ".3f"),
        ("full_over_lazy", "previous / now", ".1f"),
        ("outages_ms", "outages ms", ".3f"),
        ("outages_over_constant", "outages / constant", ".2f"),
        ("compile_s", "compile s", ".2f"),
    )
    return format_table(rows, cols)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed calls")
    rows = run(parser.parse_args().quick)
    print(
        f"{'n':>7} {'M':>4} {'median ms':>10} {'full-draw ms':>12} {'outages ms':>10} "
        f"{'compile s':>10}  ({rows[0]['backend']})"
    )
    for r in rows:
        print(
            f"{r['n']:>7} {r['M']:>4} {r['median_ms']:>10.3f} {r['full_draw_ms']:>12.3f} "
            f"{r['outages_ms']:>10.3f} {r['compile_s']:>10.2f}"
        )


if __name__ == "__main__":
    main()
