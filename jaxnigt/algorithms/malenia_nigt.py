"""Malenia NIGT (heterogeneous environments).

Each round collects until every worker has delivered and the harmonic mean of the per-worker
counts reaches M/n (SPEC §4), then averages the per-worker means (weights 1/(n·b_i)): an
unbiased estimate of the average objective's gradient, whatever the speeds. NIGT step.
"""

from jaxnigt import aggregators
from jaxnigt.algorithms import core, round_engine

TRAITS = round_engine.MALENIA.using(core.NIGT)
make = round_engine.factory(
    schedule=round_engine.malenia_schedule,
    weights=aggregators.malenia_weights,
    update=core.NIGT,
    traits=TRAITS,
)
