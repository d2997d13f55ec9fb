"""Synchronous policy gradient: the synchronous schedule with a plain step θ += α g."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

TRAITS = round_engine.SYNC.using(updates.SGD)
make = round_engine.factory(
    schedule=round_engine.sync_schedule,
    weights=aggregators.sync_weights,
    update=updates.SGD,
    traits=TRAITS,
)
