"""Server updates: the optax transformation an algorithm's server applies, the params it
leaves to evaluate and the traced step sizes it reads (:attr:`Traits.step_sizes
<jaxnigt.algorithms.core.Traits>` of its algorithms).

* :data:`NIGT`: NIGT (:func:`jaxnigt.nigt`); the held params are its extrapolated point y_t,
  the params to evaluate its iterate x_t.
* :data:`SGD`: the plain step θ ← θ + α g.
* :data:`NORMALIZED_MOMENTUM`: NIGT's momentum without the extrapolation (gradients at the
  iterate itself), AFedPG's vanilla update.

Gradients are ascent directions on J; the transformations descend, so they receive −g.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import optax

from jaxnigt.algorithms.core import OptimizerFactory, TracedHParams, TrainState
from jaxnigt.nigt import nigt, nigt_eval_params, scale_by_normalized_momentum


def nigt_optimizer(hyper: TracedHParams) -> optax.GradientTransformation:
    """NIGT with traced learning rate and η (params held = the extrapolated point)."""
    return nigt(hyper["learning_rate"], hyper["eta"])


def sgd_optimizer(hyper: TracedHParams) -> optax.GradientTransformation:
    """Plain step θ ← θ + α g (descent on −g)."""
    return optax.sgd(hyper["learning_rate"])


def nigt_iterate(state: TrainState) -> Any:
    """NIGT's iterate x_t, the params to evaluate (the held params are y_t)."""
    return nigt_eval_params(state.opt_state)


def held_params(state: TrainState) -> Any:
    """The held params themselves (plain steps; ADMM's consensus point z)."""
    return state.params


class Update(NamedTuple):
    """A server update: the optax transformation, the params it leaves to evaluate and the
    traced step-size hyperparameters it reads (``Traits.step_sizes`` of its algorithms)."""

    optimizer: OptimizerFactory
    eval_params: Callable[[TrainState], Any]
    step_sizes: tuple[str, ...] = ("learning_rate",)


def normalized_momentum_optimizer(hyper: TracedHParams) -> optax.GradientTransformation:
    """Normalized momentum at the held params (NIGT without its extrapolation)."""
    return optax.chain(
        scale_by_normalized_momentum(hyper["eta"]),
        optax.scale_by_learning_rate(hyper["learning_rate"]),
    )


NIGT = Update(nigt_optimizer, nigt_iterate, ("learning_rate", "eta"))
SGD = Update(sgd_optimizer, held_params)
NORMALIZED_MOMENTUM = Update(normalized_momentum_optimizer, held_params, ("learning_rate", "eta"))
