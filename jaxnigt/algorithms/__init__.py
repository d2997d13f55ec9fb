"""Algorithms: each a short composition of schedule, aggregator weights and optax update.

Every algorithm module has ``make(setup, hparams) -> Algorithm``
(:class:`~jaxnigt.algorithms.core.Algorithm`); :func:`get` looks one up by name.  Modules
are imported on first use, so listing the names costs nothing.
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


def get(name: str):
    """The factory ``make(setup, hparams) -> Algorithm`` of algorithm ``name``."""
    if name not in NAMES:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(NAMES)}")
    return importlib.import_module(f"jaxnigt.algorithms.{name}").make


__all__ = ["NAMES", "get"]
