"""GPU benchmark: what a GPU run measures (figures of one H200: docs/benchmarks.md, "gpu").

Designed for one GPU within 10 minutes (compiles included), in this order (``--rows``, the
groups of :data:`GROUPS`), the main question first:

0. *reference*: rollout + policy gradient of the first study's env (reacher, H = 50) at
   batch 4,096 (``--reference-batch``), lanes 1.0: the rate the studies are compared with.
1. *study*: each program of each study (``--study``, ``jaxnigt sweep`` arguments; default
   :data:`benchmarks.gpu_study.STUDIES`, reacher n ∈ {10, 30, 100} × 5 seeds, Rennala NIGT
   over M, Sync NIGT over step sizes: one padded program of 45 runs each), as the sweep
   builds it: alive steps/s, trajectories per step, compile time, ``/ rollout``.
2. *per-point*: the same studies one point at a time and their sum, where the deadline
   allows (:func:`benchmarks.gpu_study.point_by_point`).
3. *rollouts*: rollout + policy gradient of humanoid (H = 1000, the initial policy) at batch
   1,024, 4,096 and 16,384: alive env steps/s, once with one lane per trajectory and once
   with refilled lanes (``env.lanes`` 0.5 and 0.25), and each program's compile time.
4. *algorithms*: ``rennala_nigt`` on humanoid, n = 100 and n = 1,000, M = 50, one seed:
   rounds/s and env-steps/s of ``jit(run_chunk(state, R))``; then 5 seeds × {rennala_nigt,
   sync_nigt, afedpg}, each algorithm ONE program ``jit(vmap(run_chunk))`` over the 5 seeds:
   rounds (or arrival blocks)/s, env-steps/s summed over seeds, compile time. AFedPG is timed
   on blocks of ``--async-block`` arrivals (default 10).
5. *waves*: AFedPG's batched engine against one arrival at a time (``async_wave`` default vs
   1) at n = 100 and 1,000, ``async_block = n`` (the ``scaling`` benchmark's comparison).

A wall-clock guard (``--deadline``) skips what is left once it is exceeded (a study program
also when the last one's time would not fit), recording ``skipped: deadline``, so a partial
result still comes back (and ``scripts/bench.py`` writes the rows measured so far when it is
stopped by SIGTERM, e.g. by ``timeout``). Refuses to run on a CPU backend unless
``--allow-cpu``; ``--cpu-tiny`` runs every row at tiny sizes on the CPU, as
``scripts/gpu/run.sh --cpu-tiny`` does (:data:`benchmarks.gpu_args.TINY`).

Usage::

    bash scripts/bench_gpu.sh             # = python scripts/bench.py --json ... gpu
    bash scripts/gpu/run.sh OUT_DIR       # offline node with its own JAX (carried wheels)
"""

from __future__ import annotations

import time

import jax
import numpy as np
from benchmarks.common import compile_timed, format_table, make_config
from benchmarks.gpu_args import ROWS

from jaxnigt.run.trainer import make_trainer

ALGORITHMS = ("rennala_nigt", "sync_nigt", "afedpg")
LANES = (1.0, 0.5, 0.25)


def _rollout_row(task, batch: int, lanes: float, reps: int) -> dict:
    """Alive steps/s of a batched rollout + gradient of ``task`` at the initial policy."""
    import dataclasses

    import jax.numpy as jnp

    from jaxnigt.rl.estimator import policy_gradient
    from jaxnigt.rl.policy import make_policy
    from jaxnigt.rl.rollout import rollout

    task = dataclasses.replace(task, lanes=lanes)
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    types, weights = jnp.zeros(batch, jnp.int32), jnp.full(batch, 1.0 / batch)

    def fn(key):
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
    return {
        "algorithm": "rollout+pg", "env": task.name, "horizon": int(task.horizon),
        "rollout_batch": batch, "lanes": lanes,
        "alive_steps_per_s": float(np.sum(lengths)) / wall, "wall_s": wall,
        "lower_s": lower_s, "compile_s": compile_s,
    }  # fmt: skip


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


def _studies(studies, reference_batch, reps, rows, left, groups) -> None:
    """The study rows (appended to ``rows``): the reference rollout of the first study's env,
    every study's padded programs, then each program point by point, while the deadline
    (``left()`` seconds) allows; each program starts only if the last one's time fits."""
    from benchmarks import gpu_study

    from jaxnigt.run.trainer import make_task

    task = make_task(studies[0].points[0].config)
    reference = None
    if "reference" in groups:
        row = {"algorithm": "rollout+pg", "env": task.name, "rollout_batch": reference_batch}
        if left() > 0:
            reference = row = _rollout_row(task, reference_batch, 1.0, reps) | {"reference": True}
        rows.append(row if reference else row | {"skipped": "deadline"})
        print(format_table(rows[-1:], COLUMNS), flush=True)
    if "study" not in groups:
        return
    programs = [(study, prog) for study in studies for prog in study.programs]
    measured, last = [], None
    for study, prog in programs:
        need, remaining = 0.0 if last is None else gpu_study.estimate_s(last, 1), left()
        if remaining <= need:
            late = f"deadline (about {need:.0f} s, {max(remaining, 0):.0f} s left)"
            row = {"study": "padded", "algorithm": prog.algorithm, "skipped": late}
            measured.append(row | {"command": study.command})
        else:
            measured.append(last := gpu_study.padded_row(study, prog, reps))
        gpu_study.with_reference(measured[-1:], reference)
        rows.append(measured[-1])
        print(format_table(measured[-1:], gpu_study.COLUMNS), flush=True)
    for (study, prog), padded in zip(programs, measured, strict=True):
        if "per-point" in groups and len(prog.members) > 1:
            more = gpu_study.point_by_point(study, prog, padded, reps, left)
            gpu_study.with_reference(more, reference)
            rows += more
            print(format_table(more[-1:], gpu_study.COLUMNS), flush=True)


GROUPS = ROWS


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
    studies: tuple[str, ...] = (),
    reference_batch: int = 4096,
    groups: tuple[str, ...] = GROUPS,
    rows: list[dict] | None = None,
) -> list[dict]:
    """The rows of every measurement (``rows``, if given, is filled in place, so a caller
    that is interrupted still holds what was measured), in the order of :data:`GROUPS`
    (those in ``groups``); ``studies``: ``jaxnigt sweep`` arguments, one study each (default
    :data:`benchmarks.gpu_study.STUDIES`)."""
    if jax.default_backend() == "cpu" and not allow_cpu:
        raise SystemExit(
            "gpu: JAX backend is cpu; install a CUDA jaxlib (see docs/benchmarks.md) "
            "or pass --allow-cpu for a dry run"
        )
    if set(groups) - set(GROUPS):
        raise SystemExit(f"gpu: unknown rows {sorted(set(groups) - set(GROUPS))}; from {GROUPS}")
    if quick:
        rounds, reps = max(1, rounds // 2), 1
    start = time.perf_counter()
    left = lambda: deadline - (time.perf_counter() - start)

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
    done = set()
    if {"reference", "study", "per-point"} & set(groups):
        from benchmarks import gpu_study

        loaded = [gpu_study.load(text) for text in studies or gpu_study.STUDIES]
        _studies(loaded, reference_batch, reps, rows, left, groups)
        done = {(r["env"], r["horizon"], r["rollout_batch"]) for r in rows if r.get("reference")}
    if "rollouts" in groups:
        from jaxnigt.envs import make_env

        task = make_env(env, horizon=horizon or 1000)
        for batch in batches:
            for lanes in LANES:
                if lanes == 1.0 and (env, task.horizon, batch) in done:
                    continue  # the study's reference row
                if left() < 0:
                    rows.append({"rollout_batch": batch, "lanes": lanes, "skipped": "deadline"})
                    continue
                rows.append(_rollout_row(task, batch, lanes, reps))
                print(format_table(rows[-1:], COLUMNS), flush=True)
    plan = [("rennala_nigt", 1, rounds, n), ("rennala_nigt", 1, rounds, large_n)]
    plan += [(a, seeds, 1 if a == "afedpg" else rounds, n) for a in ALGORITHMS]
    for algorithm, s, r, workers in plan if "algorithms" in groups else ():
        if left() < 0:
            elapsed = deadline - left()
            rows.append({"algorithm": algorithm, "seeds": s, "skipped": f"deadline {elapsed:.0f}s"})
            continue
        cfg = cfg_for(algorithm, async_block if algorithm == "afedpg" else None, workers)
        rows.append(_bench(cfg, algorithm, s, r, reps))
        print(format_table(rows[-1:], COLUMNS), flush=True)
    from benchmarks import scaling

    for waves_n in (n, large_n) if "waves" in groups else ():
        if left() < 0:
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
    """The rows as text tables: the rollouts and training steps, the study's programs
    (:mod:`benchmarks.gpu_study`) and AFedPG's waves (ms per arrival), each with its own
    columns."""
    from benchmarks import gpu_study, scaling

    waves = [r for r in rows if "ms_per_arrival" in r]
    studies = gpu_study.table_rows(rows)
    rest = [r for r in rows if "ms_per_arrival" not in r and "study" not in r]
    text = format_table(rest, COLUMNS)
    if studies:
        text += "\n\n" + format_table(studies, gpu_study.COLUMNS)
    return text + ("\n\n" + format_table(waves, scaling.WAVE_COLUMNS) if waves else "")
