"""Rennala policy gradient: Rennala's M-earliest collection with a plain step θ += α g."""

from jaxnigt import aggregators
from jaxnigt.algorithms.base import RoundSpec, rennala_schedule, sgd_optimizer

SPEC = RoundSpec(
    schedule=rennala_schedule, weights=aggregators.rennala_weights, optimizer=sgd_optimizer
)
