"""The sizes a run of a padded program carries as values.

A program built for upper bounds of its shapes (:mod:`jaxnigt.cluster.padding`) runs several
runs that differ in a size: each run's value is an entry of its state's ``sizes``
(:class:`~jaxnigt.algorithms.core.TrainState`; given beside the hyperparameters to
``Trainer.hyper`` and taken apart from them when the run starts,
:func:`jaxnigt.algorithms.core.split_sizes`), and the engine that reads the size takes the
run's value from there, a round rule through its :class:`~jaxnigt.cluster.rounds.RoundSize`;
the static size it was built with is then the bound.  A run of an unpadded program has no
sizes (None) and the engines use their static sizes.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

#: The round's M and round 0's M_init (Rennala, Malenia), the m-synchronous m, the
#: asynchronous block (exchanges per step) and Malenia's capacity.
SIZES = ("M", "M_init", "msync_m", "async_block", "malenia_capacity")
#: The entries of Malenia's stopping threshold of a run, of its M and of its M_init
#: (:func:`malenia_thresholds`; read by :func:`jaxnigt.cluster.rules.run_values`).
THRESHOLD_KEYS = ("malenia_threshold", "malenia_threshold_init")


def malenia_thresholds(n: int, M: int, M_init: int) -> dict[str, float]:
    """A run's Malenia thresholds, float32 values computed on the host as the unpadded rule
    computes them (:func:`jaxnigt.cluster.rules.malenia.malenia_threshold`).

    Args:
      n: the run's workers.
      M: its batch.
      M_init: its round 0's batch.

    Returns:
      ``{key: threshold}`` for :data:`THRESHOLD_KEYS`.
    """
    from jaxnigt.cluster.rules.malenia import malenia_threshold

    values = (malenia_threshold(n, M), malenia_threshold(n, M_init))
    return dict(zip(THRESHOLD_KEYS, values, strict=True))


def run_size(sizes: Mapping[str, jax.Array] | None, name: str) -> jax.Array | None:
    """The run's ``name`` (one of :data:`SIZES`) as an int32 value, or None when the program
    is not padded in it (``sizes``: a train state's)."""
    if sizes is None or name not in sizes:
        return None
    return jnp.asarray(sizes[name], jnp.int32)
