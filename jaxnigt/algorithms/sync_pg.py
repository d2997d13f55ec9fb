"""Synchronous policy gradient: the synchronous schedule with a plain step θ += α g."""

from jaxnigt import aggregators
from jaxnigt.algorithms.base import RoundSpec, sgd_optimizer, sync_schedule

SPEC = RoundSpec(schedule=sync_schedule, weights=aggregators.sync_weights, optimizer=sgd_optimizer)
