"""An environment of one's own, as a plugin: a 1-D point that should stop at a random goal.

Load it with ``jaxnigt --plugin examples/my_env.py ...`` (or ``plugins: [examples/my_env.py]``
in a config); then ``env: {name: line_goal}`` trains on it like on the library's tasks.
"""

import dataclasses

import jax
import jax.numpy as jnp

from jaxnigt import envs


@dataclasses.dataclass(frozen=True)
class LineGoal:
    """Position x and goal g in [-1, 1]; the action moves x by at most ``speed``; the reward
    is −|g − x| each step (higher is better); observation (x, g − x)."""

    speed: float = 0.25
    observation_size: int = 2
    action_size: int = 1

    def reset(self, key: jax.Array) -> envs.State:
        s = jax.random.uniform(key, (2,), jnp.float32, -1.0, 1.0)  # a raw or a typed key
        zero = jnp.zeros((), jnp.float32)
        return envs.State(pipeline_state=s, obs=self._obs(s), reward=zero, done=zero)

    def step(self, state: envs.State, action: jax.Array) -> envs.State:
        s = state.pipeline_state
        x = jnp.clip(s[0] + self.speed * jnp.clip(action.reshape(()), -1.0, 1.0), -1.0, 1.0)
        s = s.at[0].set(x)
        return state.replace(pipeline_state=s, obs=self._obs(s), reward=-jnp.abs(s[1] - x))

    @staticmethod
    def _obs(s: jax.Array) -> jax.Array:
        return jnp.stack([s[0], s[1] - s[0]])


envs.register_env("line_goal", LineGoal, horizon=20, terminates=False)
