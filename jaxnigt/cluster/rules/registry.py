"""The registry of round rules: a rule is one function registered by name.

A *round rule* decides, from the cluster model and the round's drawn compute times, which
gradients count and when the round ends.  It is one function

    rule(model, key, t0, busy_until, size) -> RoundSchedule

(``model`` the :class:`~jaxnigt.cluster.model.ClusterModel`, ``key`` the round's PRNG key,
``t0`` its start, ``busy_until`` ``[n]`` when each worker is free, ``size`` its
:class:`~jaxnigt.cluster.rounds.RoundSize`) registered under a name with
:func:`register_rule`.  The round engine, the clock alone
(:func:`jaxnigt.cluster.simulation.simulate_rule_rounds`), ``jaxnigt clock --rule`` and padded
programs look rules up here, so a rule registered from a user's own module (a plugin,
:mod:`jaxnigt.plugins`) runs everywhere the library's do.  A rule registered with
``pads=True`` promises to read its sizes from its ``RoundSize`` and the run's workers from
:func:`~jaxnigt.cluster.rounds.worker_count`; :func:`jaxnigt.cluster.rules.checks.
check_padding` holds it to that on a small cluster before a padded program first runs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax

from jaxnigt.cluster.rounds import RoundSchedule

#: The run sizes a padded program may carry as values (:meth:`RoundSize.value`).
RUN_SIZES = ("M", "capacity", "threshold", "m")


@dataclasses.dataclass(frozen=True)
class Rule:
    """A registered round rule.

    Attributes:
      name: the name configs, ``jaxnigt clock --rule`` and algorithms use.
      round: ``(model, key, t0, busy_until, size) -> RoundSchedule``.
      pads: it reads the run's sizes and worker count from its
        :class:`~jaxnigt.cluster.rounds.RoundSize` and
        :func:`~jaxnigt.cluster.rounds.worker_count`, so its runs may share a padded program.
      cluster_options: the cluster model's named choices that change its rounds
        (``inflight``, ``allreduce``, ``down_exchange``, ``link``).
      overflow: what its ``overflow`` flag means, with the fix (None: never raised).
      doc: one line on what it is (listings show it).
    """

    name: str
    round: Callable[..., RoundSchedule]
    pads: bool = False
    cluster_options: tuple[str, ...] = ("inflight", "allreduce", "down_exchange")
    overflow: str | None = None
    doc: str = ""


_RULES: dict[str, Rule] = {}
_BUILTIN = ("rennala", "malenia", "sync", "msync")


def register_rule(
    name: str,
    *,
    pads: bool = False,
    cluster_options: tuple[str, ...] = ("inflight", "allreduce", "down_exchange"),
    overflow: str | None = None,
) -> Callable[[Callable[..., RoundSchedule]], Callable[..., RoundSchedule]]:
    """A decorator registering a round rule under ``name`` (module docstring).

    Args:
      name: an identifier not yet registered to another function.
      pads: the rule reads its sizes from its :class:`~jaxnigt.cluster.rounds.RoundSize`
        (and the worker count from :func:`~jaxnigt.cluster.rounds.worker_count`), so a
        padded program may run it (checked by :func:`check_padding` before its first use).
      cluster_options: the named cluster choices that change its rounds.
      overflow: what its ``overflow`` flag means (None: never raised).

    Returns:
      The decorator; it returns the function unchanged.

    Raises:
      ValueError: ``name`` is not an identifier or names another function's rule (raised
        by the decorator for the latter).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"rule name {name!r}: expected an identifier")

    def add(fn: Callable[..., RoundSchedule]) -> Callable[..., RoundSchedule]:
        known = _RULES.get(name)
        if known is not None and _key(known.round) != _key(fn):
            raise ValueError(f"rule {name!r} is already registered ({_key(known.round)})")
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _RULES[name] = Rule(name, fn, pads, tuple(cluster_options), overflow, doc)
        return fn

    return add


def _key(fn: Callable) -> str:
    """A function's identity across re-imports of its module (a plugin loaded twice)."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def get_rule(name: str) -> Rule:
    """The rule registered under ``name``.

    Args:
      name: a registered rule's name.

    Returns:
      Its :class:`Rule`.

    Raises:
      ValueError: no rule has that name (the message lists them).
    """
    if name not in _RULES:
        raise ValueError(f"unknown rule {name!r}; registered: {', '.join(rule_names())}")
    return _RULES[name]


def rule_names() -> tuple[str, ...]:
    """Every registered rule.

    Returns:
      The names: the library's own, then the others in registration order.
    """
    return (*(r for r in _BUILTIN if r in _RULES), *(r for r in _RULES if r not in _BUILTIN))


def builtin(name: str) -> bool:
    """Whether ``name`` is one of the library's own rules.

    Args:
      name: a rule's name.

    Returns:
      True for ``rennala``, ``malenia``, ``sync`` and ``msync``.
    """
    return name in _BUILTIN


def run_values(hyper: Mapping[str, Any] | None, size_key: str) -> dict[str, jax.Array] | None:
    """A padded run's sizes (:class:`~jaxnigt.cluster.rounds.RoundSize`'s ``run``) from the
    sizes its program carries.

    Args:
      hyper: the run's sizes by their config names (a train state's ``sizes``; None in an
        ordinary program).
      size_key: the entry of the round's M (``M``, or ``M_init`` for round 0).

    Returns:
      ``{M, capacity, m, threshold}`` as the run carries them, or None in an ordinary
      program (no size among them).
    """
    if hyper is None:
        return None
    found = {}
    names = {"M": size_key, "capacity": "malenia_capacity", "m": "msync_m"}
    for name, key in names.items():
        if key in hyper:
            found[name] = hyper[key]
    threshold = {"M": "malenia_threshold", "M_init": "malenia_threshold_init"}[size_key]
    if threshold in hyper:
        found["threshold"] = hyper[threshold]
    return found or None
