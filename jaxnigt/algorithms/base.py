"""The two engines every algorithm is composed from.

* **Round-based** methods (Rennala/Malenia/Sync NIGT, Sync/Rennala PG): each round a schedule
  picks the trajectory slots that count, an aggregator weights them, the estimator reduces
  them to one gradient at the broadcast point, and an optax update moves the point. An
  algorithm is a :class:`RoundSpec`: (schedule, weights, optimizer).
* **Asynchronous** methods (AFedPG, A3C-style SGD): the event engine delivers gradients one
  at a time in arrival order, each rolled out at the point its worker was dispatched with
  (stale); the server applies an optax update per arrival. An algorithm is an
  :class:`AsyncSpec`: (optimizer,).

Everything here is a pure function of explicit state; the sweepable hyperparameters
(learning rate, η, γ) live in the state as arrays, so seeds and grids are a ``vmap`` away.
Gradients are ascent directions on J; the optimizers descend, so they receive ``−g``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxnigt import events, schedules
from jaxnigt.collect import gradient_from_schedule
from jaxnigt.estimator import policy_gradient
from jaxnigt.nigt import nigt, nigt_eval_params
from jaxnigt.rollout import rollout
from jaxnigt.timing import TimeModel

Hyper = dict[str, jax.Array]  # {"learning_rate", "eta", "gamma"} as float32 arrays
OptimizerFactory = Callable[[Hyper], optax.GradientTransformation]


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything static about one algorithm's run (hashable; closed over by the jitted step).

    Attributes:
      task: the ``TaskEnv``.
      policy: the ``GaussianPolicy``.
      tm: the cluster's ``TimeModel`` (arrays; closed over as constants).
      worker_types: ``[n]`` int32 environment type of each worker (numpy).
      M: gradients per round; M_init: gradients of round 0.
      per_worker_batch: synchronous per-worker batch b (None: max(1, ceil(M/n))).
      malenia_capacity: per-worker capacity of a Malenia round.
      inflight: ``cancel`` or ``discard``.
      allreduce: ``all`` or ``contributors``: who takes part in a round's AllReduce.
      link: ``shared`` or ``independent``: the asynchronous methods' server link.
      async_block: arrivals per logged step of the asynchronous methods.
      mesh: optional device mesh over which each round's trajectory slots are split
        (``jaxnigt.parallel``); None keeps everything on one device.
    """

    task: Any
    policy: Any
    tm: TimeModel
    worker_types: np.ndarray
    M: int
    M_init: int
    per_worker_batch: int | None
    malenia_capacity: int
    inflight: str
    async_block: int
    mesh: Any = None
    allreduce: str = "all"
    link: str = "shared"

    @property
    def n(self) -> int:
        return int(self.worker_types.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.task.horizon)

    def __hash__(self):
        return id(self)


# ------------------------------------------------------------------------- optimizers


def nigt_optimizer(hyper: Hyper) -> optax.GradientTransformation:
    """NIGT with traced learning rate and η (params held = the extrapolated point)."""
    return nigt(hyper["learning_rate"], hyper["eta"])


def sgd_optimizer(hyper: Hyper) -> optax.GradientTransformation:
    """Plain step θ ← θ + α g (descent on −g)."""
    return optax.sgd(hyper["learning_rate"])


def deploy_params(params: Any, opt_state: Any) -> Any:
    """Params to evaluate/deploy: NIGT's iterate x_t if the optimizer is NIGT, else params."""
    if isinstance(opt_state, optax.EmptyState) or opt_state == ():
        return params
    try:
        return nigt_eval_params(opt_state)
    except ValueError:
        return params


# ------------------------------------------------------------------------------ state


class Clock(NamedTuple):
    """Cumulative simulated-cluster counters (float32 scalars; per seed under vmap)."""

    time: jax.Array
    env_steps: jax.Array
    env_steps_wasted: jax.Array
    comms: jax.Array


class TrainState(NamedTuple):
    """State of one run (one seed, one hyperparameter point)."""

    params: Any  # the point where rollouts happen (NIGT: extrapolated y_t)
    opt_state: Any
    key: jax.Array
    round: jax.Array  # int32 rounds (round-based) or arrival blocks (async) done
    clock: Clock
    busy_until: jax.Array  # [n] worker clocks (discard mode)
    hyper: Hyper
    extra: Any  # engine-specific: async engine state and per-worker dispatch points


def _zero_clock() -> Clock:
    z = jnp.zeros([], jnp.float32)
    return Clock(z, z, z, z)


def _finite(tree: Any) -> jax.Array:
    leaves = jax.tree.leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _negate(tree: Any) -> Any:
    return jax.tree.map(jnp.negative, tree)


def _nan() -> jax.Array:
    return jnp.full([], jnp.nan, jnp.float32)


def _ratio(num: jax.Array, den: jax.Array) -> jax.Array:
    """``num / den``, NaN where ``den`` is not positive."""
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), jnp.nan)


# ----------------------------------------------------------------------- round engine

ScheduleFn = Callable[..., schedules.RoundSchedule]
WeightsFn = Callable[[schedules.RoundSchedule], jax.Array]


@dataclasses.dataclass(frozen=True)
class RoundSpec:
    """A round-based algorithm: which gradients count, how they are weighted, how to step.

    Attributes:
      schedule: ``(setup, M) -> fn(tm, key, t0, busy_until) -> RoundSchedule``.
      weights: aggregator weights of a schedule's slots.
      optimizer: factory of the optax update from the traced hyperparameters.
    """

    schedule: Callable[[Setup, int], ScheduleFn]
    weights: WeightsFn
    optimizer: OptimizerFactory


def _modes(setup: Setup) -> dict[str, str]:
    return {"inflight": setup.inflight, "allreduce": setup.allreduce}


def rennala_schedule(setup: Setup, M: int) -> ScheduleFn:
    return functools.partial(schedules.rennala, M=M, **_modes(setup))


def malenia_schedule(setup: Setup, M: int) -> ScheduleFn:
    return functools.partial(
        schedules.malenia, M=M, capacity=setup.malenia_capacity, **_modes(setup)
    )


def sync_schedule(setup: Setup, M: int) -> ScheduleFn:
    b = schedules.sync_batch(M, setup.n, setup.per_worker_batch)
    return functools.partial(schedules.sync, per_worker=b, **_modes(setup))


def _round(setup: Setup, spec: RoundSpec, M: int, state: TrainState):
    key, k_sched, k_roll = jax.random.split(state.key, 3)
    sched = spec.schedule(setup, M)(setup.tm, k_sched, state.clock.time, state.busy_until)
    weights = spec.weights(sched)
    capacity = sched.slot_worker.shape[0]
    grads, stats = gradient_from_schedule(
        setup.task,
        setup.policy,
        state.params,
        sched,
        weights,
        k_roll,
        setup.worker_types,
        state.hyper["gamma"],
        chunk=min(M, capacity),
        mesh=setup.mesh,
    )
    opt = spec.optimizer(state.hyper)
    updates, opt_state = opt.update(_negate(grads), state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    clock = Clock(
        time=sched.t_end,
        env_steps=state.clock.env_steps + stats["sum_length"],
        env_steps_wasted=state.clock.env_steps_wasted + sched.traj_wasted * setup.horizon,
        comms=state.clock.comms + sched.comms.astype(jnp.float32),
    )
    train_return = stats["sum_return"] / jnp.maximum(stats["count"], 1.0)
    metrics = round_metrics(
        sched,
        grads=stats["count"],
        train_return=train_return,
        finite=_finite(grads) & _finite(params),
    )
    new_state = state._replace(
        params=params,
        opt_state=opt_state,
        key=key,
        round=state.round + 1,
        clock=clock,
        busy_until=sched.busy_until,
    )
    return new_state, _with_clock(metrics, new_state)


def round_metrics(
    sched: schedules.RoundSchedule,
    *,
    grads: jax.Array,
    train_return: jax.Array,
    finite: jax.Array,
) -> dict[str, jax.Array]:
    """Per-round metrics of a schedule-based (AllReduce) round; no staleness (NaN)."""
    counts = sched.counts.astype(jnp.float32)
    return {
        "round_time": sched.t_end - sched.t_start,
        "grads": grads,
        "train_return": train_return,
        "counts_min": jnp.min(counts),
        "counts_mean": jnp.mean(counts),
        "counts_max": jnp.max(counts),
        "staleness_min": _nan(),
        "staleness_mean": _nan(),
        "staleness_max": _nan(),
        "link_util": _nan(),
        "overflow": sched.overflow,
        "nonfinite": ~(finite & jnp.isfinite(train_return)),
    }


def _with_clock(metrics: dict, state: TrainState) -> dict:
    return {
        "round": state.round,
        "sim_time": state.clock.time,
        "env_steps": state.clock.env_steps,
        "env_steps_wasted": state.clock.env_steps_wasted,
        "comms": state.clock.comms,
        **metrics,
    }


def initial_state(
    setup: Setup, params: Any, opt_state: Any, key: jax.Array, hyper: Hyper, extra: Any = ()
) -> TrainState:
    """A run's state at simulated time 0: round 0, zero clocks, idle workers."""
    return TrainState(
        params=params,
        opt_state=opt_state,
        key=key,
        round=jnp.int32(0),
        clock=_zero_clock(),
        busy_until=jnp.zeros((setup.n,), jnp.float32),
        hyper=hyper,
        extra=extra,
    )


def per_worker(tree: Any, n: int) -> Any:
    """``tree`` repeated along a new leading worker axis ``[n, ...]``."""
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (n, *p.shape)), tree)


def round_init(setup: Setup, spec: RoundSpec, key: jax.Array, hyper: Hyper) -> TrainState:
    """Initial state at x_0 (time 0, nothing collected yet)."""
    k_init, k_run = jax.random.split(key)
    params = setup.policy.init(k_init)
    return initial_state(setup, params, spec.optimizer(hyper).init(params), k_run, hyper)


def round_first_step(setup: Setup, spec: RoundSpec, state: TrainState):
    """Round 0: one aggregation of ``M_init`` gradients at x_0 (NIGT's d_0 = g_0)."""
    return _round(setup, spec, setup.M_init, state)


def round_step(setup: Setup, spec: RoundSpec, state: TrainState):
    """One round with M gradients: ``(state) -> (state, metrics)``."""
    return _round(setup, spec, setup.M, state)


# ----------------------------------------------------------------------- async engine


@dataclasses.dataclass(frozen=True)
class AsyncSpec:
    """An asynchronous per-arrival algorithm: the server's optax update on each arrival."""

    optimizer: OptimizerFactory


class AsyncExtra(NamedTuple):
    engine: events.AsyncState
    worker_params: Any  # [n, ...] the point each worker was dispatched with
    time_key: jax.Array
    roll_key: jax.Array


def async_init(setup: Setup, spec: AsyncSpec, key: jax.Array, hyper: Hyper) -> TrainState:
    """Every worker dispatched at x_0 (server version 0) at time 0."""
    k_init, k_time, k_roll, k_first = jax.random.split(key, 4)
    params = setup.policy.init(k_init)
    engine = events.async_init(setup.tm, k_first, 0.0)
    extra = AsyncExtra(engine, per_worker(params, setup.n), k_time, k_roll)
    return initial_state(setup, params, spec.optimizer(hyper).init(params), key, hyper, extra)


def async_step(setup: Setup, spec: AsyncSpec, state: TrainState):
    """``async_block`` arrivals, each one server update: ``(state) -> (state, metrics)``."""
    opt = spec.optimizer(state.hyper)
    types = jnp.asarray(setup.worker_types, jnp.int32)
    ex: AsyncExtra = state.extra

    def arrival(carry, _):
        engine, params, opt_state, worker_params = carry
        engine, arr = events.async_next(
            setup.tm, jax.random.fold_in(ex.time_key, engine.version), engine, link=setup.link
        )
        point = jax.tree.map(lambda w: w[arr.worker], worker_params)
        key = jax.random.fold_in(jax.random.fold_in(ex.roll_key, arr.worker), arr.grad_index)
        traj = rollout(setup.task, setup.policy, point, key[None], types[arr.worker][None])
        grads, stats = policy_gradient(
            setup.policy, point, traj, jnp.ones((1,), jnp.float32), state.hyper["gamma"]
        )
        updates, opt_state = opt.update(_negate(grads), opt_state, params)
        params = optax.apply_updates(params, updates)
        # The arriving worker is re-dispatched with the new server point.
        worker_params = jax.tree.map(lambda w, p: w.at[arr.worker].set(p), worker_params, params)
        out = {
            "ret": stats["sum_return"],
            "len": stats["sum_length"],
            "staleness": arr.staleness.astype(jnp.float32),
            "finite": _finite(grads),
        }
        return (engine, params, opt_state, worker_params), out

    carry = (ex.engine, state.params, state.opt_state, ex.worker_params)
    (engine, params, opt_state, worker_params), out = jax.lax.scan(
        arrival, carry, None, length=setup.async_block
    )
    block = float(setup.async_block)
    clock = Clock(
        time=engine.time,
        env_steps=state.clock.env_steps + jnp.sum(out["len"]),
        env_steps_wasted=state.clock.env_steps_wasted,
        comms=state.clock.comms + block,
    )
    train_return = jnp.mean(out["ret"])
    # Arrivals per worker in this block.
    per_worker = engine.dispatch_count.astype(jnp.float32) - ex.engine.dispatch_count
    metrics = {
        "round_time": engine.time - ex.engine.time,
        "grads": jnp.float32(block),
        "train_return": train_return,
        "counts_min": jnp.min(per_worker),
        "counts_mean": jnp.mean(per_worker),
        "counts_max": jnp.max(per_worker),
        "staleness_min": jnp.min(out["staleness"]),
        "staleness_mean": jnp.mean(out["staleness"]),
        "staleness_max": jnp.max(out["staleness"]),
        "link_util": _ratio(engine.link_busy - ex.engine.link_busy, engine.time - ex.engine.time),
        "overflow": jnp.bool_(False),
        "nonfinite": ~(jnp.all(out["finite"]) & _finite(params) & jnp.isfinite(train_return)),
    }
    new_state = state._replace(
        params=params,
        opt_state=opt_state,
        round=state.round + 1,
        clock=clock,
        extra=ex._replace(engine=engine, worker_params=worker_params),
    )
    return new_state, _with_clock(metrics, new_state)
