"""Compile time of the first training round per environment, cold cache, fresh process.

Each environment is measured in its own Python process with JAX's persistent compilation
cache disabled (``jax_enable_compilation_cache = False``), so nothing from an earlier run or
an earlier environment is reused. Reported separately:

* ``setup``: ``make_trainer`` (brax MJX model loading, ``eval_shape`` of the reset);
* ``init``: first call of ``jit(trainer.init)`` (compile + run of the parameter init);
* ``lower``: tracing and lowering of ``run_chunk(state, 1)``, one ``rennala_nigt`` round;
* ``compile``: XLA compilation of that round;
* ``run``: executing the compiled round once (not compile time; for scale).

Usage::

    python scripts/bench.py compile [--quick]        # quick: reacher only
"""

from __future__ import annotations

import time

from benchmarks.common import format_table, run_child

ENVS = ("reacher", "hopper", "humanoid")


def measure(env: str, M: int = 20, n: int = 10, horizon: int | None = None) -> dict:
    """Runs in a child process (see :func:`run`)."""
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    from benchmarks.common import make_config

    from jaxnigt.trainer import make_trainer

    t0 = time.perf_counter()
    tr = make_trainer(make_config(env, n=n, M=M, horizon=horizon), "rennala_nigt")
    t1 = time.perf_counter()
    state = jax.block_until_ready(jax.jit(tr.init)(jax.random.key(0), tr.hyper()))
    t2 = time.perf_counter()
    lowered = jax.jit(lambda s: tr.run_chunk(s, 1)).lower(state)
    t3 = time.perf_counter()
    compiled = lowered.compile()
    t4 = time.perf_counter()
    jax.block_until_ready(compiled(state))
    t5 = time.perf_counter()
    return {
        "env": env,
        "H": tr.setup.horizon,
        "M": M,
        "n": n,
        "d": tr.dim,
        "setup_s": t1 - t0,
        "init_s": t2 - t1,
        "lower_s": t3 - t2,
        "compile_s": t4 - t3,
        "first_round_total_s": t4 - t2,
        "run_s": t5 - t4,
        "persistent_cache": bool(jax.config.jax_enable_compilation_cache),
    }


def run(quick: bool = False, envs: tuple[str, ...] | None = None) -> list[dict]:
    envs = envs or (("reacher",) if quick else ENVS)
    return [run_child("compile", "measure", {"env": e}) for e in envs]


COLUMNS = (
    ("env", "env", ""),
    ("H", "H", "d"),
    ("M", "M", "d"),
    ("d", "d", ",d"),
    ("setup_s", "setup s", ".1f"),
    ("init_s", "init s", ".1f"),
    ("lower_s", "lower s", ".1f"),
    ("compile_s", "compile s", ".1f"),
    ("first_round_total_s", "lower+compile s", ".1f"),
    ("run_s", "run s", ".2f"),
)


def format_rows(rows: list[dict]) -> str:
    return format_table(rows, COLUMNS)
