"""Algorithms: each a short composition of schedule, aggregator weights and optax update.

``REGISTRY`` maps an algorithm name to its spec: a :class:`~jaxnigt.algorithms.base.RoundSpec`
(round-based, AllReduce), an :class:`~jaxnigt.algorithms.base.AsyncSpec` (per-arrival) or an
:class:`~jaxnigt.algorithms.admm_pg.AdmmSpec` (consensus ADMM).
"""

from jaxnigt.algorithms import (
    admm_pg,
    afedpg,
    asgd,
    malenia_nigt,
    rennala_nigt,
    rennala_pg,
    sync_nigt,
    sync_pg,
)
from jaxnigt.algorithms.base import AsyncSpec, RoundSpec, Setup, TrainState

REGISTRY = {
    "rennala_nigt": rennala_nigt.SPEC,
    "malenia_nigt": malenia_nigt.SPEC,
    "sync_nigt": sync_nigt.SPEC,
    "sync_pg": sync_pg.SPEC,
    "rennala_pg": rennala_pg.SPEC,
    "afedpg": afedpg.SPEC,
    "asgd": asgd.SPEC,
    "admm_pg": admm_pg.SPEC,
}

__all__ = ["REGISTRY", "AsyncSpec", "RoundSpec", "Setup", "TrainState"]
