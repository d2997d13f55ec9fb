"""Gaussian MLP policy with a tanh-squashed action (docs/algorithms.md), written with flax.linen.

.. math::
    u \\sim N(μ_θ(s), \\mathrm{diag}\\, σ_θ(s)^2), \\qquad a = a_{scale} \\tanh(u), \\qquad
    σ_θ(s) = \\mathrm{softplus}(z_θ(s) + c) + σ_{floor},

with ``c = softplus^{-1}(init_std − σ_floor)`` so that ``σ ≈ init_std`` at initialization.
The score uses the density of ``u``: the tanh Jacobian does not depend on θ.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

Params = Any


class _GaussianMLP(nn.Module):
    hidden: tuple[int, ...]
    action_size: int
    state_dependent_std: bool

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = obs
        for i, width in enumerate(self.hidden):
            x = jnp.tanh(nn.Dense(width, name=f"hidden_{i}")(x))
        # Small mean head: the initial policy is close to zero-mean (a common PG choice).
        mean = nn.Dense(
            self.action_size,
            kernel_init=nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal"),
            name="mean",
        )(x)
        if self.state_dependent_std:
            z = nn.Dense(
                self.action_size,
                kernel_init=nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal"),
                name="std",
            )(x)
        else:
            z = self.param("std_bias", nn.initializers.zeros, (self.action_size,))
            z = jnp.broadcast_to(z, mean.shape)
        return mean, z


@dataclasses.dataclass(frozen=True)
class GaussianPolicy:
    """Diagonal Gaussian policy; hashable, so it can be a static jit argument.

    Attributes:
      obs_size: observation size the policy sees.
      action_size: action dimension.
      hidden: hidden layer widths (tanh). ``()`` gives a linear policy.
      action_scale: ``a = action_scale · tanh(u)`` (or ``action_scale · u`` if not squashed).
      std_floor: added to the softplus std so σ never collapses to 0.
      init_std: σ at initialization (the std head's output starts near zero).
      squash: apply ``tanh`` to produce the action.
      state_dependent_std: σ is a head of the MLP (docs/algorithms.md). ``False`` makes σ a free
        parameter vector (state independent), e.g. for closed-form tests.
    """

    obs_size: int
    action_size: int
    hidden: tuple[int, ...] = (64, 64)
    action_scale: float = 1.0
    std_floor: float = 1e-3
    init_std: float = 0.5
    squash: bool = True
    state_dependent_std: bool = True

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if self.init_std <= self.std_floor:
            raise ValueError("init_std must exceed std_floor")

    @property
    def _module(self) -> _GaussianMLP:
        return _GaussianMLP(self.hidden, self.action_size, self.state_dependent_std)

    @property
    def _std_offset(self) -> float:
        # softplus^{-1}(init_std - floor), so sigma == init_std when the head outputs 0.
        x = self.init_std - self.std_floor
        return x + math.log(-math.expm1(-x))

    def init(self, key: jax.Array) -> Params:
        """Parameters (a flax variables dict) from a PRNG key."""
        return self._module.init(key, jnp.zeros((self.obs_size,), jnp.float32))

    def distribution(self, params: Params, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(mean, std)`` of ``u``, each ``[..., action_size]`` for ``obs [..., obs_size]``."""
        mean, z = self._module.apply(params, obs)
        std = jax.nn.softplus(z + self._std_offset) + self.std_floor
        return mean, std

    def to_action(self, u: jax.Array) -> jax.Array:
        """Maps the pre-squash sample ``u`` to the environment action."""
        return self.action_scale * (jnp.tanh(u) if self.squash else u)

    def sample(self, params: Params, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(u, action)``; ``u ~ N(mean, std²)``, shapes ``[..., action_size]``."""
        mean, std = self.distribution(params, obs)
        u = mean + std * jax.random.normal(key, mean.shape, mean.dtype)
        return u, self.to_action(u)

    def log_prob(self, params: Params, obs: jax.Array, u: jax.Array) -> jax.Array:
        """``log N(u; mean, std²)`` summed over action dims: ``[...]``."""
        mean, std = self.distribution(params, obs)
        z = (u - mean) / std
        return jnp.sum(-0.5 * z**2 - jnp.log(std) - 0.5 * math.log(2 * math.pi), axis=-1)

    def mode(self, params: Params, obs: jax.Array) -> jax.Array:
        """Deterministic action ``action_scale · tanh(mean)``."""
        mean, _ = self.distribution(params, obs)
        return self.to_action(mean)


def make_policy(task: Any, **kwargs: Any) -> GaussianPolicy:
    """A :class:`GaussianPolicy` sized for ``task`` (a ``TaskEnv``); kwargs override fields."""
    kwargs.setdefault("action_scale", task.action_scale)
    return GaussianPolicy(obs_size=task.obs_size, action_size=task.action_size, **kwargs)


def num_params(params: Params) -> int:
    """Total number of scalars in a parameter pytree (d)."""
    return int(sum(x.size for x in jax.tree.leaves(params)))
