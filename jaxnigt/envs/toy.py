"""Small pure-JAX environments with the brax ``Env`` interface (fast tests, CPU demos).

Both environments return :class:`brax.envs.base.State` so the rollout code treats them
exactly like brax MJX environments. Their internal state lives in ``pipeline_state`` (a
float32 array) and their noise key in ``info["rng"]`` as raw ``uint32`` key data, so every
leaf has a fixed dtype and the rollout's ``lax.scan`` carry never changes type.

* :class:`LinearGaussian1D` (``lqr1d``): a scalar linear-Gaussian system whose finite-horizon
  objective ``J_H`` has a closed form for a linear Gaussian policy (see
  :func:`lqr1d_objective`), used to test the policy-gradient estimator.
* :class:`PointMass` (``point_mass``): a 2-D point moving toward a random goal, terminating
  when it gets there; policy gradient visibly improves it in a few hundred steps.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from brax.envs.base import State


def _split_rng(rng_data: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Splits raw key data into (new raw key data, a typed key to use now)."""
    key = jax.random.wrap_key_data(rng_data)
    key, sub = jax.random.split(key)
    return jax.random.key_data(key), sub


def _as_key(rng: jax.Array) -> jax.Array:
    """Accepts a typed key or a legacy ``uint32[2]`` key."""
    if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key):
        return rng
    return jax.random.wrap_key_data(rng)


@dataclasses.dataclass(frozen=True)
class LinearGaussian1D:
    r"""Scalar linear-Gaussian system with a quadratic cost.

    .. math::
        s_0 \sim N(\mu_0, v_0), \quad
        s_{t+1} = A s_t + B a_t + \sigma_w w_t, \quad w_t \sim N(0, 1), \quad
        r_t = -(q s_t^2 + \rho a_t^2).

    The action ``a_t`` is used unclipped. The observation is ``[s_t]``; it never terminates.
    With a linear Gaussian policy ``a = k s + b + σ ε`` the first two moments of ``s_t`` follow
    an exact recursion, so ``J_H`` and its gradient are available in closed form
    (:func:`lqr1d_objective`).
    """

    a: float = 0.9
    b: float = 0.5
    q: float = 1.0
    rho: float = 0.1
    noise_std: float = 0.1
    init_mean: float = 1.0
    init_std: float = 0.2

    observation_size: int = 1
    action_size: int = 1
    backend: str = "jax"

    def reset(self, rng: jax.Array) -> State:
        key, k_init = jax.random.split(_as_key(rng))
        s = self.init_mean + self.init_std * jax.random.normal(k_init, (1,), jnp.float32)
        return State(
            pipeline_state=s,
            obs=s,
            reward=jnp.zeros((), jnp.float32),
            done=jnp.zeros((), jnp.float32),
            metrics={},
            info={"rng": jax.random.key_data(key)},
        )

    def step(self, state: State, action: jax.Array) -> State:
        s = state.pipeline_state
        a = jnp.asarray(action, jnp.float32).reshape((1,))
        rng, k_noise = _split_rng(state.info["rng"])
        reward = -(self.q * s[0] ** 2 + self.rho * a[0] ** 2)
        w = jax.random.normal(k_noise, (1,), jnp.float32)
        s_next = self.a * s + self.b * a + self.noise_std * w
        return state.replace(
            pipeline_state=s_next,
            obs=s_next,
            reward=reward.astype(jnp.float32),
            done=jnp.zeros((), jnp.float32),
            info={"rng": rng},
        )


def lqr1d_objective(
    env: LinearGaussian1D,
    k: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    sigma: jax.typing.ArrayLike,
    horizon: int,
    gamma: jax.typing.ArrayLike,
) -> jax.Array:
    r"""Exact ``J_H = Σ_{t<H} γ^t E[r_t]`` of :class:`LinearGaussian1D` under ``a = k s + b + σ ε``.

    With ``m_t = E[s_t]`` and ``M_t = E[s_t^2]`` and closed-loop gain ``c = A + B k``:

    .. math::
        E[a_t^2] &= k^2 M_t + 2 k b m_t + b^2 + σ^2, \qquad
        E[r_t] = -(q M_t + ρ E[a_t^2]),\\
        m_{t+1} &= c m_t + B b, \qquad
        M_{t+1} = c^2 M_t + 2 c B b m_t + B^2 b^2 + B^2 σ^2 + σ_w^2,

    starting from ``m_0 = μ_0``, ``M_0 = μ_0^2 + v_0``. Everything is polynomial in
    ``(k, b, σ)``, so ``jax.grad`` of this function is the exact ``∇J_H`` (it differentiates
    the closed form, not a sampled estimator).
    """
    m = jnp.asarray(env.init_mean, jnp.float32)
    mm = m**2 + env.init_std**2
    c = env.a + env.b * k
    total = jnp.zeros((), jnp.float32)
    for t in range(horizon):
        ea2 = k**2 * mm + 2 * k * b * m + b**2 + sigma**2
        total = total + gamma**t * -(env.q * mm + env.rho * ea2)
        m, mm = (
            c * m + env.b * b,
            c**2 * mm + 2 * c * env.b * b * m + env.b**2 * (b**2 + sigma**2) + env.noise_std**2,
        )
    return total


@dataclasses.dataclass(frozen=True)
class PointMass:
    r"""2-D point reaching a random goal; terminates on arrival.

    State: position ``p ∈ [-1, 1]^2`` and goal ``g ∈ [-1, 1]^2`` (both uniform at reset).
    Action ``a ∈ [-1, 1]^2`` (clipped) moves the point: ``p' = p + step_size · a``.
    Reward ``r = -‖g − p'‖`` (dense distance penalty), and the episode terminates (``done``)
    once ``‖g − p'‖ < goal_radius``: reaching the goal early stops the penalty, so returns are
    in ``[-H · 2√2, 0]`` and higher is better. Observation: ``[p, g − p]`` (4 entries).
    """

    step_size: float = 0.2
    goal_radius: float = 0.1

    observation_size: int = 4
    action_size: int = 2
    backend: str = "jax"

    def _obs(self, s: jax.Array) -> jax.Array:
        return jnp.concatenate([s[:2], s[2:] - s[:2]])

    def reset(self, rng: jax.Array) -> State:
        key, k_init = jax.random.split(_as_key(rng))
        s = jax.random.uniform(k_init, (4,), jnp.float32, -1.0, 1.0)
        return State(
            pipeline_state=s,
            obs=self._obs(s),
            reward=jnp.zeros((), jnp.float32),
            done=jnp.zeros((), jnp.float32),
            metrics={},
            info={"rng": jax.random.key_data(key)},
        )

    def step(self, state: State, action: jax.Array) -> State:
        s = state.pipeline_state
        a = jnp.clip(jnp.asarray(action, jnp.float32).reshape((2,)), -1.0, 1.0)
        p = s[:2] + self.step_size * a
        s_next = jnp.concatenate([p, s[2:]])
        dist = jnp.linalg.norm(s[2:] - p)
        return state.replace(
            pipeline_state=s_next,
            obs=self._obs(s_next),
            reward=(-dist).astype(jnp.float32),
            done=(dist < self.goal_radius).astype(jnp.float32),
        )


#: name -> (constructor, default horizon, action_scale)
TOY_ENVS = {
    "lqr1d": (LinearGaussian1D, 5, 1.0),
    "point_mass": (PointMass, 30, 1.0),
}
