"""Synchronous NIGT: every worker computes b gradients at the broadcast point (default b = 1,
the paper's Sync NIGT; ``per_worker_batch: match_M`` gives b = max(1, ceil(M/n)), about as
many as Rennala's M); the round waits for the slowest worker; plain mean; NIGT step."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

TRAITS = round_engine.SYNC.using(updates.NIGT)
make = round_engine.factory(
    schedule=round_engine.sync_schedule,
    weights=aggregators.sync_weights,
    update=updates.NIGT,
    traits=TRAITS,
)
