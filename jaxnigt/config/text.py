"""The text of a config: YAML files, ``KEY=VALUE`` overrides (the command line's ``--set``),
and the YAML of a resolved config.

Plain mappings in, plain mappings out; :mod:`jaxnigt.config` validates what they produce.
An override's error is an :class:`OverrideError` that names the override, not the flag: the
command line, which knows the flag, puts it in front.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from jaxnigt.config.checks import ConfigError


class OverrideError(ConfigError):
    """An override is malformed (not ``KEY=VALUE``, bad YAML, or a key through a value)."""


def merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with the (nested) entries of ``extra`` put over it; neither is changed.

    A mapping in ``extra`` merges into the mapping under the same key; any other value
    replaces it.  This is how a scenario's overrides go over a base config.
    """
    out = plain(base)
    for k, v in extra.items():
        out[k] = merge(out.get(k) or {}, v) if isinstance(v, Mapping) else plain(v)
    return out


def plain(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, tuple | list):
        return [plain(v) for v in x]
    return x


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parses one ``key.sub=value`` override (value is YAML: ``[a, b]``, ``0.1``, ...)."""
    if "=" not in text:
        raise OverrideError(f"got {text!r}; expected KEY=VALUE, e.g. hparams.eta=0.1")
    key, value = text.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise OverrideError(f"got {text!r}; expected KEY=VALUE with a dotted key")
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        raise OverrideError(f"{key}: value {value!r} is not valid YAML") from None
    return parts, parsed


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of ``raw`` with the ``key.sub=value`` overrides applied (``raw`` is unchanged)."""
    out = plain(dict(raw))
    for text in overrides:
        parts, value = parse_override(text)
        node = out
        for p in parts[:-1]:
            child = node.get(p)
            if child is None:
                child = {}
            elif not isinstance(child, Mapping):
                raise OverrideError(f"{'.'.join(parts)}: {p!r} is not a section")
            node[p] = child = dict(child)
            node = child
        node[parts[-1]] = value
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Reads a YAML mapping; raises ConfigError on unreadable or malformed files."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"config: cannot read {str(path)!r}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(
            f"config: {str(path)!r} is not valid YAML ({e.__class__.__name__})"
        ) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config: {str(path)!r} must contain a mapping, got {type(raw).__name__}")
    return dict(raw)


def dump(config: Any) -> str:
    """YAML text of a resolved config (an ``ExperimentConfig``; :func:`read_yaml` reads it back)."""
    return yaml.safe_dump(config.to_dict(), sort_keys=False)
