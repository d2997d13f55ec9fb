"""A throwaway algorithm, registered only by the tests: what adding one takes.

Synchronous policy gradient with heavy-ball momentum: the synchronous collection, plain-mean
weights and ``optax.sgd(momentum=0.9)``. One module, one ``register`` call
(``jaxnigt.algorithms.register("momentum_pg", "toy_algorithm")``); nothing else changes.
"""

import optax

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

MOMENTUM = updates.Update(
    optimizer=lambda hyper: optax.sgd(hyper["learning_rate"], momentum=0.9),
    eval_params=updates.held_params,
)
TRAITS = round_engine.SYNC.using(MOMENTUM)
make = round_engine.factory(
    schedule=round_engine.sync_schedule,
    weights=aggregators.sync_weights,
    update=MOMENTUM,
    traits=TRAITS,
)
