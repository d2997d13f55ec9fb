"""m-synchronous NIGT (Begunov & Tyurin, 2026): every worker computes one gradient at the
broadcast point and a round ends when the fastest ``msync_m`` (default ceil(n/2)) have
arrived; the others' gradients are stopped (``inflight``), then one AllReduce and a NIGT step
on the plain mean.  The synchronous method that ignores stragglers *without* letting fast
workers contribute more: the ablation between Sync NIGT (m = n) and Rennala NIGT."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import round_engine
from jaxnigt.cluster import aggregators

TRAITS = round_engine.MSYNC.using(updates.NIGT)
make = round_engine.factory(
    schedule=round_engine.msync_schedule,
    weights=aggregators.sync_weights,
    update=updates.NIGT,
    traits=TRAITS,
)
