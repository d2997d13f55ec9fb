"""Environments: brax MJX envs by name, pure-JAX toy envs, a user's own registered envs,
heterogeneous worker types.

An environment of one's own joins by one call from the user's own module (a plugin,
:mod:`jaxnigt.plugins`): :func:`register_env` with a constructor of an object that has
``reset(key) -> State`` and ``step(state, action) -> State`` (brax's :class:`State`:
``obs``, ``reward``, ``done``) and ``observation_size`` / ``action_size``;
``examples/my_env.py`` is a whole one.  Configs name it like any other (``env.name``).

Every environment is wrapped in a :class:`TaskEnv`, which fixes the horizon and the
observation transforms that define the worker types (docs/getting_started.md). Example::

    task = make_env("reacher")                       # H = 50, homogeneous
    het = make_heterogeneous(task, "sign_flip")      # V = 2: (s, 0) and (-s, 1)
    types = worker_types(10, het.num_types)          # i mod V
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import warnings
from collections.abc import Callable
from typing import Any

import jax

# Importing brax imports mujoco.mjx, which *prints* "Failed to import warp" when the optional
# GPU package is absent (always on CPU); keep that line out of every command's output. brax
# also warns on every env construction that its own pipelines are unmaintained (jaxnigt uses
# only its MJX-backed envs).
with contextlib.redirect_stdout(io.StringIO()):
    import brax.envs  # noqa: F401
warnings.filterwarnings("ignore", message=r"Brax System, pip", category=UserWarning)

from brax.envs.base import State  # noqa: E402

from jaxnigt.envs import physics as physics_lib  # noqa: E402
from jaxnigt.envs import playground, toy  # noqa: E402
from jaxnigt.envs.hetero import SignFlip, make_heterogeneous, worker_types  # noqa: E402
from jaxnigt.envs.mjx import brax_default_horizon, brax_env_names, make_brax_env  # noqa: E402
from jaxnigt.envs.physics import PhysicsTypes  # noqa: E402


def identity(obs: jax.Array) -> jax.Array:
    """The observation transform of a homogeneous task."""
    return obs


@dataclasses.dataclass(frozen=True)
class TaskEnv:
    """An environment, its horizon, and the observation transforms of its worker types.

    Hashable (frozen, compared by field; the env object by identity), so it can be a static
    argument of ``jax.jit``.

    Attributes:
      name: registry name of the underlying environment.
      env: object with ``reset(key) -> brax.envs.base.State`` and
        ``step(state, action) -> State`` (a brax MJX env or a toy env).
      horizon: H, the static number of steps per trajectory.
      obs_size: observation size as the policy sees it (after the type transform).
      action_size: action dimension.
      action_scale: actions passed to ``env.step`` lie in ``[-action_scale, action_scale]``
        (brax: 1.0).
      obs_transforms: length-V tuple of callables ``obs -> obs'`` (all the same output size);
        ``(identity,)`` when homogeneous. Worker type v sees ``obs_transforms[v](obs)``.
      raw_obs_size: the environment's own observation size (before the transform).
      terminates: whether episodes can end before H. Rollouts of such tasks check every few
        steps whether the whole batch has ended and then stop early; for tasks that never
        terminate (reacher) the loop is one scan over H.
      lanes: rollout lanes per trajectory of a batch, in ``(0, 1]``. Below 1 a batch of S
        trajectories runs on ``ceil(lanes · S)`` lanes that each take the next trajectory of
        the batch when theirs terminates (refill): dead episodes stop occupying the batch.
        Only tasks that terminate use it; the trajectories are the same either way.
    """

    name: str
    env: Any
    horizon: int
    obs_size: int
    action_size: int
    action_scale: float = 1.0
    obs_transforms: tuple[Callable[[jax.Array], jax.Array], ...] = (identity,)
    raw_obs_size: int | None = None
    terminates: bool = True
    lanes: float = 1.0
    physics: PhysicsTypes | None = None

    def __post_init__(self):
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")
        if len(self.obs_transforms) < 1:
            raise ValueError("obs_transforms must hold at least one transform")
        if not 0.0 < self.lanes <= 1.0:
            raise ValueError(f"lanes must be in (0, 1], got {self.lanes}")
        if self.raw_obs_size is None:
            object.__setattr__(self, "raw_obs_size", self.obs_size)
        kinds = len(self.obs_transforms)
        if self.physics is not None and kinds > 1 and self.physics.num_types != kinds:
            raise ValueError(
                f"{kinds} observation types but {self.physics.num_types} physics types: "
                "both describe the same worker types"
            )

    @property
    def num_types(self) -> int:
        """V, the number of worker types."""
        if self.physics is not None:
            return self.physics.num_types
        return len(self.obs_transforms)

    def env_of_type(self, type_: jax.Array) -> Any:
        """The environment worker type ``type_`` steps (``env`` unless ``physics`` is set).

        Args:
          type_: a scalar int32 type (traced: each rollout slot its own).

        Returns:
          ``env``, or a copy of it stepping the type's MJX model.
        """
        return physics_lib.env_of_type(self.env, self.physics, type_)


#: Rollout lanes per trajectory for tasks that terminate (``TaskEnv.lanes``; config
#: ``env.lanes``): measured on hopper, H = 200, a batch of 20 on a 2-core CPU, the batch on
#: half as many lanes was fastest (docs/benchmarks.md, ``gym``).
DEFAULT_LANES = 0.5

#: Environments whose ``done`` is never set (brax: no healthy-range termination; lqr1d).
_NEVER_TERMINATE = frozenset({"reacher", "pusher", "swimmer", "halfcheetah", "lqr1d"})


@dataclasses.dataclass(frozen=True)
class _Registered:
    make: Callable[..., Any]
    horizon: int
    action_scale: float
    terminates: bool


_USER_ENVS: dict[str, _Registered] = {}


def register_env(
    name: str,
    make: Callable[..., Any],
    *,
    horizon: int,
    action_scale: float = 1.0,
    terminates: bool = True,
) -> None:
    """Registers an environment of one's own under ``name`` (module docstring).

    Args:
      name: the name configs use (``env.name``); not one of brax's or the library's.
      make: ``(**kwargs) -> env``: an object with ``reset(key) -> State``,
        ``step(state, action) -> State``, ``observation_size`` and ``action_size``, pure JAX
        (it is vmapped over workers and jitted).
      horizon: H, the default steps per trajectory (a config's ``env.horizon`` overrides it).
      action_scale: actions passed to ``step`` lie in ``[-action_scale, action_scale]``.
      terminates: whether an episode can end before H (``done``); False lets rollouts skip
        the check.

    Raises:
      ValueError: a name that is taken by another environment, or a bad horizon or scale.
    """
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValueError(f"environment name {name!r}: expected a non-empty string, no spaces")
    if name in toy.TOY_ENVS or name in brax_env_names() or playground.is_playground(name):
        raise ValueError(f"environment {name!r} is one of the library's; choose another name")
    known = _USER_ENVS.get(name)
    if known is not None and getattr(known.make, "__qualname__", None) != getattr(
        make, "__qualname__", None
    ):
        raise ValueError(f"environment {name!r} is already registered ({known.make!r})")
    if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 1:
        raise ValueError(
            f"register_env({name!r}): horizon must be an integer >= 1, got {horizon!r}"
        )
    if not action_scale > 0:
        raise ValueError(f"register_env({name!r}): action_scale must be > 0, got {action_scale}")
    _USER_ENVS[name] = _Registered(make, int(horizon), float(action_scale), bool(terminates))


def list_envs() -> list[str]:
    """Names accepted by :func:`make_env`.

    Returns:
      brax's environment names, then the toy environments', then Playground's (with the
      ``playground`` extra: :mod:`jaxnigt.envs.playground`), then the registered ones.
    """
    return brax_env_names() + sorted(toy.TOY_ENVS) + playground.names() + sorted(_USER_ENVS)


def default_horizon(name: str) -> int:
    """Reacher 50, other brax envs 1000 (locomotion), Playground's suite 1000, toy and
    registered envs their own.

    Args:
      name: an environment's name.

    Returns:
      Its default horizon.

    Raises:
      ValueError: an unknown name.
    """
    if name in _USER_ENVS:
        return _USER_ENVS[name].horizon
    if name in toy.TOY_ENVS:
        return toy.TOY_ENVS[name][1]
    if name in brax_env_names():
        return brax_default_horizon(name)
    if playground.is_playground(name):
        return playground.EPISODE_LENGTH
    raise ValueError(f"unknown environment {name!r}; available: {', '.join(list_envs())}")


def make_env(
    name: str,
    *,
    horizon: int | None = None,
    solver_iterations: int | None = None,
    ls_iterations: int | None = None,
    **kwargs: Any,
) -> TaskEnv:
    """Builds a homogeneous :class:`TaskEnv` by name.

    Args:
      name: a brax env name (created with ``backend="mjx"``), a toy env name (``lqr1d``,
        ``point_mass``), a Playground suite name (``playground/ReacherEasy``) or a registered
        one; see :func:`list_envs`.
      horizon: H; defaults to :func:`default_horizon`.
      solver_iterations: MJX constraint-solver iterations (``sys.opt.iterations``); ``None``
        keeps brax's default. Ignored-with-error for toy envs.
      ls_iterations: MJX line-search iterations (``sys.opt.ls_iterations``).
      **kwargs: forwarded to the env constructor.

    Returns:
      The :class:`TaskEnv`: reset, step and observation/action sizes of one worker type.

    Raises:
      ValueError: unknown name (the message lists the available ones).
    """
    if horizon is None:
        horizon = default_horizon(name)
    if name in _USER_ENVS:
        return _registered_task(name, int(horizon), solver_iterations, ls_iterations, kwargs)
    if name in toy.TOY_ENVS:
        if solver_iterations is not None or ls_iterations is not None:
            raise ValueError(f"toy env {name!r} has no MJX solver settings")
        cls, _, scale = toy.TOY_ENVS[name]
        env = cls(**kwargs)
        return TaskEnv(
            name=name,
            env=env,
            horizon=int(horizon),
            obs_size=env.observation_size,
            action_size=env.action_size,
            action_scale=scale,
            terminates=name not in _NEVER_TERMINATE,
        )
    if playground.is_playground(name):
        if kwargs:
            raise ValueError(f"environment {name!r} takes no arguments, got {sorted(kwargs)}")
        env, obs_size, action_size = playground.make_playground_env(
            name, solver_iterations=solver_iterations, ls_iterations=ls_iterations
        )
        return TaskEnv(name, env, int(horizon), obs_size, action_size, terminates=False)
    env, obs_size, action_size = make_brax_env(
        name, solver_iterations=solver_iterations, ls_iterations=ls_iterations, **kwargs
    )
    return TaskEnv(
        name=name,
        env=env,
        horizon=int(horizon),
        obs_size=obs_size,
        action_size=action_size,
        action_scale=1.0,
        terminates=name not in _NEVER_TERMINATE,
    )


def with_physics(task: TaskEnv, physics: PhysicsTypes) -> TaskEnv:
    """``task`` with worker types whose MJX model differs (:mod:`jaxnigt.envs.physics`).

    Args:
      task: an MJX task (brax or Playground); homogeneous, or with as many observation types
        as ``physics`` has types.
      physics: the types' mass and friction scales and goal offsets.

    Returns:
      The :class:`TaskEnv` with ``physics`` set.

    Raises:
      ValueError: an environment with no MJX model, a goal offset without a goal body, or a
        type count that differs from the observation types'.
    """
    try:
        physics_lib.check(task.env, physics)
    except ValueError as e:
        raise ValueError(f"environment {task.name!r}: {e}") from None
    return dataclasses.replace(task, physics=physics)


def _registered_task(name, horizon, solver_iterations, ls_iterations, kwargs) -> TaskEnv:
    """The :class:`TaskEnv` of a :func:`register_env` environment, its interface checked."""
    if solver_iterations is not None or ls_iterations is not None:
        raise ValueError(f"environment {name!r} has no MJX solver settings")
    entry = _USER_ENVS[name]
    env = entry.make(**kwargs)
    lacks = [a for a in ("reset", "step", "observation_size", "action_size") if not hasattr(env, a)]
    if lacks:
        raise ValueError(f"environment {name!r}: its object has no {', '.join(lacks)}")
    return TaskEnv(
        name=name,
        env=env,
        horizon=horizon,
        obs_size=int(env.observation_size),
        action_size=int(env.action_size),
        action_scale=entry.action_scale,
        terminates=entry.terminates,
    )


__all__ = [
    "PhysicsTypes",
    "SignFlip",
    "State",
    "TaskEnv",
    "default_horizon",
    "identity",
    "list_envs",
    "make_env",
    "make_heterogeneous",
    "register_env",
    "with_physics",
    "worker_types",
]
