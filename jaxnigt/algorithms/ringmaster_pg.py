"""Ringmaster ASGD (Maranjyan, Tyurin & Richtárik, ICML 2025) with policy gradients.

Per-arrival SGD steps θ += α g as :mod:`~jaxnigt.algorithms.asgd`, but with a bound on the
delay: a gradient whose delay δ (server updates since its worker was dispatched) is at least
``ringmaster_R`` is discarded, and its worker restarts from the current point, which the
exchange brought down (:func:`jaxnigt.cluster.events.bounded_next`).  With ``ringmaster_stops`` (the
variant with calculation stops) a gradient is cancelled as soon as its delay reaches R, and
its worker fetches the current point with one exchange on its link (κ_i, queued on a shared
link; with κ = 0 it restarts at once) and starts again when that exchange ends.
Discarded and cancelled work is counted in ``env_steps_wasted`` (H steps per discarded
trajectory, the computed fraction of a cancelled one); ``comms`` counts every exchange,
``grads`` only the accepted gradients.

R defaults to n: the asynchronous method whose fast workers still contribute more, with the
stragglers' stale gradients cut off.  With R above every possible delay it is ``asgd``
exactly.  R lives in the run's state (data, not a constant of the program): runs with
different R share one compiled program; ``jaxnigt tune --ringmaster-R`` tunes it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.core import Algorithm, Setup
from jaxnigt.algorithms.engines import async_engine
from jaxnigt.cluster import events


class RingmasterOptions(NamedTuple):
    """Ringmaster's options, from the config's hyperparameters.

    Attributes:
      R: the delay threshold (``ringmaster_R``; default n): gradients with delay ≥ R are
        not applied.
      stops: cancel a gradient as soon as its delay reaches R (``ringmaster_stops``; default
        False: it runs to its exchange and is discarded there).
    """

    R: int
    stops: bool

    @classmethod
    def resolve(cls, setup: Setup, hparams: Any) -> RingmasterOptions:
        """The options of a run of ``setup`` with the config's ``hparams`` (defaults here)."""
        return cls(R=int(hparams.ringmaster_R or setup.n), stops=bool(hparams.ringmaster_stops))


KEYS = ("ringmaster_R", "ringmaster_stops")

TRAITS = async_engine.TRAITS.reading(*KEYS)._replace(tuned_shapes=("ringmaster_R",))


def rule(options: RingmasterOptions) -> async_engine.EventRule:
    """The bounded-delay event rule of these options.

    Args:
      options: the threshold R and whether gradients are stopped.

    Returns:
      The :class:`~jaxnigt.algorithms.engines.async_engine.EventRule`.
    """

    def next_exchange(model, time_key, state: events.BoundedState):
        key = jax.random.fold_in(time_key, state.events)
        return events.bounded_next(model, key, state, stops=options.stops)

    return async_engine.EventRule(
        init=lambda clock: events.bounded_init(clock, options.R),
        next=next_exchange,
        clock=lambda state: state.clock,
        exchanges=lambda state: state.events,
        refuses=True,
    )


def make(setup: Setup, hparams) -> Algorithm:
    """Ringmaster policy-gradient SGD.

    Args:
      setup: the run's setup.
      hparams: the config's hyperparameters.

    Returns:
      The :class:`~jaxnigt.algorithms.core.Algorithm`.
    """
    options = RingmasterOptions.resolve(setup, hparams)
    return async_engine.make(
        setup,
        async_engine.AsyncOptions.resolve(setup, hparams),
        update=updates.SGD,
        traits=TRAITS,
        rule=rule(options),
    )


__all__ = ["KEYS", "TRAITS", "RingmasterOptions", "make", "rule"]
