"""jaxnigt: asynchronous distributed policy-gradient RL in JAX.

Rennala NIGT and Malenia NIGT (and the paper's baselines) on a simulated cluster of
MuJoCo-MJX workers, with NIGT as a reusable optax transformation.
"""

from jaxnigt import aggregators, config, envs, schedules, timing
from jaxnigt.nigt import (
    NigtState,
    ScaleByNigtState,
    nigt,
    nigt_eval_params,
    scale_by_nigt,
)
from jaxnigt.trainer import build_trainer, make_trainer

__version__ = "0.1.0"

__all__ = [
    "NigtState",
    "ScaleByNigtState",
    "__version__",
    "aggregators",
    "build_trainer",
    "config",
    "envs",
    "make_trainer",
    "nigt",
    "nigt_eval_params",
    "scale_by_nigt",
    "schedules",
    "timing",
]
