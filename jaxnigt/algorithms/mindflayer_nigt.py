"""MindFlayer NIGT: MindFlayer's rounds (Maranjyan, Shaikh Omar & Richtárik, UAI 2025;
:mod:`jaxnigt.cluster.rules.mindflayer`) under a NIGT step.  Each round every worker makes
B_i attempts at the broadcast point, each abandoned once it has run past its time limit t_i
(``hparams.mindflayer_time_limit``, default the noise's median times h_i;
``hparams.mindflayer_attempts``, default the library's reading of the paper's allocation
for M expected successes); the round ends when every worker has made its attempts, the
successful gradients are averaged (the paper divides their sum by the expected count), one
AllReduce and a NIGT step follow.  A round in which nothing succeeded skips the
step (``hparams.mindflayer_empty: skip``, the default) or takes it on a zero gradient
(``zero``).  Rennala's robust cousin under heavy-tailed compute times: a slow draw costs at
most t_i, never the round.

:func:`factory` makes the method on any update (``mindflayer_pg`` is the plain step).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxnigt.algorithms import core, updates
from jaxnigt.algorithms.core import Algorithm, Setup
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster.rules import mindflayer as rule

#: The ``hparams`` keys MindFlayer's methods read beyond the common ones.
OPTIONS = ("mindflayer_time_limit", "mindflayer_attempts", "mindflayer_empty")


def options_of(setup: Setup, hparams: Any) -> rule.Options:
    """The rule's options of a run (resolved against its cluster: :meth:`~jaxnigt.cluster.
    rules.mindflayer.Options.resolve`).

    Raises:
      ValueError: a list whose length is not n, or a time limit no attempt can meet.
    """
    options = rule.Options(hparams.mindflayer_time_limit, hparams.mindflayer_attempts)
    return options.resolve(setup.cluster)


def schedule(options: rule.Options) -> round_engine.ScheduleFactory:
    """The schedule factory of the rule of ``options`` (a padded program's run reads its own
    sizes, as :func:`~jaxnigt.algorithms.engines.round_engine.schedule` gives every rule)."""
    return round_engine.schedule_with(rule.round_with(options))


def skipping_empty(step):
    """``step`` that keeps the point and the optimizer's state when its round rolled out no
    gradient (``mindflayer_empty: skip``); everything else (the clock, the key, the counters,
    the metrics) is the step's."""

    def run(state: core.TrainState, budget: jax.Array):
        new, metrics = step(state, budget)
        empty = metrics.grads == 0
        stay = lambda old, moved: jax.tree.map(lambda a, b: jnp.where(empty, a, b), old, moved)
        kept = new._replace(
            params=stay(state.params, new.params), opt_state=stay(state.opt_state, new.opt_state)
        )
        return kept, metrics

    return run


def factory(update: updates.Update) -> tuple[core.Traits, core.AlgorithmFactory]:
    """``(TRAITS, make)`` of MindFlayer's rounds under ``update``.

    Args:
      update: the server update (:data:`~jaxnigt.algorithms.updates.NIGT`, ``SGD``).

    Returns:
      Its traits (the rule's cluster options, M tuned, :data:`OPTIONS` read) and its
      ``make(setup, hparams)``.
    """
    traits = round_engine.traits_of("mindflayer", options=OPTIONS).using(update)

    def make(setup: Setup, hparams: Any) -> Algorithm:
        base = round_engine.RoundOptions.resolve(setup, hparams)
        algorithm = round_engine.make(
            setup,
            base,
            schedule=schedule(options_of(setup, hparams)),
            weights=rule.WEIGHTS,
            update=update,
            traits=traits,
        )
        if hparams.mindflayer_empty == "zero":
            return algorithm
        first = algorithm.first_step
        return algorithm._replace(
            step=skipping_empty(algorithm.step),
            first_step=None if first is None else skipping_empty(first),
        )

    return traits, make


TRAITS, make = factory(updates.NIGT)
