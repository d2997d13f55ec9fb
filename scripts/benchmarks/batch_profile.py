"""Where a terminating batch's time goes: rollout vs policy gradient, and alive fraction.

One batch of ``--batch`` hopper trajectories (H = ``--horizon``, MJX solver 1/4 by default)
at the initial policy, timed interleaved: the rollout alone (library default: early exit
once every slot has ended), rollout + ``policy_gradient``, and the gradient alone on a
recorded batch. Prints the trajectory lengths, so the share of alive slot-steps in the
steps the batch computed can be read off.

Usage::

    python scripts/benchmarks/batch_profile.py [--env hopper] [--horizon 200] [--batch 20]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

# Run as a script, its own folder (scripts/benchmarks) is first on the path.
from common import interleaved

from jaxnigt.envs import make_env
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.policy import make_policy
from jaxnigt.rl.rollout import rollout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="hopper")
    parser.add_argument("--horizon", type=int, default=200)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--solver-iterations", type=int, default=1)
    parser.add_argument("--ls-iterations", type=int, default=4)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    task = make_env(
        args.env,
        horizon=args.horizon,
        solver_iterations=args.solver_iterations,
        ls_iterations=args.ls_iterations,
    )
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    S = args.batch
    types = jnp.zeros((S,), jnp.int32)
    weights = jnp.full((S,), 1.0 / S)
    key = jax.random.key(3)

    def roll(p, k):
        return rollout(task, policy, p, jax.random.split(k, S), types)

    def grad(p, traj):
        return policy_gradient(policy, p, traj, weights, 0.99)

    roll_j = jax.jit(roll)
    both_j = jax.jit(lambda p, k: grad(p, roll(p, k)))
    grad_j = jax.jit(grad)
    traj = roll_j(params, key)
    lengths = jax.device_get(traj.lengths)
    med = interleaved(
        {
            "rollout": lambda: roll_j(params, key),
            "rollout + gradient": lambda: both_j(params, key),
            "gradient alone": lambda: grad_j(params, traj),
        },
        args.reps,
    )
    print(
        f"{args.env} H={args.horizon} batch={S} solver={args.solver_iterations}/"
        f"{args.ls_iterations}; lengths {lengths.tolist()}"
    )
    print(
        f"  mean length {lengths.mean():.1f}, longest {lengths.max()} (the batch computes up "
        f"to the next block boundary after it); alive share of the batch's slot-steps "
        f"~{lengths.sum() / (S * lengths.max()):.0%}"
    )
    for name, t in med.items():
        print(f"  {name:<20} {1e3 * t:8.1f} ms")


if __name__ == "__main__":
    main()
