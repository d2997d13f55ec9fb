"""Algorithms: each a short composition of schedule, aggregator weights and optax update.

Every algorithm module has ``make(setup, hparams) -> Algorithm``
(:class:`~jaxnigt.algorithms.core.Algorithm`) and ``TRAITS``, what the algorithm is
(:class:`~jaxnigt.algorithms.core.Traits`: the cluster options that change it, the shapes
its tuning tunes, what its overflow flag means, the engine options it reads), which its
built ``Algorithm`` carries too; :func:`get` and :func:`traits` look them up by name.
Modules are imported on first use, so listing the names costs nothing.

The registry maps a name to its module (or to any object with ``make`` and ``TRAITS``).
Adding an algorithm is its own module plus its entry: a line in ``_BUILTIN`` for the
library's own, or :func:`register` for one that lives elsewhere (a research fork, a test, a
user's plugin, :mod:`jaxnigt.plugins`); :func:`register_round_algorithm` registers a round
method in one call from a registered rule (:func:`jaxnigt.cluster.rules.register_rule`), its
aggregator weights and its update.  Configs, the runner, ``jaxnigt tune`` and ``jaxnigt
compare`` then accept the name like any other.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NamedTuple

_BUILTIN = (
    "rennala_nigt",
    "malenia_nigt",
    "sync_nigt",
    "msync_nigt",
    "mindflayer_nigt",
    "ringleader_nigt",
    "ringleader_round_nigt",
    "sync_pg",
    "rennala_pg",
    "mindflayer_pg",
    "ringleader_pg",
    "ringleader_round_pg",
    "afedpg",
    "afedpg_vanilla",
    "asgd",
    "ringmaster_pg",
    "admm_pg",
    "a2c",
    "a3c",
    "impala",
    "seed_rl",
)
#: The library's own algorithms, in the order listings show them.
NAMES = _BUILTIN
_REGISTRY: dict[str, Any] = {name: f"jaxnigt.algorithms.{name}" for name in _BUILTIN}


class AlgorithmSpec(NamedTuple):
    """An algorithm registered as a value: its factory, its traits and the module that
    registered it (a module loaded again may register the same name again)."""

    make: Any
    TRAITS: Any
    origin: str = ""


def names() -> tuple[str, ...]:
    """Every registered algorithm: the library's own, then the :func:`register`-ed ones."""
    return tuple(_REGISTRY)


def register(name: str, module: str | AlgorithmSpec) -> None:
    """Registers the algorithm ``name``, implemented by the importable ``module`` (a dotted
    path; it must define ``make(setup, hparams)`` and ``TRAITS``, checked on first use) or
    by an :class:`AlgorithmSpec`.

    Args:
      name: the name configs and commands will use.
      module: the dotted path of the module that implements it, or its spec.

    Raises:
      ValueError: ``name`` is empty or already registered to another implementation.
    """
    if not name or not name.isidentifier():
        raise ValueError(f"algorithm name {name!r}: expected an identifier")
    known = _REGISTRY.get(name, module)
    same = known == module or (
        isinstance(known, AlgorithmSpec)
        and isinstance(module, AlgorithmSpec)
        and known.origin == module.origin != ""
    )
    if not same:
        raise ValueError(f"algorithm {name!r} is already registered ({_origin(known)})")
    _REGISTRY[name] = module


def _origin(entry: Any) -> str:
    return entry if isinstance(entry, str) else getattr(entry, "origin", repr(entry))


def register_round_algorithm(
    name: str, *, rule: str, weights: Any, update: Any, estimator: Any = None, **traits: Any
) -> AlgorithmSpec:
    """Registers a round method: each round the registered ``rule`` picks the gradients
    (:func:`jaxnigt.cluster.rules.register_rule`), ``weights`` weights them (e.g.
    :func:`jaxnigt.cluster.aggregators.rennala_weights`) and ``update`` moves the point
    (:data:`jaxnigt.algorithms.updates.NIGT` or ``SGD``).

    Args:
      name: the algorithm's name.
      rule, weights, update: its parts.
      estimator: its gradient estimator (default: the policy gradient).
      **traits: fields of its :class:`~jaxnigt.algorithms.core.Traits` to set (default:
        the rule's, :func:`jaxnigt.algorithms.engines.round_engine.traits_of`).

    Returns:
      The registered :class:`AlgorithmSpec`.
    """
    from jaxnigt.algorithms import core
    from jaxnigt.algorithms.engines import round_engine

    kind = round_engine.traits_of(rule, **traits).using(update)
    make = round_engine.factory(
        schedule=round_engine.schedule(rule), weights=weights, update=update, traits=kind,
        estimator=core.reinforce if estimator is None else estimator,
    )  # fmt: skip
    spec = AlgorithmSpec(make, kind, sys._getframe(1).f_globals.get("__name__", ""))
    register(name, spec)
    return spec


def _module(name: str):
    if name not in _REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(_REGISTRY)}")
    entry = _REGISTRY[name]
    module = importlib.import_module(entry) if isinstance(entry, str) else entry
    for attr in ("make", "TRAITS"):
        if not hasattr(module, attr):
            raise ValueError(f"algorithm {name!r}: {_origin(entry)} has no {attr}")
    return module


def get(name: str):
    """The factory ``make(setup, hparams) -> Algorithm`` of algorithm ``name``."""
    return _module(name).make


def traits(name: str):
    """The :class:`~jaxnigt.algorithms.core.Traits` of algorithm ``name`` (no setup needed)."""
    return _module(name).TRAITS


__all__ = [
    "NAMES",
    "AlgorithmSpec",
    "get",
    "names",
    "register",
    "register_round_algorithm",
    "traits",
]
