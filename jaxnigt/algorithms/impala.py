"""IMPALA: actors and a learner with V-trace off-policy correction (Espeholt et al., 2018).

Actors roll out with the parameters they last received; the learner updates on every batch
of ``impala_batch`` trajectories (default n) with V-trace targets (ρ̄ = c̄ = 1) against each
trajectory's behaviour policy; see :mod:`jaxnigt.algorithms.engines.impala_engine` for the clock.
"""

from jaxnigt.algorithms import actor_critic
from jaxnigt.algorithms.engines import impala_engine

TRAITS = impala_engine.TRAITS.reading(*actor_critic.KEYS)


def make(setup, hparams):
    setup = actor_critic.with_critic(setup)
    return impala_engine.make(
        setup,
        impala_engine.ImpalaOptions.resolve(setup, hparams),
        update=actor_critic.update(hparams),
        estimator=actor_critic.estimator,
        traits=TRAITS,
    )
