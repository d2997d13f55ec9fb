"""Algorithms: each a short composition of schedule, aggregator weights and optax update.

Every algorithm module has ``make(setup, hparams) -> Algorithm``
(:class:`~jaxnigt.algorithms.core.Algorithm`) and ``TRAITS``, what the algorithm is
(:class:`~jaxnigt.algorithms.core.Traits`: the cluster options that change it, the shapes
its tuning tunes, what its overflow flag means), which its built ``Algorithm`` carries too;
:func:`get` and :func:`traits` look them up by name.  Modules are imported on first use, so
listing the names costs nothing.
"""

from __future__ import annotations

import importlib

NAMES = (
    "rennala_nigt",
    "malenia_nigt",
    "sync_nigt",
    "sync_pg",
    "rennala_pg",
    "afedpg",
    "asgd",
    "admm_pg",
    "a2c",
    "a3c",
    "impala",
)


def _module(name: str):
    if name not in NAMES:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(NAMES)}")
    return importlib.import_module(f"jaxnigt.algorithms.{name}")


def get(name: str):
    """The factory ``make(setup, hparams) -> Algorithm`` of algorithm ``name``."""
    return _module(name).make


def traits(name: str):
    """The :class:`~jaxnigt.algorithms.core.Traits` of algorithm ``name`` (no setup needed)."""
    return _module(name).TRAITS


__all__ = ["NAMES", "get", "traits"]
