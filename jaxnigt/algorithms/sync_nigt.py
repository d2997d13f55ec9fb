"""Synchronous NIGT: every worker computes b = max(1, ceil(M/n)) gradients; the round waits
for the slowest worker; plain mean; NIGT step."""

from jaxnigt import aggregators
from jaxnigt.algorithms.base import RoundSpec, nigt_optimizer, sync_schedule

SPEC = RoundSpec(schedule=sync_schedule, weights=aggregators.sync_weights, optimizer=nigt_optimizer)
