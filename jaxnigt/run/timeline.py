"""The timeline of a finished run's first rounds: seed 0 replayed from its run directory.

A run directory keeps the config, the metrics and the checkpoints, not each round's
gradients.  :func:`run_timeline` rebuilds them exactly: it builds the run's trainer from its
``config.yaml``, starts seed 0 (grid point 0) from the run's own key, and takes the run's
first rounds again, reading each round's schedule from the state it starts from
(``Algorithm.round_schedule``: the same key, record and sizes the run used) before the step
takes it.  The compute times of each round are drawn again from that round's key as its rule
drew them (:func:`jaxnigt.cluster.simulation.round_gradients`), so the bars are the run's,
and the round ends are its ``metrics.csv`` times.  Round methods only (the rules of
:mod:`jaxnigt.cluster.rules`); the per-arrival engines' pictures are ``jaxnigt clock``'s.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import algorithms
from jaxnigt import config as config_lib
from jaxnigt.algorithms import core
from jaxnigt.cluster import simulation, timeline
from jaxnigt.run.batch import grid_points, seed_keys
from jaxnigt.run.trainer import make_trainer

#: The most workers a run's timeline draws bar by bar (more: the density view).
ROUNDS = 5


def round_methods(config: config_lib.ExperimentConfig) -> list[str]:
    """The config's algorithms that are round methods (a timeline can replay them).

    Args:
      config: the run's config.

    Returns:
      Their names, in the config's order.
    """
    return [a for a in config.algorithms if algorithms.traits(a).rule is not None]


def run_timeline(
    run_dir: str | Path, *, algorithm: str | None = None, rounds: int = ROUNDS
) -> timeline.Timeline:
    """The first ``rounds`` rounds of seed 0 (grid point 0) of a run, replayed exactly.

    Args:
      run_dir: a run directory (its ``config.yaml``).
      algorithm: a round method of the run (default: its first).
      rounds: how many rounds, from the start.

    Returns:
      The :class:`~jaxnigt.cluster.timeline.Timeline` (its ``rule`` the method's rule).

    Raises:
      ValueError: no ``config.yaml``, an algorithm that is not a round method of the run,
        or ``rounds < 1``.
    """
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ValueError(f"{str(run_dir)!r} is not a run directory (no config.yaml)")
    cfg = config_lib.load(path)
    methods = round_methods(cfg)
    if algorithm is None and methods:
        algorithm = methods[0]
    if algorithm not in methods:
        raise ValueError(
            f"algorithm: got {algorithm!r}; a timeline replays a round method of the run: "
            f"{', '.join(methods) or 'none here'}"
        )
    if rounds < 1:
        raise ValueError(f"rounds: got {rounds}; expected an integer >= 1")
    tr = make_trainer(cfg, algorithm)
    key = seed_keys(cfg, cfg.seeds)[0]
    state = jax.jit(tr.init)(key, tr.hyper(**grid_points(cfg, algorithm)[0]))
    model = core.cluster_of(tr.setup, state)
    records, keys, sizes = [], [], []
    for r in range(rounds):
        first = r == 0 and tr.first_step is not None
        sched, k_sched, size = tr.algorithm.round_schedule(state, first)
        records.append(sched), keys.append(k_sched), sizes.append(size)
        state = jax.jit(tr.first_step if first else tr.step)(state, jnp.inf)[0]
    fields = ("t_start", "t_collect_end", "t_end", "counts", "busy_until", "time_used")
    fields += ("time_wasted",)
    res = {f: jnp.stack([getattr(s, f) for s in records]) for f in fields}
    rule, keys = tr.algorithm.traits.rule, jnp.stack(keys)
    grads = simulation.round_gradients(model, key, res, rule=rule, size=sizes[-1], round_keys=keys)
    grads = {k: np.asarray(v) for k, v in grads.items()}
    if sizes[0] != sizes[-1]:  # round 0 of M_init: its own draw (it starts with every worker free)
        first_row = {f: v[:1] for f, v in res.items()}
        g0 = simulation.round_gradients(
            model, key, first_row, rule=rule, size=sizes[0], round_keys=keys[:1]
        )
        grads = _with_first(grads, {k: np.asarray(v) for k, v in g0.items()})
    res = {f: np.asarray(v) for f, v in res.items()} | grads
    return timeline.from_rounds(model, key, res, rule=rule)


def _with_first(grads: dict, first: dict) -> dict:
    """``grads`` with round 0 replaced by ``first``'s, the gradient columns padded with
    never-completing ones to the wider of the two."""
    K = max(grads["grad_end"].shape[-1], first["grad_end"].shape[-1])
    pad = lambda x: np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, K - x.shape[-1])],
                           constant_values=np.inf)  # fmt: skip
    out = {}
    for f, v in grads.items():
        v0 = first[f]
        if f in ("grad_end", "grad_work"):
            v, v0 = pad(v), pad(v0)
        out[f] = np.concatenate([v0, v[1:]])
    return out
