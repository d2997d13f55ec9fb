"""The batch of one algorithm's vmapped program: grid points × seeds, and their keys.

Batch entry ``b`` is seed ``first_seed + b mod seeds`` of grid point ``b // seeds``.  Seed
``s`` trains with ``fold_in(key(config.seed), s)`` at every grid point, so the same seed gives
the same run whichever seeds share its program; evaluation draws from keys of its own.
Light enough for ``jaxnigt plan`` and the benchmark scripts, which size or rebuild the
runner's batch without importing the runner.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp

from jaxnigt.config import ExperimentConfig

#: Evaluation keys fold in this tag first: evaluation randomness is apart from training's.
EVAL_TAG = 1 << 30


def grid_points(config: ExperimentConfig, algorithm: str) -> list[dict[str, float]]:
    """The (learning_rate, eta) points of the config's grid (one point without a grid)."""
    hp = config.hparams_for(algorithm)
    lrs = config.grid.learning_rate or (hp.learning_rate,)
    etas = config.grid.eta or (hp.eta,)
    return [{"learning_rate": a, "eta": e} for a, e in itertools.product(lrs, etas)]


def batch_size(config: ExperimentConfig, algorithm: str) -> int:
    """Runs in one algorithm's program: seeds × grid points."""
    return config.seeds * len(grid_points(config, algorithm))


def seed_indices(config: ExperimentConfig, num_seeds: int) -> jax.Array:
    """The run's seeds: ``first_seed … first_seed + num_seeds - 1``."""
    return config.first_seed + jnp.arange(num_seeds)


def seed_keys(config: ExperimentConfig, num_seeds: int) -> jax.Array:
    """Seed s uses ``fold_in(key(config.seed), s)``: the same seed gives the same run."""
    base = jax.random.key(config.seed)
    return jax.vmap(lambda s: jax.random.fold_in(base, s))(seed_indices(config, num_seeds))


def eval_keys(keys: jax.Array, chunk: int) -> jax.Array:
    """The evaluation keys after ``chunk`` chunks (0: the evaluation at time 0)."""
    tagged = lambda k: jax.random.fold_in(jax.random.fold_in(k, EVAL_TAG), chunk)
    return jax.vmap(tagged)(keys)
