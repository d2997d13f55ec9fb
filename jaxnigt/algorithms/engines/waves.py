"""The wave capacity of the per-arrival engine (:mod:`jaxnigt.algorithms.engines.async_engine`):
how many ready arrivals it rolls out as one batch.

Every capacity gives the same results (the engine's waves are the arrivals one at a time,
batched); this module only picks one that is cheap on this cluster and backend, by counting
the waves a few simulated blocks of arrivals need (:func:`count_waves`).
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from jaxnigt.cluster import events
from jaxnigt.cluster.model import ClusterModel, realize

# A batch of W rollouts costs about (OVERHEAD + W) single-trajectory units of batched work:
# on a CPU a batch-1 rollout costs what ~6 trajectories cost in a large batch (measured on
# reacher, docs/benchmarks.md); an accelerator runs hundreds of lanes for the price of one.
WAVE_OVERHEAD = {"cpu": 6.0, "gpu": 256.0, "tpu": 256.0}
#: Worker operations (arrivals × n) above which :func:`default_wave` does not simulate, and
#: the capacity it then takes at most.
WAVE_SIMULATION_LIMIT = 2**31
LARGE_N_WAVE = 1024


def default_wave(
    model: ClusterModel, block: int, *, backend: str | None = None, blocks: int = 4
) -> int:
    """A wave capacity for this cluster and backend: the ``W = 2^k <= min(n, block)``
    that minimizes the estimated block cost ``waves(W) * (overhead + W)``, with ``waves(W)``
    counted on ``blocks`` simulated blocks (fixed key; outages drawn from it too) by
    :func:`count_waves`.

    Every capacity gives the same results; this only trades batch slots for sequential waves.
    Where simulating the blocks would cost more than :data:`WAVE_SIMULATION_LIMIT` worker
    operations (each arrival looks at every worker: large n), the capacity is
    ``min(n, block, LARGE_N_WAVE)``: with that many workers a block's arrivals are almost all
    ready at once, so waves of that size cost about what one wave of the block would, without
    its memory (a wave holds its rollouts and per-slot gradients).

    Args:
      model: the concrete cluster model (its times and server link).
      block: arrivals per step.
      backend: the backend whose batching overhead counts (default: JAX's default).
      blocks: blocks simulated.

    Returns:
      The capacity ``W``.
    """
    top = max(1, min(block, model.n))
    if block * blocks * model.n > WAVE_SIMULATION_LIMIT:
        return min(top, LARGE_N_WAVE)
    overhead = WAVE_OVERHEAD.get(backend or jax.default_backend(), WAVE_OVERHEAD["gpu"])
    model = realize(model, jax.random.key(0))[0]  # outages: one draw stands for every run's
    state = events.async_init(model, jax.random.key(0), 0.0)
    simulate = jax.jit(events.async_arrivals, static_argnums=3)
    _, arr = simulate(model, jax.random.key(1), state, block * blocks)
    dispatch = np.asarray(arr.dispatch_version)
    sizes = [2**k for k in range(int(np.log2(top)) + 1)] + ([top] if top & (top - 1) else [])
    cost = {w: count_waves(dispatch, block, w) * (overhead + w) for w in sizes}
    return min(cost, key=lambda w: (cost[w], w))


def count_waves(dispatch_version: np.ndarray, block: int, wave: int) -> int:
    """Waves the engine needs for the whole blocks of a host-side arrival sequence (global
    versions: the version before arrival j is j) with capacity ``wave``."""
    total = 0
    for b0 in range(0, len(dispatch_version) - block + 1, block):
        d = dispatch_version[b0 : b0 + block] - b0
        rolled = np.zeros(block, bool)
        applied = 0
        while applied < block:
            ready = np.nonzero(~rolled & (d <= applied))[0][:wave]
            rolled[ready] = True
            total += 1
            applied += (
                int(np.argmin(rolled[applied:])) if not rolled[applied:].all() else block - applied
            )
    return total


class _Same:
    """A cluster model as a cache key: by identity (its arrays are not hashable)."""

    def __init__(self, model: ClusterModel):
        self.model = model

    def __hash__(self) -> int:
        return id(self.model)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Same) and other.model is self.model


@functools.lru_cache(maxsize=32)
def _cached_wave(model: _Same, block: int) -> int:
    return default_wave(model.model, block)


def setup_wave(model: ClusterModel, block: int) -> int:
    """:func:`default_wave` of a setup's concrete cluster model, once per record: a program
    built on the setup (:meth:`jaxnigt.run.trainer.Trainer.bind`) builds its algorithm again,
    with the same host-side record.

    Args:
      model: the concrete cluster model (``Setup.host_cluster``).
      block: arrivals per step.

    Returns:
      The capacity.
    """
    return _cached_wave(_Same(model), block)
