"""Rennala policy gradient: Rennala's M-earliest collection with a plain step θ += α g."""

from jaxnigt import aggregators
from jaxnigt.algorithms import core, round_engine

TRAITS = round_engine.RENNALA.using(core.SGD)
make = round_engine.factory(
    schedule=round_engine.rennala_schedule,
    weights=aggregators.rennala_weights,
    update=core.SGD,
    traits=TRAITS,
)
