"""A3C: asynchronous advantage actor-critic on the simulated cluster.

Each worker computes the actor-critic gradient (GAE advantages, :mod:`jaxnigt.rl.critic`) of its
own trajectory at the parameters it was dispatched with and sends it over the server link;
the server applies it on arrival with Adam (or RMSProp), as the per-arrival engine does for
asynchronous SGD (:mod:`jaxnigt.algorithms.engines.async_engine`).
"""

from jaxnigt.algorithms import actor_critic
from jaxnigt.algorithms.engines import async_engine

TRAITS = async_engine.TRAITS.reading(*actor_critic.KEYS, *actor_critic.GAE)


def make(setup, hparams):
    setup = actor_critic.with_critic(setup)
    return async_engine.make(
        setup,
        async_engine.AsyncOptions.resolve(setup, hparams),
        update=actor_critic.update(hparams),
        estimator=actor_critic.estimator,
        traits=TRAITS,
    )
