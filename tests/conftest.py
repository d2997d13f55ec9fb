"""Shared pytest setup: a persistent compilation cache so repeated shapes compile once."""

import os
import pathlib

# Test processes run side by side (pytest-xdist); on a GPU none may take most of its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax

_CACHE = pathlib.Path(
    os.environ.get("JAXNIGT_TEST_CACHE", pathlib.Path(__file__).parent.parent / ".jax_cache")
)
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
os.environ.setdefault("JAXNIGT_TEST_CACHE", str(_CACHE))  # subprocesses share the cache
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
