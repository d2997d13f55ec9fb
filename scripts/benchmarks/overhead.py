"""Training overhead: full ``rennala_nigt`` rounds vs bare rollout + policy gradient.

For each (env, H, M) it measures, interleaved in one process:

(a) ``Trainer.run_chunk(state, R)`` under ``jax.jit``: R Rennala NIGT rounds (schedule over
    n simulated workers, weights, M rollouts, one backward pass, NIGT update, metrics);
(b) the same R batches of M trajectories with nothing else: ``lax.scan`` over R keys of
    ``rollout`` (vmapped over M slots) + ``policy_gradient``, at the trainer's initial
    parameters (the point round 0 rolls out at).

``ratio = wall(b) / wall(a)`` is the fraction of bare throughput the trainer keeps. It is a
like-for-like comparison only when both sides do the same physics work. For tasks that can
terminate (hopper) the rollout stops once every slot of the batch has ended, so each side's
cost would be set by its longest-surviving trajectory, and the two sides roll out different
trajectories (other keys; the trainer's parameters move). The target row therefore runs both
sides with the early exit off (``early exit = off``: the task with ``terminates=False``,
one scan over all H steps, identical trajectories and masking): both compute exactly R·M·H
steps. The full form adds the early-exit row for information (``early exit = on``).
``ratio at lr=0`` times the same compiled trainer with the (traced) learning rate at 0, so
its parameters stay at the bare side's point: the physics work is then statistically the
same on both sides (MJX's solver iterations depend on the state, so moving parameters change
the cost per step), and the ratio isolates the framework's own overhead.
``alive steps/s`` counts only steps before termination, the trainer's from its ``env_steps``
metric and the baseline's from the trajectories' lengths.

Usage::

    python scripts/bench.py overhead [--quick]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from benchmarks.common import (
    compiled_chunk,
    format_table,
    interleaved,
    make_config,
)

from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.rollout import rollout
from jaxnigt.run.trainer import make_task

TARGET = 0.85


def bench_one(
    env: str, horizon: int, M: int, rounds: int, reps: int, n: int = 10, early_exit: bool = False
) -> dict:
    """One (env, H, M) setting; see the module docstring."""
    cfg = make_config(env, n=n, M=M, horizon=horizon)
    # Compiled once per process (`gym` times the same hopper program at H = 200).
    tr, state, train, _ = compiled_chunk(cfg, "rennala_nigt", rounds, early_exit=early_exit)
    # With early_exit=False the trainer's task already has terminates=False: the bare side
    # rolls out on the very same task.
    task, policy = tr.setup.task, tr.setup.policy
    terminates = make_task(cfg).terminates
    gamma = tr.hparams.gamma
    types = jnp.zeros((M,), jnp.int32)
    weights = jnp.full((M,), 1.0 / M, jnp.float32)

    def bare_fn(params, key):
        def body(acc, k):
            traj = rollout(task, policy, params, jax.random.split(k, M), types)
            g, stats = policy_gradient(policy, params, traj, weights, gamma)
            return jax.tree.map(jnp.add, acc, g), stats["sum_length"]

        zeros = jax.tree.map(jnp.zeros_like, params)
        return jax.lax.scan(body, zeros, jax.random.split(key, rounds))

    bare = jax.jit(bare_fn)
    key = jax.random.key(1)
    # The same compiled program with the traced learning rate at 0: the parameters stay at
    # the bare side's point, so the two sides do statistically the same physics work and
    # the ratio isolates the framework's own cost (MJX's solver work depends on the state).
    state_lr0 = jax.jit(tr.init)(jax.random.key(0), tr.hyper(learning_rate=0.0))
    med = interleaved(
        {
            "train": lambda: train(state),
            "train_lr0": lambda: train(state_lr0),
            "bare": lambda: bare(state.params, key),
        },
        reps,
    )
    _, metrics = train(state)
    _, lengths = bare(state.params, key)
    alive_train = float(metrics["env_steps"][-1] - state.counters.env_steps)
    alive_bare = float(np.sum(np.asarray(lengths)))
    grads = float(np.sum(np.asarray(metrics["grads"])))
    steps = rounds * M * horizon
    ratio = med["bare"] / med["train"]
    return {
        "env": env,
        "early_exit": "on" if (early_exit and terminates) else ("off" if terminates else "-"),
        "H": horizon,
        "M": M,
        "n": n,
        "rounds": rounds,
        "grads_per_round": grads / rounds,
        "train_round_ms": 1e3 * med["train"] / rounds,
        "bare_round_ms": 1e3 * med["bare"] / rounds,
        "train_steps_per_s": steps / med["train"],
        "bare_steps_per_s": steps / med["bare"],
        "train_alive_steps_per_s": alive_train / med["train"],
        "bare_alive_steps_per_s": alive_bare / med["bare"],
        "ratio": ratio,
        "train_lr0_round_ms": 1e3 * med["train_lr0"] / rounds,
        "ratio_lr0": med["bare"] / med["train_lr0"],
        "target": TARGET if not early_exit else None,
        "met": bool(ratio >= TARGET) if not early_exit else None,
        "reps": reps,
    }


def run(quick: bool = False, envs: tuple[str, ...] = ("reacher", "hopper")) -> list[dict]:
    """Reacher H = 50, M = 50; hopper M = 20 at H = 1000 (quick: H = 200), early exit off;
    the full form adds hopper with the early exit on (information, no target)."""
    settings = {
        "reacher": dict(horizon=50, M=50, rounds=10, reps=7 if quick else 11),
        "hopper": dict(horizon=200 if quick else 1000, M=20, rounds=2, reps=2 if quick else 3),
    }
    rows = []
    for env in envs:
        s = settings.get(env, dict(horizon=100, M=20, rounds=2, reps=3))
        rows.append(bench_one(env, **s))
        if not quick and rows[-1]["early_exit"] == "off":
            rows.append(bench_one(env, early_exit=True, **s))
    return rows


COLUMNS = (
    ("env", "env", ""),
    ("early_exit", "early exit", ""),
    ("H", "H", "d"),
    ("M", "M", "d"),
    ("rounds", "R", "d"),
    ("train_round_ms", "train ms/round", ".1f"),
    ("bare_round_ms", "bare ms/batch", ".1f"),
    ("train_steps_per_s", "train steps/s", ",.0f"),
    ("bare_steps_per_s", "bare steps/s", ",.0f"),
    ("train_alive_steps_per_s", "train alive/s", ",.0f"),
    ("bare_alive_steps_per_s", "bare alive/s", ",.0f"),
    ("ratio", "ratio", ".3f"),
    ("met", ">=0.85", ""),
    ("train_lr0_round_ms", "train lr=0 ms/round", ".1f"),
    ("ratio_lr0", "ratio at lr=0", ".3f"),
)


def format_rows(rows: list[dict]) -> str:
    return format_table(rows, COLUMNS)
