"""Ringleader NIGT: Ringleader ASGD's cycles (Maranjyan & Richtárik, ICLR 2026; the rule:
:func:`jaxnigt.cluster.rules.ringleader.cycle_next`) on the event engine, under a NIGT step.

Every worker computes gradients without waiting and exchanges each with the server as it is
done (:mod:`~jaxnigt.algorithms.engines.async_engine`).  The server keeps a table, per worker
the sum and count of its gradients of the cycle.  Until every worker has one (Phase 1) it only
buffers, and a worker goes on at the point it holds; the gradient that fills the table is the
cycle's first update, along ``(1/n) sum_i G_i / b_i``, and its worker takes the new point.
Then each other worker's next gradient joins its entry and is one more update along the same
mean, that worker alone taking the new point; a worker's further gradients fill the next
cycle's table.  A cycle makes exactly n updates, one per worker; nothing is discarded and no
worker waits.  Each update is one NIGT step on the table's mean (the paper's is a plain step:
:mod:`jaxnigt.algorithms.ringleader_pg`).

:func:`factory` makes the method on any update; ``hparams.ringleader_point`` chooses the
point a worker computes at after an exchange that is not its update (:data:`~jaxnigt.
cluster.rules.ringleader.POINTS`).  Ringleader's rounds, the cycle collapsed to one update
on the round engine: :mod:`jaxnigt.algorithms.ringleader_round_nigt`.
"""

from __future__ import annotations

import jax

from jaxnigt.algorithms import core, updates
from jaxnigt.algorithms.engines import async_engine
from jaxnigt.cluster.rules import ringleader as rule

#: The server's table: per worker the sum and count of its gradients of the cycle and the next.
TABLE = async_engine.ServerTable(init=rule.table_init, put=rule.table_put)


def event_rule(point: str = rule.POINTS[0]) -> async_engine.EventRule:
    """Ringleader's cycles as the event engine's rule.

    Args:
      point: one of :data:`~jaxnigt.cluster.rules.ringleader.POINTS`.

    Returns:
      The :class:`~jaxnigt.algorithms.engines.async_engine.EventRule`.
    """

    def next_exchange(model, time_key, state: rule.CycleState):
        key = jax.random.fold_in(time_key, state.events)
        return rule.cycle_next(model, key, state, point=point)

    return async_engine.EventRule(
        init=rule.cycle_init,
        next=next_exchange,
        clock=lambda state: state.clock,
        exchanges=lambda state: state.events,
        refuses=False,
        table=TABLE,
    )


def factory(update: updates.Update) -> tuple[core.Traits, core.AlgorithmFactory]:
    """``(TRAITS, make)`` of Ringleader's cycles under ``update``.

    Args:
      update: the server update (:data:`~jaxnigt.algorithms.updates.NIGT`, ``SGD``).

    Returns:
      Its traits (the event engine's, and ``ringleader_point`` read: the point a worker
      computes at after an exchange that is not its update) and its ``make(setup, hparams)``.
    """
    traits = async_engine.TRAITS.reading("ringleader_point").using(update)

    def make(setup: core.Setup, hparams) -> core.Algorithm:
        options = async_engine.AsyncOptions.resolve(setup, hparams)
        event = event_rule(hparams.ringleader_point)
        return async_engine.make(setup, options, update=update, traits=traits, rule=event)

    return traits, make


TRAITS, make = factory(updates.NIGT)
