"""The text of a config: YAML files, ``KEY=VALUE`` overrides (the command line's ``--set``),
and the YAML of a resolved config.

Plain mappings in, plain mappings out; :mod:`jaxnigt.config` validates what they produce.
An override's error is an :class:`OverrideError` that names the override, not the flag: the
command line, which knows the flag, puts it in front.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from jaxnigt.config.checks import ConfigError


class OverrideError(ConfigError):
    """An override is malformed (not ``KEY=VALUE``, bad YAML, or a key through a value)."""


class Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with two changes for configs: ``1e3``, ``-2.5E-4`` are numbers
    (YAML 1.2; PyYAML follows YAML 1.1, which reads a float without a dot as a string), and
    a mapping that repeats a key is an error (:func:`load_text`) instead of the last value
    silently winning."""


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


class DuplicateKeyError(yaml.YAMLError):
    """A mapping sets ``key`` (dotted from the document's top) twice: on ``first`` and again
    on ``line`` (1-based)."""

    def __init__(self, key: str, line: int, first: int):
        super().__init__(f"line {line}: duplicate key {key!r} (first set on line {first})")
        self.key, self.line, self.first = key, line, first


def _check_duplicates(node: yaml.Node, path: str, seen: set[int]) -> None:
    """Raises :class:`DuplicateKeyError` at the first mapping under ``node`` that repeats a key
    (a merge key ``<<`` is not a repeat: its entries are defaults the mapping's own keys
    override)."""
    if id(node) in seen:  # an alias of a node already walked
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            dotted = f"{path}.{key.value}" if path else key.value
            line = key.start_mark.line + 1
            if (key.tag, key.value) in first:
                raise DuplicateKeyError(dotted, line, first[key.tag, key.value])
            first[key.tag, key.value] = line
            _check_duplicates(value, dotted, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicates(item, f"{path}[{i}]", seen)


def load_text(text: str) -> Any:
    """The value of one YAML document (:class:`Loader`: ``1e3`` is a number; a repeated key
    raises :class:`DuplicateKeyError`, any other malformed text ``yaml.YAMLError``)."""
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicates(node, "", set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


def yaml_problem(e: yaml.YAMLError, *, lines: bool = True) -> str:
    """One line of where and what of a YAML error: ``line L, column C: PROBLEM, CONTEXT from
    line L'`` (1-based), what PyYAML says in several lines; ``lines=False`` for a text of
    one line (a ``--set`` value): the column alone."""
    if isinstance(e, DuplicateKeyError):
        where = f"line {e.line}: " if lines else ""
        first = f" (first set on line {e.first})" if lines else ""
        return f"{where}duplicate key {e.key!r}{first}"
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(e).split("\n")[0].split())  # a ReaderError: its first line
    where = (
        f"line {mark.line + 1}, column {mark.column + 1}" if lines else f"column {mark.column + 1}"
    )
    text = f"{where}: {problem}"
    context, at = getattr(e, "context", None), getattr(e, "context_mark", None)
    if context:
        text += f", {context}" + (f" from line {at.line + 1}" if at is not None and lines else "")
    return text


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
        parsed = load_text(value)
    except yaml.YAMLError as e:
        raise OverrideError(
            f"{key}: value {value!r} is not valid YAML ({yaml_problem(e, lines=False)})"
        ) from None
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
    """Reads a YAML mapping (:func:`load_text`); raises ConfigError, naming the file, on an
    unreadable file, one that is not UTF-8 text, and malformed YAML (with its line), a
    repeated key among them."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"config: cannot read {str(path)!r}: {e.strerror}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config: {str(path)!r} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
            f"{e.start:,}); a config is a YAML file"
        ) from None
    try:
        raw = load_text(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config: {str(path)!r} is not valid YAML: {yaml_problem(e)}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config: {str(path)!r} must contain a mapping, got {type(raw).__name__}")
    return dict(raw)


def dump(config: Any) -> str:
    """YAML text of a resolved config (an ``ExperimentConfig``; :func:`read_yaml` reads it back)."""
    return yaml.safe_dump(config.to_dict(), sort_keys=False)
