"""MuJoCo Playground's dm_control suite, as ``playground/<Name>`` (an optional extra).

``pip install -e '.[playground]'`` installs MuJoCo Playground (the 0.2 line, the last in JAX).
Its ports of the DeepMind Control Suite (``PointMass``, ``ReacherEasy``, ``CartpoleBalance``,
``HopperHop``, ``WalkerWalk``, ``HumanoidWalk``, …: :data:`SUITE`) then load by name::

    env: {name: playground/ReacherEasy, horizon: 200}

How they run here:

* **MJX in JAX.** Playground 0.2 defaults to MuJoCo Warp (a GPU kernel backend); jaxnigt
  selects MJX's JAX implementation (``config_overrides={"impl": "jax"}``), which runs on the
  CPU and GPU alike with jaxnigt's own jax, mujoco and mujoco-mjx.
* **Horizon.** A suite episode is 1,000 control steps (Playground's ``episode_length``); that
  is the default H. Configs usually set a shorter ``env.horizon``.
* **Observations.** The suite's flat state observation (``PointMass``: position and velocity,
  4 values; ``ReacherEasy``: 6; ``HumanoidWalk``: 67), used as it is.
* **Rewards.** dm_control's, in [0, 1] per step (a return of H is the most there is).
* **Termination.** None: a suite episode only ends at its horizon (Playground sets ``done``
  for a non-finite state, which a rollout treats as an end anyway), so ``terminates`` is
  False and a rollout is one scan over H.
* **Solver.** ``env.solver_iterations`` / ``env.ls_iterations`` replace the model's
  ``opt.iterations`` / ``opt.ls_iterations`` as for brax's envs.

Without the extra, a config naming one fails on load with one line that says how to install
it (``jaxnigt run`` exits 2).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
from typing import Any

import jax

PREFIX = "playground/"
EXTRA = "pip install -e '.[playground]'"
#: Playground 0.2's dm_control suite (``mujoco_playground.dm_control_suite.ALL_ENVS``).
SUITE = (
    "AcrobotSwingup",
    "AcrobotSwingupSparse",
    "BallInCup",
    "CartpoleBalance",
    "CartpoleBalanceSparse",
    "CartpoleSwingup",
    "CartpoleSwingupSparse",
    "CheetahRun",
    "FingerSpin",
    "FingerTurnEasy",
    "FingerTurnHard",
    "FishSwim",
    "HopperHop",
    "HopperStand",
    "HumanoidRun",
    "HumanoidStand",
    "HumanoidWalk",
    "PendulumSwingup",
    "PointMass",
    "ReacherEasy",
    "ReacherHard",
    "SwimmerSwimmer6",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
)
#: The suite's episode length in control steps: the default horizon.
EPISODE_LENGTH = 1000


def available() -> bool:
    """Whether MuJoCo Playground is installed (the ``playground`` extra)."""
    return importlib.util.find_spec("mujoco_playground") is not None


def missing_text(name: str) -> str:
    """The one line that says how to get ``name`` when the extra is absent.

    Args:
      name: a ``playground/...`` environment name.

    Returns:
      The message.
    """
    return f"{name!r} needs MuJoCo Playground, an optional extra: {EXTRA}"


def names() -> list[str]:
    """The ``playground/<Name>`` environment names (empty without the extra)."""
    return [PREFIX + n for n in SUITE] if available() else []


def is_playground(name: str) -> bool:
    """Whether ``name`` is a Playground environment's (``playground/<Name>``)."""
    return name.startswith(PREFIX)


@functools.lru_cache(maxsize=32)
def _load(suite_name: str, solver_iterations: int | None, ls_iterations: int | None) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):  # warp's import notice on a CPU
        from mujoco_playground import dm_control_suite
    env = dm_control_suite.load(suite_name, config_overrides={"impl": "jax"})
    opt = {}
    if solver_iterations is not None:
        opt["iterations"] = int(solver_iterations)
    if ls_iterations is not None:
        opt["ls_iterations"] = int(ls_iterations)
    if opt:
        m = env._mjx_model
        env._mjx_model = m.replace(opt=m.opt.replace(**opt))
    return env


def make_playground_env(
    name: str, *, solver_iterations: int | None = None, ls_iterations: int | None = None
) -> tuple[Any, int, int]:
    """``(env, obs_size, action_size)`` of a suite environment with MJX's JAX implementation.

    Identical arguments return the same env object (cached), so programs that close over it
    compile once per process.

    Args:
      name: ``playground/<Name>`` with ``<Name>`` in :data:`SUITE`.
      solver_iterations: MJX constraint-solver iterations, or None (Playground's).
      ls_iterations: MJX line-search iterations, or None.

    Returns:
      The environment, its observation size and its action size.

    Raises:
      ValueError: an unknown suite name, the extra absent, or non-vector observations.
    """
    suite_name = name.removeprefix(PREFIX)
    if not available():
        raise ValueError(missing_text(name))
    if suite_name not in SUITE:
        raise ValueError(
            f"unknown Playground environment {name!r}; the suite's: "
            + ", ".join(PREFIX + n for n in SUITE)
        )
    for what, v in (("solver_iterations", solver_iterations), ("ls_iterations", ls_iterations)):
        if v is not None and v < 1:
            raise ValueError(f"{what} must be >= 1, got {v}")
    env = _load(suite_name, solver_iterations, ls_iterations)
    obs = jax.eval_shape(env.reset, jax.random.key(0)).obs
    if not hasattr(obs, "shape") or len(obs.shape) != 1:
        raise ValueError(f"environment {name!r} has non-vector observations")
    return env, int(obs.shape[0]), int(env.action_size)
