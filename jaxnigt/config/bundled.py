"""The configs bundled with the package: the repository's top-level ``configs/``, by name.

``jaxnigt/configs`` is a link to that folder, so a checkout and an editable install read the
files themselves, and a built wheel holds copies (package data, ``pyproject.toml``); every
read goes through :mod:`importlib.resources`.  A config is named by its path inside the
folder, with or without ``.yaml`` (``demo``, ``sweeps/n_scaling_cpu.yaml``; a leading
``configs/`` is allowed too).
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

SUFFIX = ".yaml"


def root() -> Traversable:
    """The bundled configs folder."""
    return resources.files("jaxnigt").joinpath("configs")


def _walk(folder: Traversable, prefix: str) -> list[str]:
    found = []
    for entry in folder.iterdir():
        if entry.is_dir():
            found += _walk(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(SUFFIX):
            found.append(prefix + entry.name)
    return found


def names() -> list[str]:
    """Every bundled config's name, e.g. ``demo.yaml`` and ``sweeps/n_scaling_cpu.yaml``:
    the top level first, then each subfolder's (sorted)."""
    folder = root()
    if not folder.is_dir():
        return []
    return sorted(_walk(folder, ""), key=lambda n: (n.count("/"), n))


def find(name: str) -> Traversable | None:
    """The bundled config called ``name`` (see the module docstring), or None."""
    name = name.removeprefix("configs/")
    parts = [p for p in name.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    for candidate in (parts, [*parts[:-1], parts[-1] + SUFFIX]):
        entry = root().joinpath(*candidate)
        if entry.name.endswith(SUFFIX) and entry.is_file():
            return entry
    return None
