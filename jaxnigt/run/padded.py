"""Padded programs: one algorithm's runs of several configs (a sweep's points) as one program.

Configs that differ only in the sizes a run can carry as values (the number of workers n,
Rennala's M and M_init, m-sync's m, the asynchronous block; :mod:`jaxnigt.algorithms.sizes`)
run as one vmapped program built for the largest of each (:func:`group`, :func:`prepare`):
each run's cluster record is padded to ``n_max`` workers (:mod:`jaxnigt.cluster.padding`), its
sizes ride in its ``hyper``, its round 0 of its own shape (``M_init != M``) is taken only when
it has one, and its evaluation chunks keep their own length.  The run loop
(:func:`jaxnigt.run.loop.run_algorithm`) drives the program as it drives any run (progress,
checkpoints, health checks); :func:`split` cuts its results into each config's, which
:func:`jaxnigt.run.experiment.record_algorithm` writes as that config's run directory.

A padded run is the unpadded run: the same draws, the same gradients chosen, the same clock;
a sum whose order changes with its length (the training return, wasted work) and the batched
rollouts may differ in float32 rounding (docs/cluster_model.md, "Padded records"). Only the
algorithms whose engine reads n and its sizes from the run are padded (their traits'
``pads``: a round method's is its rule's, :func:`jaxnigt.cluster.rules.register_rule`; a
rule that is not the library's own is first held to its unpadded rounds,
:func:`jaxnigt.cluster.rules.check_padding`); the other algorithms (IMPALA, SEED RL, ADMM),
heterogeneous tasks, power traces and sharded runs run one config at a time.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import algorithms
from jaxnigt import config as config_lib
from jaxnigt.algorithms import sizes as sizes_lib
from jaxnigt.algorithms.core import select
from jaxnigt.cluster import padding, schedules
from jaxnigt.config import ExperimentConfig
from jaxnigt.run import loop
from jaxnigt.run.batch import grid_points, seed_keys
from jaxnigt.run.metrics import MAX_COUNTED_WORKERS
from jaxnigt.run.trainer import Trainer, make_trainer

# The config keys that are values of a run in a padded program (the rest must be equal).
_RUN_VALUES = ("name", "target_return", "checkpoint_every", "algorithms", "per_algorithm")
_SIZE_KEYS = ("M", "M_init", "msync_m", "async_block", "malenia_capacity")
_TRACED_KEYS = ("learning_rate", "eta")  # each config's grid points give its runs these


class Sizes(NamedTuple):
    """One config's run sizes for one algorithm (resolved: defaults applied)."""

    n: int
    M: int
    M_init: int
    msync_m: int
    async_block: int
    malenia_capacity: int

    @property
    def first(self) -> bool:
        """Round 0 has its own shape (``M_init != M``)."""
        return self.M_init != self.M


def sizes(config: ExperimentConfig, algorithm: str) -> Sizes:
    """``config``'s sizes for ``algorithm``."""
    hp, n = config.hparams_for(algorithm), config.cluster.n
    m = hp.msync_m or schedules.default_msync_m(n)
    capacity = hp.malenia_capacity or schedules.default_malenia_capacity(hp.M, n)
    return Sizes(n, hp.M, hp.M_init or hp.M, m, hp.async_block or n, capacity)


def paddable(config: ExperimentConfig, algorithm: str) -> bool:
    """Whether ``algorithm``'s runs of ``config`` can join a padded program."""
    c = config.cluster
    return (
        algorithms.traits(algorithm).pads
        and c.power == "constant"
        and not config.env.heterogeneous
        and (config.devices == 1 or (config.devices is None and len(jax.devices()) == 1))
        and config.hparams_for(algorithm).per_worker_batch != "match_M"
    )


def identity(config: ExperimentConfig, algorithm: str) -> str:
    """What must be equal for two configs' runs of ``algorithm`` to share a padded program:
    the config but for its name, its other algorithms, n, the run sizes and the step sizes
    (``learning_rate`` and ``eta`` are traced: each run carries its own)."""
    raw = {k: v for k, v in config.to_dict().items() if k not in _RUN_VALUES}
    raw["cluster"] = {k: v for k, v in raw["cluster"].items() if k != "n"}
    hp = config_lib.text.plain(dataclasses.asdict(config.hparams_for(algorithm)))
    raw["hparams"] = {k: v for k, v in hp.items() if k not in (*_SIZE_KEYS, *_TRACED_KEYS)}
    return json.dumps([algorithm, raw], sort_keys=True, default=str)


def group(
    configs: Sequence[ExperimentConfig], algorithm: str, max_padding: float | None = None
) -> list[list[int]]:
    """The indices of ``configs`` in each program of ``algorithm``: configs of one
    :func:`identity` share a program while every one's n and M are within ``max_padding``
    of the program's largest (None: no limit), the program's final largest whatever the
    order of the configs; a config that cannot be padded (:func:`paddable`) is a program of
    its own.  Programs are in order of their first config.
    """
    cap = math.inf if max_padding is None else float(max_padding)
    programs: list[list[int]] = []
    open_: dict[str, list[list[int]]] = {}
    own = [sizes(c, algorithm) for c in configs]
    order = sorted(range(len(configs)), key=lambda i: (-own[i].n, -own[i].M, i))
    for i in order:
        cfg = configs[i]
        if not paddable(cfg, algorithm):
            programs.append([i])
            continue
        for members in open_.setdefault(identity(cfg, algorithm), []):
            joined = [own[j] for j in (*members, i)]
            n_max, M_max = max(t.n for t in joined), max(t.M for t in joined)
            if all(n_max <= cap * t.n and M_max <= cap * t.M for t in joined):
                members.append(i)
                break
        else:
            members = [i]
            open_[identity(cfg, algorithm)].append(members)
            programs.append(members)
    return sorted((sorted(p) for p in programs), key=lambda p: p[0])


def bound_config(configs: Sequence[ExperimentConfig], algorithm: str) -> ExperimentConfig:
    """The config a padded program of ``configs`` is built from: each size at its largest
    (round 0's M_init above M when some run has a round 0 of its own shape)."""
    from jaxnigt.algorithms import traits

    all_sizes = [sizes(c, algorithm) for c in configs]
    top = {k: max(getattr(s, k) for s in all_sizes) for k in Sizes._fields}
    if any(s.first for s in all_sizes) and top["M_init"] == top["M"]:
        top["M_init"] += 1  # the bound must have a round 0 of its own
    elif not any(s.first for s in all_sizes):
        top["M_init"] = top["M"]
    raw = configs[0].to_dict()
    raw.update(algorithms=[algorithm], name=f"{configs[0].name}_padded")
    raw["cluster"]["n"] = top["n"]
    own = dict(raw["per_algorithm"].get(algorithm) or {})
    own.update(M=top["M"], M_init=top["M_init"])
    for key in ("msync_m", "async_block", "malenia_capacity"):
        if key in traits(algorithm).options:
            own[key] = top[key]
    raw["per_algorithm"] = {algorithm: own}
    return config_lib.from_dict(raw)


class Member(NamedTuple):
    """One config's part of a padded program: its trainer, its grid points and sizes."""

    trainer: Trainer
    points: list[dict[str, float]]
    sizes: Sizes
    cap: int  # its evaluation chunks' length


def prepare(configs: Sequence[ExperimentConfig], algorithm: str) -> loop.Run:
    """The run (programs and inputs) of ``algorithm`` over every config in ``configs``, one
    padded program; batch entry order: config, then grid point, then seed."""
    base = configs[0]
    bound = make_trainer(bound_config(configs, algorithm), algorithm)
    members = []
    for cfg in configs:
        tr = make_trainer(cfg, algorithm)
        cap = tr.eval_chunk(cfg.eval.every, cfg.eval.every_time)[0]
        members.append(Member(tr, grid_points(cfg, algorithm), sizes(cfg, algorithm), cap))
    S = base.seeds
    per = [len(m.points) * S for m in members]
    n_max = bound.setup.n
    records = padding.stack(
        [
            padding.pad(m.trainer.setup.cluster, n_max)
            for m, k in zip(members, per, strict=True)
            for _ in range(k)
        ]
    )
    keys = jnp.concatenate(
        [seed_keys(c, S) for c, m in zip(configs, members, strict=True) for _ in m.points]
    )
    repeat = lambda f: np.asarray(
        [f(m) for m, k in zip(members, per, strict=True) for _ in range(k)]
    )
    runs = [p for m in members for p in m.points for _ in range(S)]
    values = {k: np.asarray([p[k] for p in runs]) for k in runs[0]}
    values |= {k: repeat(lambda m, k=k: getattr(m.sizes, k)) for k in _SIZE_KEYS}
    threshold = lambda m, k: sizes_lib.malenia_thresholds(m.sizes.n, m.sizes.M, m.sizes.M_init)[k]
    values |= {k: repeat(lambda m, k=k: threshold(m, k)) for k in sizes_lib.THRESHOLD_KEYS}
    hyper = bound.hyper(batch=len(runs), **values)
    caps, first = jnp.asarray(repeat(lambda m: m.cap)), jnp.asarray(repeat(lambda m: m.sizes.first))
    width = n_max if n_max <= MAX_COUNTED_WORKERS else None
    if width is None and min(m.sizes.n for m in members) <= MAX_COUNTED_WORKERS:
        width = MAX_COUNTED_WORKERS
    programs = _programs(bound, base, records, caps, first, max(m.cap for m in members), width)
    budget = base.budget if base.budget is not None else math.inf
    return loop.Run(
        trainer=bound,
        points=[p for m in members for p in m.points],
        num_seeds=S,
        first_seed=base.first_seed,
        keys=keys,
        hyper=hyper,
        mesh=None,
        program=programs[0],
        init=programs[1],
        first_step=programs[2],
        budget=budget,
        max_rounds=base.max_rounds if base.max_rounds is not None else math.inf,
        budgets=np.full(len(runs), budget, np.float32),
        diverged=np.zeros(len(runs), bool),
        every=max(m.cap for m in members),
        time_grid=base.eval.every_time is not None,
        count_width=width or n_max,
    )


def _programs(bound: Trainer, config, records, caps, first, length: int, width: int | None):
    """``(chunk, init, first_step)`` of the padded program, its per-run inputs bound."""
    every_time = config.eval.every_time
    max_rounds = config.max_rounds if config.max_rounds is not None else math.inf
    trim = lambda m: m if width is None else m | {"worker_counts": m["worker_counts"][..., :width]}

    def chunk(recs, state, keys, train, budgets, caps):
        def one(rec, s, k, b, c):
            tr = bound.bind(rec)
            return tr.chunk_and_evaluate(
                s, k, train, length, budget=b, max_rounds=max_rounds, every_time=every_time, cap=c
            )

        state, metrics, returns = jax.vmap(one)(recs, state, keys, budgets, caps)
        return state, trim(metrics), returns

    def init(recs, keys, hyper):
        return jax.vmap(lambda r, k, h: bound.bind(r).init(k, h))(recs, keys, hyper)

    def first_step(recs, state, budgets, flags):
        def one(r, s, b, f):
            new, m = bound.bind(r).first_step(s, b)
            return select(f, new, s), {**m._asdict(), "applied": f}

        state, m = jax.vmap(one)(recs, state, budgets, flags)
        return state, trim(m)

    chunk, init, first_step = jax.jit(chunk), jax.jit(init), jax.jit(first_step)
    return (
        lambda state, keys, train, budgets: chunk(records, state, keys, train, budgets, caps),
        lambda keys, hyper: init(records, keys, hyper),
        (lambda state, budgets: first_step(records, state, budgets, first))
        if bound.first_step is not None
        else None,
    )


def split(
    m: dict[str, np.ndarray], configs: Sequence[ExperimentConfig], algorithm: str
) -> list[dict[str, np.ndarray]]:
    """The results of a padded program (:func:`jaxnigt.run.loop.run_algorithm`'s dict) cut
    into each config's, as its own run would return them (the wall and compile seconds are
    the program's)."""
    out, start = [], 0
    batch = len(m["diverged"])
    for cfg in configs:
        G, S = len(grid_points(cfg, algorithm)), cfg.seeds
        part = {
            k: (v[start : start + G * S] if np.ndim(v) and len(v) == batch else v)
            for k, v in m.items()
        }
        part["grid"] = np.repeat(np.arange(G), S)
        n = cfg.cluster.n
        if "worker_counts" in part:
            if n <= MAX_COUNTED_WORKERS:
                part["worker_counts"] = part["worker_counts"][..., :n]
            else:
                del part["worker_counts"]
        out.append(part)
        start += G * S
    return out
