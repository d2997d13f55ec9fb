"""Synchronous NIGT: every worker computes b gradients at the broadcast point (default b = 1,
the paper's Sync NIGT; ``per_worker_batch: match_M`` gives b = max(1, ceil(M/n)), about as
many as Rennala's M); the round waits for the slowest worker; plain mean; NIGT step."""

from jaxnigt import aggregators
from jaxnigt.algorithms import core, round_engine

TRAITS = round_engine.SYNC.using(core.NIGT)
make = round_engine.factory(
    schedule=round_engine.sync_schedule,
    weights=aggregators.sync_weights,
    update=core.NIGT,
    traits=TRAITS,
)
