"""Small test-only tasks shared by several test files (not a test module itself)."""

import dataclasses

import jax
import jax.numpy as jnp
from brax.envs.base import State


@dataclasses.dataclass(frozen=True)
class Match:
    """One step: s ~ N(0, 1), reward −(a − s)². Type 1 sees −s, so it wants a = −obs.

    With a linear policy a = k·obs + b, type 0 is best at k = 1, type 1 at k = −1, and their
    average objective at k = 0: a clean probe of which objective an aggregator optimizes.
    """

    observation_size: int = 1
    action_size: int = 1

    def reset(self, rng):
        s = jax.random.normal(rng, (1,))
        z = jnp.zeros(())
        return State(pipeline_state=s, obs=s, reward=z, done=z, metrics={}, info={})

    def step(self, state, action):
        r = -jnp.sum((jnp.reshape(action, (1,)) - state.pipeline_state) ** 2)
        return state.replace(reward=r.astype(jnp.float32), done=jnp.ones(()))


def negate(obs):
    return -obs


def match_task():
    """The :class:`Match` task with two worker types (identity and negated observation)."""
    from jaxnigt.envs import TaskEnv, identity

    return TaskEnv(
        name="match",
        env=Match(),
        horizon=1,
        obs_size=1,
        action_size=1,
        obs_transforms=(identity, negate),
    )


def linear_policy():
    """Linear Gaussian policy a = k·obs + b + σε (state-independent σ, no squashing)."""
    from jaxnigt.policy import GaussianPolicy

    return GaussianPolicy(
        obs_size=1, action_size=1, hidden=(), squash=False, state_dependent_std=False
    )


def match_setup(
    *, h, kappa, M, async_block=2, malenia_capacity=None, link="shared", noise="deterministic"
):
    """A ``len(h)``-worker :class:`~jaxnigt.algorithms.core.Setup` on the Match task (worker
    types alternate 0, 1, 0, ...) with a linear policy: the algorithm tests' hand-computable
    cluster."""
    import numpy as np

    from jaxnigt import timing
    from jaxnigt.algorithms.core import Setup

    return Setup(
        task=match_task(),
        policy=linear_policy(),
        tm=timing.make_time_model(len(h), h=h, kappa=kappa, noise=noise),
        worker_types=np.arange(len(h), dtype=np.int32) % 2,
        M=M,
        M_init=M,
        per_worker_batch=None,
        malenia_capacity=malenia_capacity or 4 * M,
        inflight="cancel",
        async_block=async_block,
        link=link,
    )
