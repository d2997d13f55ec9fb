"""Malenia NIGT (heterogeneous environments).

Each round collects until every worker has delivered and the harmonic mean of the per-worker
counts reaches M/n (docs/cluster_model.md), then averages the per-worker means (weights
1/(n·b_i)): an unbiased estimate of the average objective's gradient, whatever the speeds.
NIGT step.
"""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

TRAITS = round_engine.MALENIA.using(updates.NIGT)
make = round_engine.factory(
    schedule=round_engine.malenia_schedule,
    weights=aggregators.malenia_weights,
    update=updates.NIGT,
    traits=TRAITS,
)
