"""Synchronous NIGT: every worker computes b = max(1, ceil(M/n)) gradients; the round waits
for the slowest worker; plain mean; NIGT step."""

from jaxnigt import aggregators
from jaxnigt.algorithms import core, round_engine

TRAITS = round_engine.SYNC.using(core.NIGT)
make = round_engine.factory(
    schedule=round_engine.sync_schedule,
    weights=aggregators.sync_weights,
    update=core.NIGT,
    traits=TRAITS,
)
