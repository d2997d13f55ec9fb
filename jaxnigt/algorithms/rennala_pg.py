"""Rennala policy gradient: Rennala's M-earliest collection with a plain step θ += α g."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

TRAITS = round_engine.RENNALA.using(updates.SGD)
make = round_engine.factory(
    schedule=round_engine.rennala_schedule,
    weights=aggregators.rennala_weights,
    update=updates.SGD,
    traits=TRAITS,
)
