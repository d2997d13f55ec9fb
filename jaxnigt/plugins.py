"""Plugins: a user's own module that registers rules, algorithms or environments.

A plugin is any Python module that, when imported, registers what it adds
(:func:`jaxnigt.cluster.rules.register_rule`, :func:`jaxnigt.algorithms.register` /
:func:`~jaxnigt.algorithms.register_round_algorithm`).  Nothing inside the package is edited.
It is loaded, once a process, from any of:

* ``jaxnigt --plugin MODULE ...`` (repeatable; before the command);
* a config's top-level ``plugins: [MODULE, ...]`` key (loaded before the config is checked,
  so its algorithms are known names);
* the environment variable ``JAXNIGT_PLUGINS`` (``MODULE:MODULE``; :func:`load` sets it, so
  worker processes a run starts load the same plugins);
* the entry-point group ``jaxnigt.plugins`` of an installed distribution
  (``[project.entry-points."jaxnigt.plugins"] mine = "my_package.rules"``).

``MODULE`` is a dotted module name (importable from ``sys.path`` or the working directory)
or the path of a ``.py`` file (``examples/my_rule.py``), loaded under the module name
``jaxnigt_plugin_<stem>``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

ENV = "JAXNIGT_PLUGINS"
ENTRY_POINTS = "jaxnigt.plugins"
_LOADED: dict[str, ModuleType] = {}


class PluginError(ImportError):
    """A plugin that cannot be found or fails while it is imported.

    Args:
      message: which plugin, and why (one line).
    """


def load(specs: Iterable[str]) -> list[ModuleType]:
    """Imports each plugin once a process and records it in ``JAXNIGT_PLUGINS`` for the
    processes this one starts.

    Args:
      specs: module names or ``.py`` paths.

    Returns:
      The plugins' modules, in order.

    Raises:
      PluginError: a plugin is not found or raises while it is imported.
    """
    modules = []
    for spec in specs:
        spec = str(spec).strip()
        if spec:
            modules.append(_load_one(spec))
    return modules


def _load_one(spec: str) -> ModuleType:
    key = str(Path(spec).resolve()) if spec.endswith(".py") else spec
    if key in _LOADED:
        return _LOADED[key]
    try:
        module = _import_file(Path(spec)) if spec.endswith(".py") else _import_name(spec)
    except PluginError:
        raise
    except Exception as e:  # a plugin's own error, named with the plugin
        raise PluginError(f"plugin {spec!r} failed while loading: {type(e).__name__}: {e}") from e
    _LOADED[key] = module
    known = [s for s in os.environ.get(ENV, "").split(os.pathsep) if s]
    if key not in known:
        os.environ[ENV] = os.pathsep.join([*known, key])
    return module


def _import_name(name: str) -> ModuleType:
    if importlib.util.find_spec(name.split(".")[0]) is None and "" not in sys.path:
        sys.path.insert(0, "")  # the working directory, as `python -m` would have it
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and name.startswith(e.name):
            raise PluginError(
                f"plugin {name!r} not found: give an importable module name or a .py path"
            ) from e
        raise


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise PluginError(f"plugin {str(path)!r} not found: no such file")
    name = f"jaxnigt_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_environment() -> list[ModuleType]:
    """Loads the plugins of ``JAXNIGT_PLUGINS`` and of the ``jaxnigt.plugins`` entry points.

    Returns:
      Their modules.
    """
    specs = [s for s in os.environ.get(ENV, "").split(os.pathsep) if s]
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        specs.append(entry.value)
    return load(specs)


def loaded() -> tuple[str, ...]:
    """The plugins loaded in this process.

    Returns:
      Their names (a ``.py`` plugin's resolved path).
    """
    return tuple(_LOADED)
