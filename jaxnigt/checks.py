"""Validators shared by the config loader and the ``clock`` command.

A validator is ``check(path, value, siblings) -> value``: it returns the (normalized) value
or raises :class:`CheckError` with a one-line message that names ``path`` (a config field or
a command-line flag), the bad value and what is allowed.  ``siblings`` holds the fields of the
same config section parsed so far, for checks that depend on another field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

Check = Callable[[str, Any, dict], Any]


class CheckError(ValueError):
    """A value is invalid; the message names where, what was given and what is allowed."""


def _type_error(path: str, value: Any, allowed: str) -> CheckError:
    return CheckError(f"{path}: got {value!r} ({type(value).__name__}); expected {allowed}")


def optional(check: Check) -> Check:
    """``None`` or a value that passes ``check``."""
    return lambda path, v, ctx: None if v is None else check(path, v, ctx)


def integer(minimum: int | None = None) -> Check:
    """An ``int`` (not a bool), optionally ``>= minimum``."""

    def check(path, v, ctx):
        allowed = "an integer" + (f" >= {minimum}" if minimum is not None else "")
        if isinstance(v, bool) or not isinstance(v, int):
            raise _type_error(path, v, allowed)
        if minimum is not None and v < minimum:
            raise CheckError(f"{path}: got {v!r}; expected {allowed}")
        return v

    return check


def number(low: float | None = None, high: float | None = None, *, open_low=True) -> Check:
    """A finite number as ``float``, optionally in ``(low, high]`` (``[low`` if not
    ``open_low``)."""
    if low is None:
        what = "a finite number"
    elif high is None:
        what = f"a finite number {'>' if open_low else '>='} {low:g}"
    else:
        what = f"a number in {'(' if open_low else '['}{low:g}, {high:g}]"

    def check(path, v, ctx):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _type_error(path, v, what)
        v = float(v)
        bad_low = low is not None and (v <= low if open_low else v < low)
        if not math.isfinite(v) or bad_low or (high is not None and v > high):
            raise CheckError(f"{path}: got {v!r}; expected {what}")
        return v

    return check


def boolean(path: str, v: Any, ctx: dict) -> bool:
    """``true`` or ``false``."""
    if not isinstance(v, bool):
        raise _type_error(path, v, "true or false")
    return v


def string(path: str, v: Any, ctx: dict) -> str:
    """Any string."""
    if not isinstance(v, str):
        raise _type_error(path, v, "a string")
    return v


def choice(choices: Sequence[str] | Callable[[], Sequence[str]]) -> Check:
    """One of ``choices`` (or of what a callable returns, looked up when checked)."""

    def check(path, v, ctx):
        allowed = list(choices() if callable(choices) else choices)
        if not isinstance(v, str):
            raise _type_error(path, v, f"one of {allowed}")
        if v not in allowed:
            raise CheckError(f"{path}: got {v!r}; expected one of {allowed}")
        return v

    return check


def sequence(item: Check, *, what: str) -> Check:
    """A non-empty list whose entries pass ``item``, as a tuple."""

    def check(path, v, ctx):
        if not isinstance(v, list | tuple) or not v:
            raise CheckError(f"{path}: got {v!r}; expected a non-empty list of {what}")
        return tuple(item(f"{path}[{i}]", x, ctx) for i, x in enumerate(v))

    return check


def integer_text(path: str, raw: Any, minimum: int | None = None) -> int:
    """An integer given as text (a command-line flag), then checked like :func:`integer`."""
    try:
        value = int(str(raw).strip())
    except ValueError:
        allowed = "an integer" + (f" >= {minimum}" if minimum is not None else "")
        raise CheckError(f"{path}: got {raw!r}; expected {allowed}") from None
    return integer(minimum)(path, value, {})
