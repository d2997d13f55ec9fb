"""Ringleader's rounds under a NIGT step, the paper's cycle collapsed to one round and one
update (the paper's method, one update per worker per cycle: :mod:`jaxnigt.algorithms.
ringleader_nigt`).  Ringleader's rounds (Maranjyan & Richtárik, ICLR 2026;
:mod:`jaxnigt.cluster.rules.ringleader`) under a NIGT step.  Each round every worker computes
gradients at the broadcast point until each has delivered at least one (the paper's Phase 1,
whose end is the instant of its cycle's first update); every completion by then counts, the
update direction is the mean over workers of each worker's mean (the paper's table, refilled
every round: no table persists), one AllReduce and a NIGT step follow.  Malenia NIGT's
estimator without a batch size to tune (its rounds at M = n): the round ends as soon as the
table is full.  Where the paper makes n updates per cycle and keeps the work in flight, one
point per round makes one update and cancels or discards it (``cluster.inflight``).

:func:`factory` makes the method on any update and rule options (``ringleader_round_pg`` is the
plain step; :class:`~jaxnigt.cluster.rules.ringleader.Options` the paper's whole cycle or a
latest-gradient table).
"""

from __future__ import annotations

from jaxnigt.algorithms import core, updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster.rules import ringleader as rule


def schedule(options: rule.Options) -> round_engine.ScheduleFactory:
    """The schedule factory of the rule of ``options`` (the registered ``ringleader`` for the
    defaults, with its padding check; a padded program's run reads its own capacity)."""
    if options == rule.DEFAULT:
        return round_engine.schedule("ringleader")
    return round_engine.schedule_with(rule.round_with(options))


def factory(
    update: updates.Update, options: rule.Options = rule.DEFAULT
) -> tuple[core.Traits, core.AlgorithmFactory]:
    """``(TRAITS, make)`` of Ringleader's rounds under ``update``.

    Args:
      update: the server update (:data:`~jaxnigt.algorithms.updates.NIGT`, ``SGD``).
      options: the rule's options (default: the registered rule's).

    Returns:
      Its traits (the rule's cluster options; Malenia's capacity read; no batch tuned: the
      round reads no M) and its ``make(setup, hparams)``.
    """
    traits = round_engine.traits_of(
        "ringleader", tuned_shapes=(), options=("malenia_capacity",)
    ).using(update)
    make = round_engine.factory(
        schedule=schedule(options), weights=rule.WEIGHTS, update=update, traits=traits
    )
    return traits, make


TRAITS, make = factory(updates.NIGT)
