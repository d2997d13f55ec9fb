"""brax MJX environments by name.

Environments are created with ``brax.envs.get_environment(name, backend="mjx", **kwargs)``.
brax 0.14 exposes no constructor argument for the MJX constraint solver, so the optional
``solver_iterations`` / ``ls_iterations`` are applied after construction by replacing the
environment's system::

    env.sys = env.sys.tree_replace({"opt.iterations": n, "opt.ls_iterations": m})

(``System`` is an ``mjx.Model``; MJX's solver reads ``m.opt.iterations`` and
``m.opt.ls_iterations``, and both are static, so each setting is its own compilation.)
``None`` keeps brax's default for that env (for example hopper/walker2d 4 and 50,
humanoid 1 and 4).

The observation size comes from ``jax.eval_shape`` on the jitted reset: brax's
``env.observation_size`` runs an un-jitted reset, ~30 s with MJX on CPU.
"""

from __future__ import annotations

import functools
from typing import Any

import jax

#: Default horizons: reacher uses Gym's 50-step episodes; other brax envs 1000.
_BRAX_HORIZONS = {"reacher": 50}
_DEFAULT_BRAX_HORIZON = 1000


def brax_env_names() -> list[str]:
    """Names in brax's environment registry."""
    from brax import envs as brax_envs

    registry = getattr(brax_envs, "_envs", None)
    if registry is None:  # pragma: no cover - older/newer brax without the private registry
        return ["ant", "halfcheetah", "hopper", "humanoid", "reacher", "walker2d"]
    return sorted(registry)


def brax_default_horizon(name: str) -> int:
    return _BRAX_HORIZONS.get(name, _DEFAULT_BRAX_HORIZON)


def _build(
    name: str, solver_iterations: int | None, ls_iterations: int | None, kwargs: dict[str, Any]
):
    from brax import envs as brax_envs

    env = brax_envs.get_environment(name, backend="mjx", **kwargs)
    replace = {}
    if solver_iterations is not None:
        if solver_iterations < 1:
            raise ValueError(f"solver_iterations must be >= 1, got {solver_iterations}")
        replace["opt.iterations"] = int(solver_iterations)
    if ls_iterations is not None:
        if ls_iterations < 1:
            raise ValueError(f"ls_iterations must be >= 1, got {ls_iterations}")
        replace["opt.ls_iterations"] = int(ls_iterations)
    if replace:
        sys = env.sys.tree_replace(replace)
        if solver_iterations is not None:
            sys = sys.replace(solver_iterations=int(solver_iterations))
        if ls_iterations is not None:
            sys = sys.replace(solver_maxls=int(ls_iterations))
        env.sys = sys
    obs_shape = jax.eval_shape(jax.jit(env.reset), jax.random.key(0)).obs.shape
    if len(obs_shape) != 1:
        raise ValueError(f"env {name!r} has non-vector observations {obs_shape}")
    return env, int(obs_shape[0]), int(env.action_size)


@functools.lru_cache(maxsize=64)
def _build_cached(name, solver_iterations, ls_iterations, frozen_kwargs):
    return _build(name, solver_iterations, ls_iterations, dict(frozen_kwargs))


def make_brax_env(
    name: str,
    *,
    solver_iterations: int | None = None,
    ls_iterations: int | None = None,
    **kwargs: Any,
) -> tuple[Any, int, int]:
    """Returns ``(env, obs_size, action_size)`` for a brax env with the MJX backend.

    Identical arguments return the *same* env object (cached), so jitted functions that close
    over it, or take the task as a static argument, compile once per process.
    """
    try:
        frozen = tuple(sorted(kwargs.items()))
        hash(frozen)
    except TypeError:
        return _build(name, solver_iterations, ls_iterations, kwargs)
    return _build_cached(name, solver_iterations, ls_iterations, frozen)
