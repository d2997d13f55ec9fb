"""GPU benchmark: what a GPU run measures (figures of one H200: docs/benchmarks.md, "gpu").

Designed for one GPU within 10 minutes (compiles included):

0. Rollout + policy gradient of humanoid (H = 1000, the initial policy) at batch 1,024,
   4,096 and 16,384: alive env steps/s, once with one lane per trajectory and once with
   refilled lanes (``env.lanes`` 0.5 and 0.25), and each program's compile time.
1. ``rennala_nigt`` on humanoid, n = 100 and n = 1,000, M = 50, one seed: rounds/s and
   env-steps/s of ``jit(run_chunk(state, R))``.
2. 5 seeds × {rennala_nigt, sync_nigt, afedpg}, each algorithm ONE program
   ``jit(vmap(run_chunk))`` over the 5 seeds: rounds (or arrival blocks)/s, env-steps/s
   summed over seeds, compile time. AFedPG is timed on blocks of ``--async-block``
   arrivals (default 10).
3. AFedPG's batched engine against one arrival at a time (``async_wave`` default vs 1) at
   n = 100 and 1,000, ``async_block = n`` (the ``scaling`` benchmark's comparison).

A wall-clock guard (``--deadline``) skips what is left once it is exceeded, so a partial
result still comes back (and ``scripts/bench.py`` writes the rows measured so far when it is
stopped by SIGTERM, e.g. by ``timeout``). Refuses to run on a CPU backend unless
``--allow-cpu`` (for a dry run with a toy env: ``--env point_mass --horizon 20 --allow-cpu``;
``--batches`` and ``--large-n`` shrink the batch sizes and the second n, as
``scripts/gpu/run.sh --cpu-tiny`` does).

Usage::

    bash scripts/bench_gpu.sh             # = python scripts/bench.py --json ... gpu
    bash scripts/gpu/run.sh OUT_DIR       # offline node with its own JAX (carried wheels)
"""

from __future__ import annotations

import time

import jax
import numpy as np
from benchmarks.common import compile_timed, format_table, make_config

from jaxnigt.run.trainer import make_trainer

ALGORITHMS = ("rennala_nigt", "sync_nigt", "afedpg")
LANES = (1.0, 0.5, 0.25)


def _rollouts(env, horizon, batches, reps, start, deadline, rows) -> list[dict]:
    """Alive steps/s of a batched rollout + gradient at the initial policy, per lanes value
    (appended to ``rows``)."""
    import dataclasses

    import jax.numpy as jnp

    from jaxnigt.envs import make_env
    from jaxnigt.rl.estimator import policy_gradient
    from jaxnigt.rl.policy import make_policy
    from jaxnigt.rl.rollout import rollout

    base = make_env(env, horizon=horizon)
    policy = make_policy(base)
    params = policy.init(jax.random.key(0))
    for batch in batches:
        for lanes in LANES:
            if time.perf_counter() - start > deadline:
                rows.append({"rollout_batch": batch, "lanes": lanes, "skipped": "deadline"})
                continue
            task = dataclasses.replace(base, lanes=lanes)
            types, weights = jnp.zeros(batch, jnp.int32), jnp.full(batch, 1.0 / batch)

            def fn(key, task=task, types=types, weights=weights):
                keys = jax.random.split(key, batch)
                traj = rollout(task, policy, params, keys, types)
                return traj.lengths, policy_gradient(policy, params, traj, weights, 0.99)

            compiled, lower_s, compile_s = compile_timed(fn, jax.random.key(1))
            lengths, _ = jax.block_until_ready(compiled(jax.random.key(1)))
            times = []
            for r in range(reps):
                t0 = time.perf_counter()
                jax.block_until_ready(compiled(jax.random.key(2 + r)))
                times.append(time.perf_counter() - t0)
            wall = float(np.median(times))
            rows.append(
                {"algorithm": "rollout+pg", "env": env, "rollout_batch": batch, "lanes": lanes,
                 "alive_steps_per_s": float(np.sum(lengths)) / wall, "wall_s": wall,
                 "lower_s": lower_s, "compile_s": compile_s}
            )  # fmt: skip
            print(format_table(rows[-1:], COLUMNS), flush=True)
    return rows


def _bench(cfg, algorithm: str, seeds: int, rounds: int, reps: int) -> dict:
    from jaxnigt.run import batch

    tr = make_trainer(cfg, algorithm)
    if seeds == 1:
        state = jax.jit(tr.init)(jax.random.key(0), tr.hyper())
        fn = lambda s: tr.run_chunk(s, rounds)
    else:
        keys = batch.seed_keys(cfg, seeds)
        state = jax.jit(jax.vmap(tr.init))(keys, tr.hyper(batch=seeds))
        fn = jax.vmap(lambda s: tr.run_chunk(s, rounds))
    compiled, lower_s, compile_s = compile_timed(fn, state)
    jax.block_until_ready(compiled(state))  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        _, metrics = jax.block_until_ready(compiled(state))
        times.append(time.perf_counter() - t0)
    wall = float(np.median(times))
    env_steps = np.asarray(metrics["env_steps"])  # [(seeds,) rounds] cumulative
    steps = float(np.sum(env_steps[..., -1] - np.asarray(state.counters.env_steps)))
    return {
        "algorithm": algorithm,
        "env": cfg.env.name,
        "n": cfg.cluster.n,
        "M": cfg.hparams.M,
        "seeds": seeds,
        "rounds": rounds,
        "block": tr.hparams.async_block or tr.setup.n if algorithm in ("afedpg", "asgd") else None,
        "rounds_per_s": rounds / wall,
        "alive_steps_per_s": steps / wall,
        "wall_s": wall,
        "lower_s": lower_s,
        "compile_s": compile_s,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
    }


def run(
    quick: bool = False,
    *,
    env: str = "humanoid",
    horizon: int | None = None,
    n: int = 100,
    M: int = 50,
    seeds: int = 5,
    rounds: int = 5,
    async_block: int = 10,
    reps: int = 3,
    deadline: float = 540.0,
    allow_cpu: bool = False,
    solver_iterations: int | None = None,
    ls_iterations: int | None = None,
    batches: tuple[int, ...] = (1024, 4096, 16384),
    large_n: int = 1000,
    rows: list[dict] | None = None,
) -> list[dict]:
    """The rows of every measurement (``rows``, if given, is filled in place, so a caller
    that is interrupted still holds what was measured)."""
    if jax.default_backend() == "cpu" and not allow_cpu:
        raise SystemExit(
            "gpu: JAX backend is cpu; install a CUDA jaxlib (see docs/benchmarks.md) "
            "or pass --allow-cpu for a dry run"
        )
    if quick:
        rounds, reps = max(1, rounds // 2), 1
    start = time.perf_counter()

    def cfg_for(algorithm, block=None, workers=n):
        from jaxnigt import config as config_lib

        cfg = make_config(
            env, n=workers, M=M, horizon=horizon, algorithms=[algorithm], async_block=block,
            seeds=seeds,
        )  # fmt: skip
        if solver_iterations is None and ls_iterations is None:
            return cfg
        raw = cfg.to_dict()
        raw["env"].update(solver_iterations=solver_iterations, ls_iterations=ls_iterations)
        return config_lib.from_dict(raw)

    rows = [] if rows is None else rows
    _rollouts(env, horizon or 1000, batches, reps, start, deadline, rows)
    plan = [("rennala_nigt", 1, rounds, n), ("rennala_nigt", 1, rounds, large_n)]
    plan += [(a, seeds, 1 if a == "afedpg" else rounds, n) for a in ALGORITHMS]
    for algorithm, s, r, workers in plan:
        elapsed = time.perf_counter() - start
        if elapsed > deadline:
            rows.append({"algorithm": algorithm, "seeds": s, "skipped": f"deadline {elapsed:.0f}s"})
            continue
        cfg = cfg_for(algorithm, async_block if algorithm == "afedpg" else None, workers)
        rows.append(_bench(cfg, algorithm, s, r, reps))
        print(format_table(rows[-1:], COLUMNS), flush=True)
    from benchmarks import scaling

    for waves_n in (n, large_n):
        if time.perf_counter() - start > deadline:
            rows.append({"algorithm": "afedpg waves", "n": waves_n, "skipped": "deadline"})
            continue
        rows += scaling.bench_waves(env, horizon, (waves_n,), reps)
        print(scaling.format_rows(rows[-2:]), flush=True)
    return rows


COLUMNS = (
    ("algorithm", "algorithm", ""),
    ("env", "env", ""),
    ("rollout_batch", "batch", ""),
    ("lanes", "lanes", ""),
    ("n", "n", ""),
    ("M", "M", ""),
    ("seeds", "seeds", ""),
    ("block", "block", ""),
    ("rounds", "R", ""),
    ("rounds_per_s", "rounds/s", ".3f"),
    ("alive_steps_per_s", "alive steps/s", ",.0f"),
    ("compile_s", "compile s", ".1f"),
    ("skipped", "skipped", ""),
)


def format_rows(rows: list[dict]) -> str:
    """The rows as text tables: AFedPG's waves (ms per arrival) in a table of their own."""
    from benchmarks import scaling

    waves = [r for r in rows if "ms_per_arrival" in r]
    rest = [r for r in rows if "ms_per_arrival" not in r]
    text = format_table(rest, COLUMNS)
    return text + ("\n\n" + format_table(waves, scaling.WAVE_COLUMNS) if waves else "")
