"""Rennala NIGT (homogeneous environments).

Each round collects the M earliest gradients across all workers at the extrapolated point
y_t (fast workers contribute more), averages them (weights 1/M), AllReduces once and takes a
NIGT step. Round 0 aggregates M_init gradients at x_0 to form d_0.
"""

from jaxnigt import aggregators
from jaxnigt.algorithms import core, round_engine

TRAITS = round_engine.RENNALA.using(core.NIGT)
make = round_engine.factory(
    schedule=round_engine.rennala_schedule,
    weights=aggregators.rennala_weights,
    update=core.NIGT,
    traits=TRAITS,
)
