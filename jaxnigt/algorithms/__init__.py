"""Algorithms: each a short composition of schedule, aggregator weights and optax update.

Every algorithm module has ``make(setup, hparams) -> Algorithm``
(:class:`~jaxnigt.algorithms.core.Algorithm`) and ``TRAITS``, what the algorithm is
(:class:`~jaxnigt.algorithms.core.Traits`: the cluster options that change it, the shapes
its tuning tunes, what its overflow flag means, the engine options it reads), which its
built ``Algorithm`` carries too; :func:`get` and :func:`traits` look them up by name.
Modules are imported on first use, so listing the names costs nothing.

The registry maps a name to its module. Adding an algorithm is its own module plus its
entry: a line in ``_BUILTIN`` for the library's own, or :func:`register` for one that lives
elsewhere (a research fork, a test); configs, the runner, ``jaxnigt tune`` and ``jaxnigt
compare`` then accept the name like any other.
"""

from __future__ import annotations

import importlib

_BUILTIN = (
    "rennala_nigt",
    "malenia_nigt",
    "sync_nigt",
    "msync_nigt",
    "sync_pg",
    "rennala_pg",
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
_REGISTRY: dict[str, str] = {name: f"jaxnigt.algorithms.{name}" for name in _BUILTIN}


def names() -> tuple[str, ...]:
    """Every registered algorithm: the library's own, then the :func:`register`-ed ones."""
    return tuple(_REGISTRY)


def register(name: str, module: str) -> None:
    """Registers the algorithm ``name``, implemented by the importable ``module`` (a dotted
    path; it must define ``make(setup, hparams)`` and ``TRAITS``, checked on first use).

    Args:
      name: the name configs and commands will use.
      module: the dotted path of the module that implements it.

    Raises:
      ValueError: ``name`` is empty or already registered to another module.
    """
    if not name or not name.isidentifier():
        raise ValueError(f"algorithm name {name!r}: expected an identifier")
    if _REGISTRY.get(name, module) != module:
        raise ValueError(f"algorithm {name!r} is already registered ({_REGISTRY[name]})")
    _REGISTRY[name] = module


def _module(name: str):
    if name not in _REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(_REGISTRY)}")
    module = importlib.import_module(_REGISTRY[name])
    for attr in ("make", "TRAITS"):
        if not hasattr(module, attr):
            raise ValueError(f"algorithm {name!r}: module {module.__name__} has no {attr}")
    return module


def get(name: str):
    """The factory ``make(setup, hparams) -> Algorithm`` of algorithm ``name``."""
    return _module(name).make


def traits(name: str):
    """The :class:`~jaxnigt.algorithms.core.Traits` of algorithm ``name`` (no setup needed)."""
    return _module(name).TRAITS


__all__ = ["NAMES", "get", "names", "register", "traits"]
