"""The simulated cluster's clock alone, no training: a round rule's rounds or the asynchronous
engine's arrivals, from time 0.

:func:`simulate_rule_rounds` runs ``rounds`` rounds of a registered round rule
(:mod:`jaxnigt.cluster.rules`: ``rennala``, ``malenia``, ``sync``, ``msync`` or one of a
user's; ``lax.scan`` inside one ``jax.jit``, round ``r`` keyed ``fold_in(key, r)``) and
returns per-round arrays. :func:`simulate_async` runs the per-arrival engine of AFedPG /
asynchronous SGD (:mod:`jaxnigt.cluster.events`), :func:`simulate_ringmaster` its
bounded-delay rule, and :func:`simulate_seed` central inference's per-step clock (SEED RL,
:mod:`jaxnigt.cluster.step_clock`). ``jaxnigt clock`` (:mod:`jaxnigt.cli.clock`) is the
command around these; :mod:`jaxnigt.cluster.theory` gives the closed-form values to compare
them with. Each takes the cluster model whole
(:class:`~jaxnigt.cluster.model.ClusterModel`): its named choices (in-flight work, the
AllReduce, the server link) are static fields of it, so a program is compiled once per
choice. A model whose computation power is drawn (``outages``) draws it from the key each
function is given (:func:`~jaxnigt.cluster.model.realize`).

(An algorithm's own clock, the trajectories and end time of each of its steps, is its
``simulate_clock`` (:mod:`jaxnigt.algorithms.core`); this module knows only the rules.)
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxnigt.cluster import events, rules, schedules, step_clock
from jaxnigt.cluster.model import ClusterModel, realize, sample_compute_times
from jaxnigt.cluster.rounds import (
    allreduce_times,
    ends,
    rounds_record,
    sequential_cumsum,
    start_offsets,
)


def round_rules() -> tuple[str, ...]:
    """Every registered round rule (:func:`jaxnigt.cluster.rules.rule_names`)."""
    return rules.rule_names()


#: The library's own round rules (:func:`round_rules` lists every registered one).
ROUND_RULES = ("rennala", "malenia", "sync", "msync")


def _size(model: ClusterModel, M: int, capacity, per_worker) -> rules.RoundSize:
    """The rules' sizes of the clock's arguments."""
    cap = schedules.default_malenia_capacity(M, model.n) if capacity is None else capacity
    b = schedules.sync_batch(M, model.n, per_worker)
    return rules.RoundSize(M=M, capacity=cap, per_worker=b, m=M)  # msync: M is m


def _rule(rule: str, model: ClusterModel, M: int, capacity, per_worker):
    """The round function ``(model, key, t0, busy_until) -> RoundSchedule`` of ``rule``."""
    spec = rules.get_rule(rule)
    size = _size(model, M, capacity, per_worker)
    return lambda m, k, t0, busy: spec.round(m, k, t0, busy, size)


@functools.partial(
    jax.jit, static_argnames=("rule", "M", "rounds", "capacity", "per_worker", "gradients")
)
def simulate_rule_rounds(
    model: ClusterModel,
    key: jax.Array,
    *,
    rule: str,
    M: int,
    rounds: int,
    capacity: int | None = None,
    per_worker: int | str = 1,
    gradients: bool = False,
) -> dict[str, jax.Array]:
    """Runs ``rounds`` rounds of ``rule`` from time 0 with keys ``fold_in(key, r)``.

    Args:
      model: the cluster model (its ``inflight`` and ``allreduce`` end the rounds).
      key: PRNG key of the whole run.
      rule: a registered round rule (:func:`round_rules`; the library's own:
        :data:`ROUND_RULES`).
      M: the rule's batch size (``msync``: m, the workers a round waits for).
      rounds: number of rounds (static).
      capacity: Malenia's per-worker capacity (default
        :func:`~jaxnigt.cluster.schedules.default_malenia_capacity`).
      per_worker: the synchronous batch per worker, or ``match_M``
        (:func:`~jaxnigt.cluster.schedules.sync_batch`; default 1).
      gradients: also return every worker's gradients of each round (static;
        :func:`round_gradients`, which adds its keys; the others are the same either way).

    Returns:
      dict of per-round arrays with leading axis ``[rounds]``: ``t_start``,
      ``t_collect_end``, ``t_end``, ``grads_used``, ``time_wasted``, ``traj_wasted``,
      ``time_used``, ``comms``, ``overflow``, ``counts`` ``[rounds, n]`` and ``busy_until``
      ``[rounds, n]`` (when each worker is free after the round); with ``gradients``, those
      of :func:`round_gradients` too.

    Raises:
      ValueError: ``rule`` is not a registered round rule.
    """
    fn = _rule(rule, model, M, capacity, per_worker)
    out = rounds_record(schedules.run_rounds(fn, model, key, rounds))
    if gradients:
        size = _size(model, M, capacity, per_worker)
        out |= round_gradients(model, key, out, rule=rule, size=size)
    return out


def _redraw(rule: str, model: ClusterModel, key, t0, off, size: rules.RoundSize) -> jax.Array:
    """``[n, K]`` the compute times round ``key`` of ``rule`` drew, column k a worker's (k+1)-th
    gradient of the round (``inf``: never drawn): the library's rules' own draws, and for a
    rule of one's own :func:`~jaxnigt.cluster.rules.draw_times` (its documented draw)."""
    if not rules.builtin(rule):
        return rules.draw_times(model, key, size)
    if rule == "rennala":
        first, rows, tau_rows = schedules.sample_rennala_times(model, key, off, M=size.M, t0=t0)
        tau = jnp.full((model.n, size.M + 1), jnp.inf, jnp.float32).at[:, 0].set(first)
        return tau.at[rows].set(tau_rows)
    num = {"malenia": size.capacity + 1, "sync": size.per_worker, "msync": 1}[rule]
    return sample_compute_times(model, key, num)


def round_gradients(
    model: ClusterModel,
    key: jax.Array,
    res: dict[str, jax.Array],
    *,
    rule: str,
    size: rules.RoundSize,
    round_keys: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """Every worker's gradients in each round of :func:`simulate_rule_rounds`, from the same
    draws: round ``r``'s compute times are drawn again from ``fold_in(key, r)`` as its rule
    drew them, and turned into completions from the round's start and each worker's
    ``busy_until`` as the rule did (:func:`~jaxnigt.cluster.rounds.ends`).

    Args:
      model: the cluster model (outages drawn from ``key``, as the rounds drew them).
      key: the key of the rounds.
      res: the rounds' ``t_start``, ``t_collect_end``, ``counts`` and ``busy_until``.
      rule: the registered round rule.
      size: its sizes.
      round_keys: ``[rounds]`` each round's own key (a training run's rounds, drawn from its
        state's key; default ``fold_in(key, r)``, the clock's).

    Returns:
      ``grad_start`` ``[rounds, n]`` when each worker begins the round's work,
      ``grad_end`` ``[rounds, n, K]`` its k-th completion of the round if it went on computing
      (its first ``counts`` count), ``grad_work`` ``[rounds, n, K]`` their compute times and
      ``ready`` ``[rounds, n]`` when each worker has the next point (the AllReduce's end).
    """
    model = realize(model, key)[0]
    busy = jnp.concatenate([jnp.zeros_like(res["busy_until"][:1]), res["busy_until"][:-1]])

    def one(k, t0, busy_r, counts, t_collect_end):
        off = start_offsets(t0, busy_r)
        tau = _redraw(rule, model, k, t0, off, size)
        cum = sequential_cumsum(tau)
        done = jnp.where(jnp.isfinite(cum), t0 + ends(model, t0, off, cum), jnp.inf)
        ready = allreduce_times(model, counts, t_collect_end)[1]
        return t0 + off, done, tau, ready

    rounds = jnp.arange(res["t_start"].shape[0])
    if round_keys is None:
        round_keys = jax.vmap(lambda r: jax.random.fold_in(key, r))(rounds)
    args = (round_keys, res["t_start"], busy, res["counts"], res["t_collect_end"])
    start, done, tau, ready = jax.vmap(one)(*args)
    return {"grad_start": start, "grad_end": done, "grad_work": tau, "ready": ready}


@functools.partial(jax.jit, static_argnames=("arrivals",))
def simulate_async(
    model: ClusterModel, key: jax.Array, *, arrivals: int
) -> tuple[events.AsyncState, events.Arrival]:
    """Arrivals of the per-arrival engine from time 0 on the model's server link.

    Args:
      model: the cluster model.
      key: every worker's first compute time comes from ``fold_in(key, 0)`` and arrival
        ``j``'s redispatch from ``fold_in(fold_in(key, 1), j)``.
      arrivals: number of arrivals (static).

    Returns:
      The final engine state and the stacked :class:`~jaxnigt.cluster.events.Arrival`
      records.
    """
    model = realize(model, key)[0]
    state = events.async_init(model, jax.random.fold_in(key, 0), 0.0)
    return events.async_arrivals(model, jax.random.fold_in(key, 1), state, arrivals)


@functools.partial(jax.jit, static_argnames=("arrivals", "stops"))
def simulate_ringmaster(
    model: ClusterModel,
    key: jax.Array,
    *,
    arrivals: int,
    R: jax.typing.ArrayLike,
    stops: bool = False,
) -> tuple[events.BoundedState, events.Event]:
    """Exchanges of Ringmaster's bounded-delay rule from time 0
    (:func:`jaxnigt.cluster.events.bounded_next`): with ``R`` above every delay, the arrivals
    of :func:`simulate_async`.

    Args:
      model: the cluster model.
      key: keyed as :func:`simulate_async` (the first compute times from ``fold_in(key, 0)``,
        exchange ``e``'s redispatch from ``fold_in(fold_in(key, 1), e)``).
      arrivals: number of exchanges (static).
      R: the delay threshold.
      stops: the variant with calculation stops (static).

    Returns:
      The final rule state and the stacked :class:`~jaxnigt.cluster.events.Event` records.
    """
    model = realize(model, key)[0]
    state = events.bounded_init(events.async_init(model, jax.random.fold_in(key, 0), 0.0), R)
    run_key = jax.random.fold_in(key, 1)
    return events.bounded_events(model, run_key, state, arrivals, stops=stops)


def simulate_ringleader(
    model: ClusterModel, key: jax.Array, *, arrivals: int, point: str = "held"
) -> tuple[Any, events.Event]:
    """Exchanges of Ringleader ASGD's cycles from time 0
    (:func:`jaxnigt.cluster.rules.ringleader.cycle_next`): the arrivals of
    :func:`simulate_async`, key for key, with which of them are updates.

    Args:
      model: the cluster model.
      key: keyed as :func:`simulate_async`.
      arrivals: number of exchanges (static).
      point: one of :data:`~jaxnigt.cluster.rules.ringleader.POINTS` (static).

    Returns:
      The final :class:`~jaxnigt.cluster.rules.ringleader.CycleState` and the stacked
      :class:`~jaxnigt.cluster.events.Event` records (``extra``: their
      :class:`~jaxnigt.cluster.rules.ringleader.CycleEvent`).
    """
    from jaxnigt.cluster.rules import ringleader

    model = realize(model, key)[0]
    state = ringleader.cycle_init(events.async_init(model, jax.random.fold_in(key, 0), 0.0))
    run_key = jax.random.fold_in(key, 1)

    def step(s, _):
        return ringleader.cycle_next(model, jax.random.fold_in(run_key, s.events), s, point=point)

    return jax.lax.scan(step, state, None, length=int(arrivals))


@functools.partial(jax.jit, static_argnames=("horizon", "batch", "updates"))
def simulate_seed(
    model: ClusterModel,
    key: jax.Array,
    *,
    horizon: int,
    batch: int,
    updates: int,
    inference: jax.typing.ArrayLike = 0.0,
    learner_time: jax.typing.ArrayLike = 0.0,
):
    """Learner batches of central inference's per-step clock from time 0
    (:func:`jaxnigt.cluster.step_clock.simulate`), every step's exchange taking the model's
    ``message`` time.

    Args:
      model: the cluster model.
      key: the key of the compute times.
      horizon: steps per trajectory (static).
      batch: trajectories per learner update (static).
      updates: learner updates (static).
      inference: the learner's inference time per step.
      learner_time: the time of one learner update.

    Returns:
      The final clock, the batches stacked ``[updates, ...]`` (their steps' versions exact:
      every update's done time is kept) and each update's completion ``[updates]``.
    """
    return step_clock.simulate(
        model,
        model.message,
        inference,
        key,
        horizon=horizon,
        batch=batch,
        updates=updates,
        learner_time=learner_time,
        history=updates,
    )
