"""jaxnigt: asynchronous distributed policy-gradient RL in JAX.

Rennala NIGT and Malenia NIGT (and the paper's baselines) on a simulated cluster of
MuJoCo-MJX workers, with NIGT as a reusable optax transformation.

The core needs only jax, optax, chex and numpy: the NIGT transformations, the time model
(:mod:`jaxnigt.timing`), the round schedules (:mod:`jaxnigt.schedules`), the asynchronous
event engine (:mod:`jaxnigt.events`), the aggregators and the ``jaxnigt clock`` command.
The experiment API (environments, trainers, runner; the ``rl`` extra) is imported on first
use, e.g. ``jaxnigt.make_trainer`` or ``jaxnigt.envs``.
"""

import importlib

from jaxnigt import aggregators, events, schedules, timing
from jaxnigt.nigt import (
    NigtState,
    ScaleByNigtState,
    nigt,
    nigt_eval_params,
    scale_by_nigt,
    scale_by_normalized_momentum,
)

__version__ = "0.1.0"

# Experiment API, imported on first access (needs the `rl` extra: brax, mujoco, flax, ...).
_LAZY_MODULES = ("config", "envs")
_LAZY_NAMES = {"make_trainer": "jaxnigt.trainer", "build_trainer": "jaxnigt.trainer"}


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        return importlib.import_module(f"jaxnigt.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    raise AttributeError(f"module 'jaxnigt' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY_MODULES, *_LAZY_NAMES])


__all__ = [
    "NigtState",
    "ScaleByNigtState",
    "__version__",
    "aggregators",
    "build_trainer",
    "config",
    "envs",
    "events",
    "make_trainer",
    "nigt",
    "nigt_eval_params",
    "scale_by_nigt",
    "scale_by_normalized_momentum",
    "schedules",
    "timing",
]
