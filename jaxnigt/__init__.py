"""jaxnigt: asynchronous distributed policy-gradient RL in JAX.

Rennala NIGT and Malenia NIGT (and the paper's baselines) on a simulated cluster of
MuJoCo-MJX workers, with NIGT as a reusable optax transformation.

**The public API** is what this module names in ``__all__``:

* the optimizer: ``nigt``, ``scale_by_nigt``, ``nigt_eval_params``, ``NigtState``,
  ``ScaleByNigtState``, ``scale_by_normalized_momentum`` (:mod:`jaxnigt.nigt`);
* the simulated cluster's core modules ``timing``, ``schedules``, ``events`` and
  ``aggregators`` (from :mod:`jaxnigt.cluster`);
* the experiment API, imported on first use (the ``rl`` extra): ``make_trainer`` and
  ``build_trainer`` (:mod:`jaxnigt.run.trainer`), the ``config`` package (``load``,
  ``ExperimentConfig``, ...) and ``envs``;
* beside them, ``jaxnigt.algorithms.register`` and ``register_round_algorithm`` (an
  algorithm of your own), ``jaxnigt.cluster.rules.register_rule`` (a round rule of your own),
  :mod:`jaxnigt.plugins` (a module of yours loaded by ``--plugin``, a config's ``plugins:``
  key or an entry point) and the ``jaxnigt`` command (:mod:`jaxnigt.cli`, every flag).

Everything else is internal and may move; the folders (``cluster``, ``rl``, ``envs``,
``algorithms``, ``config``, ``run``, ``studies``, ``analysis``, ``cli``) each say in their
``__init__`` what they hold. The core needs only jax, optax, chex and numpy: the NIGT
transformations, :mod:`jaxnigt.cluster` and ``jaxnigt clock``.

**Layers.** The folders are layers and every import, one inside a function too, points down:
``cluster``, ``envs``, ``nigt`` and ``plugins`` at the bottom (none importing another); then
``rl``;
``algorithms``; ``config`` (it checks a config against the algorithms' registry); ``run``
(from a config to a run directory); ``analysis`` (it reads run directories back); ``studies``
(many runs, scored by the analysis); ``cli`` on top. This module, the public names, is none
of them.
"""

import importlib

from jaxnigt.cluster import aggregators, events, schedules, timing
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
_LAZY_NAMES = {"make_trainer": "jaxnigt.run.trainer", "build_trainer": "jaxnigt.run.trainer"}


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
