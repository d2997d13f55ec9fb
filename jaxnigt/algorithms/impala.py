"""IMPALA: actors and a learner with V-trace off-policy correction (Espeholt et al., 2018).

Actors roll out with the parameters they last received; the learner updates on every batch
of ``impala_batch`` trajectories (default n) with V-trace targets (ρ̄ = c̄ = 1) against each
trajectory's behaviour policy; see :mod:`jaxnigt.algorithms.impala_engine` for the clock.
"""

from jaxnigt.algorithms import actor_critic, impala_engine

TRAITS = impala_engine.TRAITS


def make(setup, hparams):
    setup = actor_critic.with_critic(setup)
    return impala_engine.make(
        setup,
        update=actor_critic.update(hparams),
        estimator=actor_critic.estimator,
        batch=hparams.impala_batch or setup.n,
        learner_time=float(hparams.impala_learner_time),
    )
