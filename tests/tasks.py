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
    from jaxnigt.rl.policy import GaussianPolicy

    return GaussianPolicy(
        obs_size=1, action_size=1, hidden=(), squash=False, state_dependent_std=False
    )


def match_setup(*, h, kappa, M, link="shared", noise="deterministic"):
    """A ``len(h)``-worker :class:`~jaxnigt.algorithms.core.Setup` on the Match task (worker
    types alternate 0, 1, 0, ...) with a linear policy: the algorithm tests' hand-computable
    cluster (the engines' own options come from the ``HParams`` a test builds with it)."""
    import numpy as np

    from jaxnigt.algorithms.core import Setup
    from jaxnigt.cluster import model

    types = np.arange(len(h), dtype=np.int32) % 2
    cluster = model.make_cluster_model(
        len(h), h=h, kappa=kappa, noise=noise, worker_types=types, link=link
    )
    return Setup(task=match_task(), policy=linear_policy(), cluster=cluster, M=M, M_init=M)


# --- deterministic faults and state-independent endings ------------------------------------


def _uniform_bits(key, salt: int):
    """A uint32 drawn from ``key``: integer arithmetic only (threefry), so it is the same on
    every CPU, XLA version and batch size."""
    return jax.random.bits(jax.random.fold_in(key, salt), (), jnp.uint32)


def _threshold(rate: float):
    return jnp.uint32(min(int(rate * 2**32), 2**32 - 1))


@dataclasses.dataclass(frozen=True)
class PoisonedPointMass:
    """point_mass whose episodes are *poisoned* with probability ``nan_rate``: a poisoned
    episode starts from a NaN observation (a corrupt reset), so the policy's action, its
    log-probability and the policy gradient of that trajectory are NaN. (A NaN *reward* or a
    NaN state after a step would not do: the rollout ends such an episode, as it must for a
    physics blow-up.) Whether an episode is poisoned is decided at reset from the bits of its
    key (an integer comparison), never from a float the dynamics computed, so the non-finite
    gradient appears at the same trajectories on every machine: the hardware-independent way
    to test the runner's ``on_nonfinite`` handling."""

    nan_rate: float = 0.01
    observation_size: int = 4
    action_size: int = 2
    backend: str = "jax"

    def _base(self):
        from jaxnigt.envs.toy import PointMass

        return PointMass()

    def reset(self, rng):
        state = self._base().reset(rng)
        poison = _uniform_bits(rng, 0x9E37) < _threshold(self.nan_rate)
        nan = jnp.float32(jnp.nan)
        return state.replace(
            pipeline_state=jnp.where(poison, nan, state.pipeline_state),
            obs=jnp.where(poison, nan, state.obs),
        )

    def step(self, state, action):
        return self._base().step(state, action)


@dataclasses.dataclass(frozen=True)
class TimedPointMass:
    """point_mass whose episode ends at a step drawn at reset (uniform in
    ``[min_length, max_length]`` from the key's bits), not when the point reaches the goal.

    Its endings do not depend on the state, so two different compiled programs of the same
    computation (which may differ in the last bits of a float) end the same episodes at the
    same steps: results then differ by float32 rounding only and can be compared with a
    tolerance. point_mass itself ends at ``dist < 0.1``, where one last-bit difference can
    flip an ending and with it the whole rest of a run."""

    min_length: int = 5
    max_length: int = 30
    observation_size: int = 4
    action_size: int = 2
    backend: str = "jax"

    def _base(self):
        from jaxnigt.envs.toy import PointMass

        return PointMass(goal_radius=-1.0)  # never reaches: the clock below ends episodes

    def reset(self, rng):
        state = self._base().reset(rng)
        span = jnp.uint32(self.max_length - self.min_length + 1)
        length = (self.min_length + _uniform_bits(rng, 0x51ED) % span).astype(jnp.int32)
        return state.replace(info={**state.info, "left": length})

    def step(self, state, action):
        nxt = self._base().step(state, action)
        left = state.info["left"] - 1
        return nxt.replace(done=(left <= 0).astype(jnp.float32), info={**nxt.info, "left": left})


#: test-only environments for configs: ``name -> (constructor, horizon, action_scale)`` in
#: the shape of ``jaxnigt.envs.toy.TOY_ENVS``; :func:`register_test_envs` adds them.
TEST_ENVS = {
    "nan_point_mass": (PoisonedPointMass, 30, 1.0),
    "timed_point_mass": (TimedPointMass, 30, 1.0),
}


def register_test_envs(monkeypatch=None):
    """Makes the :data:`TEST_ENVS` names valid in configs (``env.name``): through pytest's
    ``monkeypatch`` in-process, or for good in a child process (pass nothing)."""
    from jaxnigt.envs import toy

    for name, entry in TEST_ENVS.items():
        if monkeypatch is None:
            toy.TOY_ENVS[name] = entry
        else:
            monkeypatch.setitem(toy.TOY_ENVS, name, entry)


def assert_plot(path, min_size=(200, 150)):
    """``path`` is a PNG image that shows something: it decodes, is at least ``min_size``
    pixels (width, height), and is not one flat colour."""
    import matplotlib.image
    import numpy as np

    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert width >= min_size[0] and height >= min_size[1], (path, image.shape)
    assert np.ptp(image[..., :3]) > 0.1, f"{path}: one flat colour"
