"""The sizes a run of a padded program carries as values.

A program built for upper bounds of its shapes (:mod:`jaxnigt.cluster.padding`) runs several
runs that differ in a size: each run's value is an entry of its traced ``hyper``
(:class:`~jaxnigt.algorithms.core.TrainState`), and the engine that reads the size takes the
run's value from there; the static size it was built with is then the bound.  A run of an
unpadded program has none of these entries and the engines use their static sizes.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

#: The round's M and round 0's M_init (Rennala, Malenia), the m-synchronous m, the
#: asynchronous block (exchanges per step) and Malenia's capacity.
SIZES = ("M", "M_init", "msync_m", "async_block", "malenia_capacity")
#: Malenia's stopping threshold of a run, of its M and of its M_init: float32 values computed
#: on the host by :func:`~jaxnigt.cluster.round_kernels.malenia_threshold`, as the unpadded
#: rule computes them.
THRESHOLDS = {"M": "malenia_threshold", "M_init": "malenia_threshold_init"}


def run_size(hyper: Mapping[str, jax.Array] | None, name: str) -> jax.Array | None:
    """The run's ``name`` (one of :data:`SIZES`) as an int32 value, or None when the program
    is not padded in it."""
    if hyper is None or name not in hyper:
        return None
    return jnp.asarray(hyper[name], jnp.int32)
