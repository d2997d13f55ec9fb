"""Rennala NIGT (homogeneous environments).

Each round collects the M earliest gradients across all workers at the extrapolated point
y_t (fast workers contribute more), averages them (weights 1/M), AllReduces once and takes a
NIGT step. Round 0 aggregates M_init gradients at x_0 to form d_0.
"""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

TRAITS = round_engine.RENNALA.using(updates.NIGT)
make = round_engine.factory(
    schedule=round_engine.rennala_schedule,
    weights=aggregators.rennala_weights,
    update=updates.NIGT,
    traits=TRAITS,
)
