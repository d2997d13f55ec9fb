"""The cluster model's named options and the one check that a value is one of those allowed.

The paper leaves these choices open; each is an option with a default (the first value):

* ``inflight`` (:data:`INFLIGHT`): what happens to a gradient still being computed when a
  round ends — ``cancel`` it (the worker starts the next round at once) or ``discard`` it
  on arrival (the worker is busy until it finishes).
* ``allreduce`` (:data:`ALLREDUCE`): who takes part in a round's AllReduce — ``all``
  workers (it costs the slowest link, max κ_i) or the ``contributors`` (those whose gradients
  the round used; the others receive the new point over their own link).
* ``link`` (:data:`LINKS`): the server link of the per-arrival methods — ``shared`` (one
  exchange at a time, first come first served) or ``independent`` (exchanges overlap).
"""

from __future__ import annotations

from collections.abc import Sequence

INFLIGHT = ("cancel", "discard")
ALLREDUCE = ("all", "contributors")
LINKS = ("shared", "independent")


def check_choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``; else ValueError ``NAME: got VALUE; expected one
    of [...]`` (``name`` is the option, the config field or the flag)."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name}: got {value!r}; expected one of {list(allowed)}")
    return value
