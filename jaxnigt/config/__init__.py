"""Experiment configuration: what a config file holds, read, checked and written.

* :mod:`~jaxnigt.config.schema`: the frozen dataclasses of a config (every key, its default
  and its check).
* :mod:`~jaxnigt.config.loader`: reading a config into them (``load``, ``from_dict``,
  overrides, the rules across fields, warnings).

  The names of both are this package's too (``jaxnigt.config.load``,
  ``jaxnigt.config.ExperimentConfig``, ...), loaded on first use.
* :mod:`~jaxnigt.config.checks`: the validators the loader and the ``clock`` command share.
* :mod:`~jaxnigt.config.text`: YAML files, ``KEY=VALUE`` overrides, nested merges
  (``jaxnigt.config.merge``) and the YAML of a resolved config.
* :mod:`~jaxnigt.config.bundled`: the configs shipped with the package, by name.

Importing :mod:`~jaxnigt.config.checks` loads nothing else (the core's ``jaxnigt clock``
uses it without the ``rl`` extra); the schema needs PyYAML and the algorithm registry.
"""

import importlib

_SUBMODULES = ("bundled", "checks", "loader", "schema", "text")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"jaxnigt.config.{name}")
    for part in ("loader", "schema", "text"):
        module = importlib.import_module(f"jaxnigt.config.{part}")
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module 'jaxnigt.config' has no attribute {name!r}")


def __dir__():
    names = {*globals(), *_SUBMODULES}
    for part in ("loader", "schema", "text"):
        module = importlib.import_module(f"jaxnigt.config.{part}")
        names |= {n for n in dir(module) if not n.startswith("__")}
    return sorted(names)
