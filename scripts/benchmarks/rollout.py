"""Rollout throughput: rollout + policy gradient vs bare env stepping, in env-steps/s.

For every (env, batch) it measures, in the same process:

(a) ``rollout`` + ``policy_gradient`` jitted together (Gaussian MLP policy 64x64, sampling,
    termination masking, one backward pass of the surrogate);
(b) bare stepping: ``vmap(env.reset)`` then a ``lax.scan`` of ``vmap(env.step)`` with zero
    actions over the same batch and horizon;

and reports steps/s = batch · H / wall time (median of ``reps`` runs after compilation),
the ratio (a)/(b), and the compile time of each separately. (a) runs with the rollout early
exit off (the task with ``terminates=False``: one scan over all H steps, same trajectories),
so both sides compute batch · H steps and the ratio compares stepping rates. For tasks that
can terminate, (a') times the same rollout + gradient with the early exit on (the library's
default): ``exit ms`` is its wall time, ``alive`` the fraction of the batch · H steps before
termination, and ``exit alive/s`` the alive steps per second it achieves.

Usage::

    python scripts/benchmarks/rollout.py --quick            # H = 100 for locomotion
    python scripts/benchmarks/rollout.py --solver-iterations 1 --ls-iterations 4
    python scripts/benchmarks/rollout.py --quick --random-bare   # also (c), see bench_one
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import jax
import jax.numpy as jnp

from jaxnigt.envs import default_horizon, make_env
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.policy import make_policy
from jaxnigt.rl.rollout import rollout


def _time(fn, *args, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _compile(fn, *args):
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def bench_one(
    name: str,
    batch: int,
    horizon: int,
    *,
    reps: int = 3,
    solver_iterations: int | None = None,
    ls_iterations: int | None = None,
    random_bare: bool = False,
) -> dict:
    """Measures one (env, batch, horizon); see the module docstring.

    ``random_bare`` adds (c): bare stepping with uniform random actions in [-1, 1]. Zero
    actions can be much cheaper than real ones (an arm at rest never loads the constraint
    solver), so (c) separates the policy's own overhead from the physics' dependence on the
    actions.
    """
    task_exit = make_env(
        name, horizon=horizon, solver_iterations=solver_iterations, ls_iterations=ls_iterations
    )
    task = dataclasses.replace(task_exit, terminates=False)  # fixed work: all H steps
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    types = jnp.zeros((batch,), jnp.int32)
    weights = jnp.full((batch,), 1.0 / batch)

    def pg(params, key, task=task):
        keys = jax.random.split(key, batch)
        traj = rollout(task, policy, params, keys, types)
        return policy_gradient(policy, params, traj, weights, 0.99)

    def bare(key, random_actions=False):
        env = task.env
        k_reset, k_act = jax.random.split(key)
        state = jax.vmap(env.reset)(jax.random.split(k_reset, batch))
        shape = (batch, task.action_size)

        def body(s, k):
            if random_actions:
                a = jax.random.uniform(k, shape, s.obs.dtype, -1.0, 1.0) * task.action_scale
            else:
                a = jnp.zeros(shape, s.obs.dtype)
            s = jax.vmap(env.step)(s, a)
            return s, s.reward

        _, rewards = jax.lax.scan(body, state, jax.random.split(k_act, horizon))
        return rewards.sum()

    key = jax.random.key(1)
    pg_c, pg_compile = _compile(pg, params, key)
    bare_c, bare_compile = _compile(bare, key)
    jax.block_until_ready(pg_c(params, key))  # warm-up
    jax.block_until_ready(bare_c(key))
    pg_t = _time(pg_c, params, key, reps=reps)
    bare_t = _time(bare_c, key, reps=reps)
    rand_t = float("nan")
    if random_bare:
        rand_c, _ = _compile(lambda k: bare(k, random_actions=True), key)
        jax.block_until_ready(rand_c(key))
        rand_t = _time(rand_c, key, reps=reps)
    exit_t = alive = float("nan")
    if task_exit.terminates:
        exit_c, _ = _compile(lambda p, k: pg(p, k, task_exit), params, key)
        alive = float(jax.block_until_ready(exit_c(params, key))[1]["sum_length"])
        exit_t = _time(exit_c, params, key, reps=reps)
    steps = batch * horizon
    mjx_model = getattr(task.env, "sys", None) or getattr(task.env, "mjx_model", None)
    opt = getattr(mjx_model, "opt", None)  # brax's System or Playground's mjx.Model
    return {
        "env": name,
        "batch": batch,
        "horizon": horizon,
        "solver": f"{opt.iterations}/{opt.ls_iterations}" if opt is not None else "-",
        "pg_steps_per_s": steps / pg_t,
        "bare_steps_per_s": steps / bare_t,
        "ratio": bare_t / pg_t,
        "bare_random_steps_per_s": steps / rand_t,
        "ratio_random": rand_t / pg_t,
        "exit_ms": 1e3 * exit_t,
        "alive_frac": alive / steps,
        "exit_alive_steps_per_s": alive / exit_t,
        "pg_compile_s": pg_compile,
        "bare_compile_s": bare_compile,
        "backend": jax.default_backend(),
    }


def run(
    quick: bool,
    envs=("reacher", "hopper", "humanoid"),
    batches=(16, 64),
    *,
    reps: int = 3,
    solver_iterations: int | None = None,
    ls_iterations: int | None = None,
    random_bare: bool = False,
) -> list[dict]:
    """Benchmarks every (env, batch). ``quick``: horizon min(default, 100)."""
    results = []
    for name in envs:
        horizon = default_horizon(name)
        if quick:
            horizon = min(horizon, 100)
        for batch in batches:
            results.append(
                bench_one(
                    name,
                    batch,
                    horizon,
                    reps=reps,
                    solver_iterations=solver_iterations,
                    ls_iterations=ls_iterations,
                    random_bare=random_bare,
                )
            )
    return results


def format_table(results: list[dict]) -> str:
    header = (
        f"{'env':<10} {'batch':>5} {'H':>5} {'solver':>6} {'pg steps/s':>11} "
        f"{'bare steps/s':>12} {'ratio':>6} {'rand steps/s':>12} {'ratio':>6} "
        f"{'pg compile':>10} {'bare compile':>12} {'exit ms':>8} {'alive':>6} {'exit alive/s':>12}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r['env']:<10} {r['batch']:>5} {r['horizon']:>5} {r['solver']:>6} "
            f"{r['pg_steps_per_s']:>11,.0f} {r['bare_steps_per_s']:>12,.0f} {r['ratio']:>6.2f} "
            f"{r['bare_random_steps_per_s']:>12,.0f} {r['ratio_random']:>6.2f} "
            f"{r['pg_compile_s']:>9.1f}s {r['bare_compile_s']:>11.1f}s "
            f"{r['exit_ms']:>8.1f} {r['alive_frac']:>6.1%} {r['exit_alive_steps_per_s']:>12,.0f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short horizon (<= 100 steps)")
    parser.add_argument("--envs", default="reacher,hopper,humanoid")
    parser.add_argument("--batches", default="16,64")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--solver-iterations", type=int, default=None)
    parser.add_argument("--ls-iterations", type=int, default=None)
    parser.add_argument(
        "--random-bare", action="store_true", help="also time bare stepping with random actions"
    )
    args = parser.parse_args()
    results = run(
        args.quick,
        envs=tuple(args.envs.split(",")),
        batches=tuple(int(b) for b in args.batches.split(",")),
        reps=args.reps,
        solver_iterations=args.solver_iterations,
        ls_iterations=args.ls_iterations,
        random_bare=args.random_bare,
    )
    print(f"backend: {jax.default_backend()}; solver = iterations/ls_iterations")
    print(format_table(results))


if __name__ == "__main__":
    main()
