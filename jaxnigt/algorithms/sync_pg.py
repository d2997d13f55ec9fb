"""Synchronous policy gradient: the synchronous schedule with a plain step θ += α g."""

from jaxnigt import aggregators
from jaxnigt.algorithms import core, round_engine

TRAITS = round_engine.SYNC.using(core.SGD)
make = round_engine.factory(
    schedule=round_engine.sync_schedule,
    weights=aggregators.sync_weights,
    update=core.SGD,
    traits=TRAITS,
)
