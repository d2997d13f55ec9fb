"""Rennala NIGT on point_mass, one round at a time, with jaxnigt's public names only.

A round of Rennala NIGT (docs/algorithms.md, docs/cluster_model.md), top to bottom:

1. draw the compute times of the round: every worker's next gradient, and ``M`` more for
   the ``min(n, M)`` workers whose first one ends earliest (the only ones that can count);
2. the rule decides which gradients land: the first ``M`` to complete, across all workers;
   the round ends there, plus one AllReduce (``kappa``); the other workers' work in flight
   is cancelled;
3. each landed gradient is a policy gradient ``g_H`` of one trajectory rolled out at the
   broadcast point y_t; each worker sums its own: ``s_i`` and their number ``b_i``;
4. Rennala's reduction: the mean of every gradient delivered, ``sum_i s_i / sum_i b_i``;
5. one NIGT step (an optax transformation: the held params are the point y_t where the
   next gradients are taken; ``jaxnigt.nigt_eval_params`` gives the iterate x_t to deploy).

``tests/test_examples.py`` holds this file equal, round by round, to the library's own run
(``jaxnigt run`` / ``jaxnigt.make_trainer``) of the same config and key.  Run it:
``python examples/rennala_nigt_minimal.py``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

import jaxnigt
from jaxnigt import cluster, envs
from jaxnigt.rl.collect import slot_keys
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.policy import make_policy
from jaxnigt.rl.rollout import evaluate, rollout


class Run(NamedTuple):
    """What a run carries from one round to the next."""

    params: Any  # y_t: where the round's trajectories are rolled out
    opt_state: Any  # NIGT's state: the iterate x_t and the direction d_t
    key: jax.Array  # the key of the next round
    time: jax.Array  # simulated time: the next round's start
    busy_until: jax.Array  # [n] when each worker is free to start the next round's work


def init(key: jax.Array, policy, model, optimizer) -> Run:
    """x_0 = y_0 from the policy's initializer, at time 0 with every worker free."""
    k_params, k_run = jax.random.split(key)
    params = policy.init(k_params)
    zeros = jnp.zeros((model.n,), jnp.float32)
    return Run(params, optimizer.init(params), k_run, jnp.float32(0.0), zeros)


def one_gradient(policy, params, trajectory, gamma):
    """g_H of one trajectory at ``params`` (an ascent direction on the return)."""
    single = jax.tree.map(lambda x: x[None], trajectory)
    return policy_gradient(policy, params, single, jnp.ones(1), gamma)[0]


def rennala_round(run: Run, task, policy, model, optimizer, *, M: int, gamma: float):
    """One round of Rennala NIGT; returns the next :class:`Run` and the round's schedule."""
    key, k_times, k_rollouts = jax.random.split(run.key, 3)
    t0 = run.time
    # 1. The compute times: a worker starts when it is free, never before the round.
    start = jnp.maximum(run.busy_until - t0, 0.0)
    first, rows, tau_rows = cluster.sample_rennala_times(model, k_times, start, M=M, t0=t0)
    # 2. Which gradients land: M slots, each a (worker, k-th gradient of the round) pair.
    sched = cluster.rennala_round(model, t0, run.busy_until, first, rows, tau_rows, M=M)
    # 3. Each slot's trajectory (its key depends on round, worker and k only), its gradient,
    #    and each worker's sum and count, what it holds before the AllReduce.
    keys = slot_keys(k_rollouts, sched.slot_worker, sched.slot_rank)
    types = model.worker_types[sched.slot_worker]
    trajectories = rollout(task, policy, run.params, keys, types)
    grads = jax.vmap(lambda tr: one_gradient(policy, run.params, tr, gamma))(trajectories)
    sums, counts = cluster.worker_sums(grads, sched.slot_worker, sched.slot_valid, model.n)
    # 4. The AllReduce: Rennala's reduction of the sums and counts.
    g = cluster.rennala_reduce(sums, counts)
    # 5. NIGT descends on -g (g ascends the return).
    updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, g), run.opt_state, run.params)
    params = optax.apply_updates(run.params, updates)
    return Run(params, opt_state, key, sched.t_end, sched.busy_until), sched


def train(
    key: jax.Array,
    *,
    rounds: int,
    n: int = 4,
    M: int = 8,
    h: Any = "sqrt",
    kappa: Any = 1.0,
    noise: str = "exponential",
    learning_rate: float = 0.03,
    eta: float = 0.3,
    gamma: float = 0.99,
    env: str = "point_mass",
):
    """``rounds`` rounds of Rennala NIGT from ``key``; returns the task, the policy, the
    :class:`Run` after each round (``runs[0]``: before the first) and each round's schedule."""
    task = envs.make_env(env)
    policy = make_policy(task)
    types = envs.worker_types(n, task.num_types)
    model = cluster.make_cluster(n, h=h, kappa=kappa, noise=noise, worker_types=types)
    optimizer = jaxnigt.nigt(learning_rate, eta)
    step = jax.jit(lambda run: rennala_round(run, task, policy, model, optimizer, M=M, gamma=gamma))
    runs, schedules = [init(key, policy, model, optimizer)], []
    for _ in range(rounds):
        run, sched = step(runs[-1])
        runs.append(run)
        schedules.append(sched)
    return task, policy, runs, schedules


def main(rounds: int = 60) -> None:
    task, policy, runs, _ = train(jax.random.key(0), rounds=rounds)
    for r in range(0, rounds + 1, 10):
        x = jaxnigt.nigt_eval_params(runs[r].opt_state)  # the iterate x_t, to deploy
        ret = float(evaluate(task, policy, x, jax.random.key(1), 16).mean())
        print(f"round {r:3d}  time {float(runs[r].time):7.1f}  return {ret:7.2f}")


if __name__ == "__main__":
    main()
