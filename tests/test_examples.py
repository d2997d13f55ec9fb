"""The examples/ folder: each example is short, imports public names only, and computes what
the library computes.

``examples/rennala_nigt_minimal.py`` runs Rennala NIGT round by round from public functions;
here it is held equal to the library's own run (:func:`jaxnigt.make_trainer` of a config
with the same environment, cluster and hyperparameters, from the same key) for five rounds:
the same slots land in each round (worker and rank, exactly), the same clock (round ends and
when each worker is free, to float32 rounding) and the same params y_t and iterate x_t (to a
float tolerance: the example sums per-slot gradients per worker and reduces them, the library
takes one weighted backward pass, so the two differ by rounding only).
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib

import chex
import jax
import numpy as np
import pytest

import jaxnigt
from jaxnigt import config as config_lib

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"
MINIMAL = EXAMPLES / "rennala_nigt_minimal.py"
MAX_EXAMPLE_LINES = 150

# A small run: 4 workers with compute times growing as sqrt(i) and exponential noise, M = 8.
SMALL = {
    "n": 4,
    "M": 8,
    "h": "sqrt",
    "kappa": 1.0,
    "noise": "exponential",
    "learning_rate": 0.03,
    "eta": 0.3,
    "gamma": 0.99,
}
ROUNDS = 5


def _load(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _library_run(key: jax.Array, rounds: int):
    """The library's Rennala NIGT on the same config: its state and metrics per round."""
    cfg = config_lib.from_dict(
        {
            "env": {"name": "point_mass"},
            "cluster": {k: SMALL[k] for k in ("n", "h", "kappa", "noise")},
            "algorithms": ["rennala_nigt"],
            "hparams": {k: SMALL[k] for k in ("M", "learning_rate", "eta", "gamma")},
            "budget": 1000.0,
        }
    )
    tr = jaxnigt.make_trainer(cfg, "rennala_nigt")
    assert tr.first_step is None  # M_init = M: round 0 is an ordinary round
    step = jax.jit(tr.step)
    states, metrics = [tr.init(key, tr.hyper())], []
    for _ in range(rounds):
        state, m = step(states[-1])
        states.append(state)
        metrics.append(m)
    return tr, states, metrics


@pytest.mark.parametrize("seed", [0, 3])
def test_minimal_example_is_the_library_run(seed):
    example = _load(MINIMAL)
    key = jax.random.key(seed)
    _, _, runs, schedules = example.train(key, rounds=ROUNDS, **SMALL)
    tr, states, metrics = _library_run(key, ROUNDS)
    chex.assert_trees_all_equal(runs[0].params, states[0].params)  # the same x_0
    for r in range(1, ROUNDS + 1):
        run, state, m, sched = runs[r], states[r], metrics[r - 1], schedules[r - 1]
        np.testing.assert_array_equal(sched.counts, m.worker_counts)
        assert int(sched.num_slots) == int(m.grads) == SMALL["M"]
        np.testing.assert_allclose(run.time, state.counters.time, rtol=1e-6)
        np.testing.assert_allclose(run.busy_until, state.busy_until, rtol=1e-6)
        chex.assert_trees_all_equal(run.key, state.key)
        chex.assert_trees_all_close(run.params, state.params, rtol=1e-4, atol=1e-5)
        x_example = jaxnigt.nigt_eval_params(run.opt_state)
        chex.assert_trees_all_close(x_example, tr.deploy_params(state), rtol=1e-4, atol=1e-5)
    moved = jax.tree.map(lambda a, b: float(np.abs(a - b).max()), runs[-1].params, runs[0].params)
    assert max(jax.tree.leaves(moved)) > 1e-3  # the rounds did move the params


def _imports(path: pathlib.Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` of every import of a file (``name`` None for ``import module``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out += [(node.module, a.name) for a in node.names]
    return out


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_examples_are_short_and_use_public_names_only(path):
    """A public name of jaxnigt: no part of its dotted path starts with an underscore, and a
    name imported from a module is one the module holds (a package's export or a module's
    own function, class or submodule)."""
    assert len(path.read_text().splitlines()) <= MAX_EXAMPLE_LINES
    for module, name in _imports(path):
        if module.split(".")[0] != "jaxnigt":
            continue
        parts = [*module.split("."), *([name] if name else [])]
        assert not any(p.startswith("_") for p in parts), (module, name)
        if name is not None:
            held = importlib.import_module(module)
            assert hasattr(held, name), (module, name)
