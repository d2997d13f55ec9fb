"""SEED RL: central inference and a V-trace learner (Espeholt et al., ICLR 2020).

The parameters stay on the learner; actors exchange an observation and an action with it at
every environment step, so a trajectory's steps may come from several parameter versions
(:mod:`jaxnigt.algorithms.engines.seed_engine` for the clock and the versions).  The learner is
IMPALA's: the same critic, actor-critic loss with V-trace targets (ρ̄ = c̄ = 1) and optimizer,
here weighing every step by its own behaviour log-probability.
"""

from jaxnigt.algorithms import actor_critic
from jaxnigt.algorithms.engines import seed_engine

TRAITS = seed_engine.TRAITS.reading(*actor_critic.KEYS)


def make(setup, hparams):
    setup = actor_critic.with_critic(setup)
    return seed_engine.make(
        setup,
        seed_engine.SeedOptions.resolve(setup, hparams),
        update=actor_critic.update(hparams),
        estimator=actor_critic.estimator,
        traits=TRAITS,
    )
