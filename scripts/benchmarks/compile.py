"""Compile time of the first training round per environment, cold cache, fresh process.

Each environment is measured in its own Python process with JAX's persistent compilation
cache disabled (``jax_enable_compilation_cache = False``), so nothing from an earlier run or
an earlier environment is reused. Reported separately:

* ``setup``: ``make_trainer`` (brax MJX model loading, ``eval_shape`` of the reset);
* ``init``: first call of ``jit(trainer.init)`` (compile + run of the parameter init);
* ``lower``: tracing and lowering of ``run_chunk(state, 1)``, one ``rennala_nigt`` round;
* ``compile``: XLA compilation of that round;
* ``run``: executing the compiled round once (not compile time; for scale).

With ``--n``, instead: the compile time of the run's real chunk program (the vmapped
``chunk_and_evaluate`` of ``jaxnigt run``) on the demo config at each n, for one algorithm
(``--algorithm``, default ``sync_nigt``): whether compile time grows with the number of
simulated workers. Each n is measured twice, side by side: the program as the runner builds
it (the cluster's per-worker arrays are arguments) and the same program closing over them as
constants (how it was built before). Reported: ``prepare`` (``make_trainer`` and the clock
behind ``eval.every_time``), ``init``, ``lower`` and ``compile`` of one chunk, and the chunk
itself once compiled (the median of three calls), so the two forms' speed is compared too.

Usage::

    python scripts/bench.py compile [--quick]        # quick: reacher only
    python scripts/bench.py compile --n 1000,100000,1000000 [--algorithm sync_nigt]
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

    from jaxnigt.run.trainer import make_trainer

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


def measure_n(algorithm: str, n: int, constants: bool = False) -> dict:
    """Runs in a child process: the chunk program of ``algorithm`` on the demo at ``n``.

    ``constants``: the same program closing over the cluster's per-worker arrays (how the
    runner built it before they became arguments), for the side-by-side comparison.
    """
    import jax
    import numpy as np

    jax.config.update("jax_enable_compilation_cache", False)
    from jaxnigt import config as config_lib
    from jaxnigt.run import loop
    from jaxnigt.run.batch import eval_keys

    cfg = config_lib.load("configs/demo.yaml", [f"cluster.n={n}", f"algorithms=[{algorithm}]"])
    t0 = time.perf_counter()
    run = loop.prepare(cfg, algorithm)
    t1 = time.perf_counter()
    state = jax.block_until_ready(run.init(run.keys, run.hyper))
    t2 = time.perf_counter()
    args = (state, eval_keys(run.keys, 0), np.bool_(True), run.budgets)
    if constants:
        tr, every = run.trainer, run.every
        chunk = jax.vmap(
            lambda s, k, train, b: tr.chunk_and_evaluate(s, k, train, every, budget=b),
            in_axes=(0, 0, None, 0),
        )
        lowered = jax.jit(chunk).lower(*args)
    else:
        lowered = run.program.lower(*args)  # the cluster's arrays are arguments
    t3 = time.perf_counter()
    compiled = lowered.compile()
    t4 = time.perf_counter()
    call = (
        (lambda: compiled(*args)) if constants else (lambda: compiled(run.program.cluster, *args))
    )
    runs = []
    for _ in range(3):  # the chunk itself, after compilation: the median of three calls
        t = time.perf_counter()
        jax.block_until_ready(call())
        runs.append(time.perf_counter() - t)
    return {
        "algorithm": algorithm,
        "n": n,
        "arrays": "constants" if constants else "arguments",
        "seeds": cfg.seeds,
        "every": run.every,
        "prepare_s": t1 - t0,
        "init_s": t2 - t1,
        "lower_s": t3 - t2,
        "compile_s": t4 - t3,
        "run_s": sorted(runs)[1],
    }


def run(
    quick: bool = False,
    envs: tuple[str, ...] | None = None,
    ns: tuple[int, ...] = (),
    algorithm: str = "sync_nigt",
) -> list[dict]:
    """The first round's cold compile per env; with ``ns``, instead :func:`run_n`."""
    if ns:
        return run_n(ns, algorithm)
    envs = envs or (("reacher",) if quick else ENVS)
    return [run_child("compile", "measure", {"env": e}) for e in envs]


def run_n(ns: tuple[int, ...], algorithm: str = "sync_nigt") -> list[dict]:
    """One cold child process per n and form of the program (:func:`measure_n`), the two
    forms interleaved; each row of arguments gets ``constants_over_arguments``."""
    rows = []
    for n in ns:
        pair = [
            run_child("compile", "measure_n", {"algorithm": algorithm, "n": n, "constants": c})
            for c in (True, False)
        ]
        pair[1]["constants_over_arguments"] = pair[0]["compile_s"] / pair[1]["compile_s"]
        rows += pair
    return rows


N_COLUMNS = (
    ("algorithm", "algorithm", ""),
    ("n", "n", ",d"),
    ("arrays", "per-worker arrays", ""),
    ("seeds", "seeds", "d"),
    ("every", "steps/chunk", "d"),
    ("prepare_s", "prepare s", ".1f"),
    ("init_s", "init s", ".1f"),
    ("lower_s", "lower s", ".1f"),
    ("compile_s", "compile s", ".1f"),
    ("constants_over_arguments", "compile: constants / arguments", ".2f"),
    ("run_s", "one chunk s", ".3f"),
)


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
    return format_table(rows, N_COLUMNS if rows and "prepare_s" in rows[0] else COLUMNS)
