"""Validators shared by the config loader and the ``clock`` command.

A validator is ``check(path, value, siblings) -> value``: it returns the (normalized) value
or raises :class:`CheckError` with a one-line message that names ``path`` (a config field or
a command-line flag), the bad value and what is allowed.  ``siblings`` holds the fields of the
same config section parsed so far, for checks that depend on another field.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jaxnigt.cluster.model import check_choice

Check = Callable[[str, Any, dict], Any]
#: The largest float32: the simulation computes in float32, so a larger number (a budget of
#: ``1e39``) would be ``inf`` there; :func:`number` refuses it.
FLOAT32_MAX = 3.4028234663852886e38


class CheckError(ValueError):
    """A value is invalid; the message names where, what was given and what is allowed."""


class ConfigError(CheckError):
    """A config value is invalid; the message names the field and the allowed values
    (:mod:`jaxnigt.config` raises it; also ``jaxnigt.config.ConfigError``)."""


def _type_error(path: str, value: Any, allowed: str) -> CheckError:
    return CheckError(f"{path}: got {value!r} ({type(value).__name__}); expected {allowed}")


def optional(check: Check) -> Check:
    """``None`` or a value that passes ``check``."""
    return lambda path, v, ctx: None if v is None else check(path, v, ctx)


def suggestion(value: Any, allowed: Sequence[str]) -> str:
    """``did you mean 'X'? `` when one of ``allowed`` is close to ``value`` (a misspelling),
    else ``""``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(allowed), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def integer(minimum: int | None = None) -> Check:
    """An ``int`` (not a bool), optionally ``>= minimum``; a float with no fraction (``1e6``,
    ``20.0``) is that integer."""

    def check(path, v, ctx):
        allowed = "an integer" + (f" >= {minimum}" if minimum is not None else "")
        if isinstance(v, float) and v.is_integer() and abs(v) <= 2**53:
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _type_error(path, v, allowed)
        if minimum is not None and v < minimum:
            raise CheckError(f"{path}: got {v!r}; expected {allowed}")
        return v

    return check


def number(low: float | None = None, high: float | None = None, *, open_low=True) -> Check:
    """A finite number as ``float`` that float32 holds (at most :data:`FLOAT32_MAX` in size),
    optionally in ``(low, high]`` (``[low`` if not ``open_low``)."""
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
        if abs(v) > FLOAT32_MAX:
            raise CheckError(
                f"{path}: got {v!r}; expected {what} of at most {FLOAT32_MAX:.6g} in size "
                "(the simulation computes in float32)"
            )
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


def path_component(path: str, v: Any, ctx: dict) -> str:
    """A string that names one file or directory (a run's directory ``runs/<name>``): not
    empty, not ``.`` or ``..``, no ``/`` or ``\\``."""
    allowed = "one path component: a non-empty name, no slash or backslash, not '.' or '..'"
    if not isinstance(v, str):
        raise _type_error(path, v, allowed)
    if v in ("", ".", "..") or "/" in v or "\\" in v or "\0" in v:
        raise CheckError(f"{path}: got {v!r}; expected {allowed}")
    return v


def choice(choices: Sequence[str] | Callable[[], Sequence[str]]) -> Check:
    """One of ``choices`` (or of what a callable returns, looked up when checked)."""

    def check(path, v, ctx):
        allowed = list(choices() if callable(choices) else choices)
        if not isinstance(v, str):
            raise _type_error(path, v, f"one of {allowed}")
        try:
            return check_choice(path, v, allowed)
        except ValueError:
            raise CheckError(
                f"{path}: got {v!r}; {suggestion(v, allowed)}expected one of {allowed}"
            ) from None

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


# ------------------------------------------------------------------- config dataclasses


def _section(path: str, raw: Any, cls: type) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: got {raw!r}; expected a mapping of {cls.__name__} fields")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in names:
            raise ConfigError(
                f"{path}.{key}: unknown key; {suggestion(key, names)}allowed keys: {names}"
            )
    return dict(raw)


def empty_section(path: str, cls: type) -> ConfigError:
    """The error of a section given as null (``env:`` with nothing under it, ``--set
    env=``): not a run of its defaults, which its user did not write."""
    return ConfigError(
        f"{path}: got null (a section with nothing under it); expected a mapping of "
        f"{cls.__name__} fields, or leave the section out to take its defaults"
    )


def _default(f: dataclasses.Field, base: Any) -> Any:
    if base is not None:
        return getattr(base, f.name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def parse_dataclass(
    cls: type,
    raw: Any,
    path: str,
    base: Any = None,
    *,
    name: Callable[[str], str] | None = None,
) -> Any:
    """An instance of the config dataclass ``cls`` from a mapping.

    Every field is validated by its own check (``field.metadata["check"]``); absent fields
    take the default, or ``base``'s value; a dataclass-valued field is parsed the same way.

    Args:
      cls: the dataclass (a config section).
      raw: the mapping of its fields (None: every field absent).
      path: where the section is (``cluster``; ``""`` for the top level).
      base: the instance whose values absent fields take (default: the defaults).
      name: how an error names a field (default ``path.field``): ``jaxnigt clock`` names
        its flag instead.

    Returns:
      The instance.

    Raises:
      ConfigError: naming the field, the value and what is allowed.
    """
    given = _section(path or "config", raw, cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        where = name(f.name) if name is not None else where
        if dataclasses.is_dataclass(f.default_factory):
            if f.name in given and given[f.name] is None:
                raise empty_section(where, f.default_factory)
            values[f.name] = parse_dataclass(f.default_factory, given.get(f.name), where)
            continue
        value = given.get(f.name, _default(f, base))
        try:
            values[f.name] = f.metadata["check"](where, value, values)
        except ConfigError:
            raise
        except CheckError as e:
            raise ConfigError(str(e)) from None
    return cls(**values)
