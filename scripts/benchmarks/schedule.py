"""Benchmark: one jitted Rennala schedule + weights call (sample times, top_k, weights).

Times ``rennala(tm, key, t0, busy_until, M=50)`` followed by ``rennala_weights`` at
n = 10, 100, 1000, 10000 workers (exponential noise, h = sqrt profile), reporting the median
wall time of several calls after a warm-up (compile excluded).

Usage::

    python scripts/benchmarks/schedule.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from jaxnigt.aggregators import rennala_weights
from jaxnigt.schedules import rennala
from jaxnigt.timing import make_time_model

SIZES = (10, 100, 1000, 10_000)
M = 50


def _step(tm, key, t0, busy):
    sched = rennala(tm, key, t0, busy, M=M)
    return sched, rennala_weights(sched)


def run(quick: bool = False) -> list[dict]:
    """Returns one row per n: ``{"name", "n", "M", "median_ms", "compile_s", "calls"}``."""
    calls = 5 if quick else 30
    fn = jax.jit(_step)
    rows = []
    for n in SIZES:
        tm = make_time_model(n, h="sqrt", noise="exponential", kappa="sqrt")
        busy = jnp.zeros((n,), jnp.float32)
        t = time.perf_counter()
        jax.block_until_ready(fn(tm, jax.random.key(0), jnp.float32(0.0), busy))
        compile_s = time.perf_counter() - t
        times = []
        for i in range(calls):
            key = jax.random.key(i + 1)
            t = time.perf_counter()
            jax.block_until_ready(fn(tm, key, jnp.float32(0.0), busy))
            times.append(time.perf_counter() - t)
        rows.append(
            {
                "name": "rennala_schedule_weights",
                "n": n,
                "M": M,
                "median_ms": 1e3 * statistics.median(times),
                "compile_s": compile_s,
                "calls": calls,
                "backend": jax.default_backend(),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed calls")
    rows = run(parser.parse_args().quick)
    print(f"{'n':>7} {'M':>4} {'median ms':>10} {'compile s':>10}  ({rows[0]['backend']})")
    for r in rows:
        print(f"{r['n']:>7} {r['M']:>4} {r['median_ms']:>10.3f} {r['compile_s']:>10.2f}")


if __name__ == "__main__":
    main()
