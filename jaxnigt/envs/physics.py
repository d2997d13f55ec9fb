"""Heterogeneous physics: worker types whose MJX model parameters differ.

Worker type v ∈ {0, …, V−1} steps a copy of the environment whose MJX model has

* every body's mass and rotational inertia times ``mass[v]`` (a uniformly denser or lighter
  robot: the centre of mass and the inertia's axes stay where they are);
* every geom's sliding friction coefficient times ``friction[v]`` (torsional and rolling
  friction unchanged);
* the goal body's position moved by ``goal[v]`` (x, y, in the world frame), for tasks with a
  goal body (brax's ``reacher``: the body ``target``, whose slide joints then measure the goal
  from the moved origin, so its observation keeps the goal's joint coordinates but the
  fingertip-to-goal vector and the reward see the moved goal).

Type 0 is usually the unchanged task (``mass 1, friction 1, goal (0, 0)``). The rewards are the
environment's own: a heavier arm needs larger torques for the same motion, lower friction
makes a walker slip, a moved goal is a different task whose optimal policy differs (Malenia
NIGT's setting: workers whose tasks differ). A config chooses it as ``env.physics``::

    env: {name: reacher, physics: {mass: [1.0, 3.0], goal: [[0, 0], [0.05, -0.05]]}}

The parameters of every type are stacked once (``[V, ...]`` arrays); a rollout slot of type
``v`` indexes them with its (traced) type and steps the environment with that model, so one
program steps every type (MJX takes a model whose arrays differ per vmapped slot). A task
without ``physics`` steps its one model unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: The model fields a physics type changes.
FIELDS = ("body_mass", "body_inertia", "geom_friction", "body_pos")
#: The body a ``goal`` offset moves.
GOAL_BODY = "target"


@dataclasses.dataclass(frozen=True)
class PhysicsTypes:
    """Per-type scales and offsets of an MJX model (module docstring); hashable.

    Attributes:
      mass: length-V scales of every body's mass and inertia (> 0).
      friction: length-V scales of every geom's sliding friction (>= 0).
      goal: length-V ``(dx, dy)`` offsets of the goal body, or None (no goal moved).
    """

    mass: tuple[float, ...]
    friction: tuple[float, ...]
    goal: tuple[tuple[float, float], ...] | None = None

    def __post_init__(self):
        v = len(self.mass)
        if v < 1 or len(self.friction) != v or (self.goal is not None and len(self.goal) != v):
            raise ValueError(
                f"physics: mass, friction and goal need one entry per type, got "
                f"{len(self.mass)}, {len(self.friction)} and "
                f"{None if self.goal is None else len(self.goal)}"
            )
        if any(not m > 0 for m in self.mass):
            raise ValueError(f"physics.mass: scales must be > 0, got {list(self.mass)}")
        if any(not f >= 0 for f in self.friction):
            raise ValueError(f"physics.friction: scales must be >= 0, got {list(self.friction)}")
        if self.goal is not None and any(len(g) != 2 for g in self.goal):
            raise ValueError(f"physics.goal: each offset is (dx, dy), got {list(self.goal)}")

    @classmethod
    def of(cls, mass=None, friction=None, goal=None) -> PhysicsTypes:
        """From lists, any of which may be None (all ones, or no goal); V is the longest.

        Args:
          mass: per-type mass scales, or None.
          friction: per-type friction scales, or None.
          goal: per-type ``(dx, dy)`` goal offsets, or None.

        Returns:
          The :class:`PhysicsTypes`.
        """
        v = max(len(x) for x in (mass, friction, goal) if x is not None)
        ones = (1.0,) * v
        return cls(
            mass=tuple(float(m) for m in mass) if mass is not None else ones,
            friction=tuple(float(f) for f in friction) if friction is not None else ones,
            goal=None if goal is None else tuple(tuple(float(x) for x in g) for g in goal),
        )

    @property
    def num_types(self) -> int:
        """V."""
        return len(self.mass)


def model_of(env: Any) -> Any:
    """The MJX model an environment steps: brax's ``env.sys`` or Playground's
    ``env.mjx_model``."""
    if hasattr(env, "sys"):
        return env.sys
    if hasattr(env, "_mjx_model"):
        return env._mjx_model
    raise ValueError(
        f"{type(env).__name__} has no MJX model (brax's env.sys or Playground's mjx_model): "
        "env.physics needs an MJX environment"
    )


def with_model(env: Any, mjx_model: Any) -> Any:
    """A shallow copy of ``env`` that steps ``mjx_model`` (the same methods, a new model)."""
    twin = copy.copy(env)
    if hasattr(env, "sys"):
        twin.sys = mjx_model
    else:
        twin._mjx_model = mjx_model
    return twin


@functools.lru_cache(maxsize=32)
def _stacked(env: Any, physics: PhysicsTypes) -> dict[str, np.ndarray]:
    """The changed fields of every type, ``[V, ...]`` float32 (cached per env and types)."""
    m = model_of(env)
    mass = np.asarray(physics.mass, np.float32)
    friction = np.asarray(physics.friction, np.float32)
    body_mass = np.asarray(m.body_mass, np.float32)[None] * mass[:, None]
    inertia = np.asarray(m.body_inertia, np.float32)[None] * mass[:, None, None]
    geom_friction = np.repeat(np.asarray(m.geom_friction, np.float32)[None], len(mass), 0)
    geom_friction[:, :, 0] *= friction[:, None]
    body_pos = np.repeat(np.asarray(m.body_pos, np.float32)[None], len(mass), 0)
    if physics.goal is not None:
        body_pos[:, goal_body(env), :2] += np.asarray(physics.goal, np.float32)
    return {
        "body_mass": body_mass,
        "body_inertia": inertia,
        "geom_friction": geom_friction,
        "body_pos": body_pos,
    }


def goal_body(env: Any) -> int:
    """The index of the goal body (:data:`GOAL_BODY`) in ``env``'s model.

    Args:
      env: an MJX environment.

    Returns:
      The body's index.

    Raises:
      ValueError: the model has no such body (a goal offset needs one).
    """
    mj = getattr(model_of(env), "mj_model", None) or getattr(env, "mj_model", None)
    names = [mj.body(i).name for i in range(mj.nbody)] if mj is not None else []
    if GOAL_BODY not in names:
        raise ValueError(
            f"env.physics.goal: the environment has no body {GOAL_BODY!r} to move "
            f"(its bodies: {', '.join(names) or 'unknown'}); goal offsets are for reacher-like "
            "tasks"
        )
    return names.index(GOAL_BODY)


def check(env: Any, physics: PhysicsTypes) -> None:
    """Raises ValueError when ``env`` cannot take ``physics`` (no MJX model, no goal body).

    Args:
      env: the environment.
      physics: its types.
    """
    model_of(env)
    _stacked(env, physics)


def env_of_type(env: Any, physics: PhysicsTypes | None, type_: jax.Array) -> Any:
    """``env`` stepping the model of worker type ``type_`` (``env`` itself without physics).

    Args:
      env: an MJX environment (brax or Playground).
      physics: the types, or None.
      type_: a scalar int32 type (traced; under ``vmap`` each slot its own).

    Returns:
      An environment with the same methods whose model is type ``type_``'s.
    """
    if physics is None:
        return env
    fields = {k: jnp.asarray(v)[type_] for k, v in _stacked(env, physics).items()}
    return with_model(env, model_of(env).replace(**fields))
