"""A2C: synchronous advantage actor-critic on the simulated cluster.

Every worker rolls out b trajectories (``per_worker_batch``, default 1) with the current
parameters, the round waits for the slowest worker, one AllReduce; the update is the
actor-critic loss of :mod:`jaxnigt.rl.critic` with on-policy GAE(λ) advantages, applied by
Adam (or RMSProp: ``hparams.ac_optimizer``). Evaluated and deployed: the policy part of
the parameters.
"""

from jaxnigt.algorithms import actor_critic
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

TRAITS = round_engine.SYNC.reading(*actor_critic.KEYS, *actor_critic.GAE)


def make(setup, hparams):
    setup = actor_critic.with_critic(setup)
    return round_engine.make(
        setup,
        round_engine.RoundOptions.resolve(setup, hparams),
        schedule=round_engine.sync_schedule,
        weights=aggregators.sync_weights,
        update=actor_critic.update(hparams),
        estimator=actor_critic.estimator,
        traits=TRAITS,
    )
