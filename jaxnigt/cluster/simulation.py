"""The simulated cluster's clock alone, no training: a round rule's rounds or the asynchronous
engine's arrivals, from time 0.

:func:`simulate_rule_rounds` runs ``rounds`` rounds of a collection rule of
:mod:`jaxnigt.cluster.schedules` (``rennala``, ``malenia``, ``sync``; ``lax.scan`` inside one
``jax.jit``, round ``r`` keyed ``fold_in(key, r)``) and returns per-round arrays.
:func:`simulate_async` runs the per-arrival engine of AFedPG / asynchronous SGD
(:mod:`jaxnigt.cluster.events`), :func:`simulate_ringmaster` its bounded-delay rule, and
:func:`simulate_seed` central inference's per-step clock (SEED RL,
:mod:`jaxnigt.cluster.step_clock`).  ``jaxnigt clock`` (:mod:`jaxnigt.cli.clock`) is the command
around these; :mod:`jaxnigt.cluster.theory` gives the closed-form values to compare them with.
Each takes the cluster model whole (:class:`~jaxnigt.cluster.model.ClusterModel`): its named
choices (in-flight work, the AllReduce, the server link) are static fields of it, so a program
is compiled once per choice.  A model whose computation power is drawn (``outages``) draws it
from the key each function is given (:func:`~jaxnigt.cluster.model.realize`).

(An algorithm's own clock, the trajectories and end time of each of its steps, is its
``simulate_clock`` (:mod:`jaxnigt.algorithms.core`); this module knows only the rules.)
"""

from __future__ import annotations

import functools

import jax

from jaxnigt.cluster import events, schedules, step_clock
from jaxnigt.cluster.model import ClusterModel, realize

ROUND_RULES = ("rennala", "malenia", "sync", "msync")


def _rule(rule: str, model: ClusterModel, M: int, capacity, per_worker):
    """The round function ``(model, key, t0, busy_until) -> RoundSchedule`` of ``rule``."""
    if rule == "rennala":
        return functools.partial(schedules.rennala, M=M)
    if rule == "malenia":
        cap = schedules.default_malenia_capacity(M, model.n) if capacity is None else capacity
        return functools.partial(schedules.malenia, M=M, capacity=cap)
    if rule == "sync":
        b = schedules.sync_batch(M, model.n, per_worker)
        return functools.partial(schedules.sync, per_worker=b)
    if rule == "msync":  # M is m: the workers a round waits for
        return functools.partial(schedules.msync, m=M)
    raise ValueError(f"unknown rule {rule!r}; allowed: {', '.join(ROUND_RULES)}")


@functools.partial(jax.jit, static_argnames=("rule", "M", "rounds", "capacity", "per_worker"))
def simulate_rule_rounds(
    model: ClusterModel,
    key: jax.Array,
    *,
    rule: str,
    M: int,
    rounds: int,
    capacity: int | None = None,
    per_worker: int | str = 1,
) -> dict[str, jax.Array]:
    """Runs ``rounds`` rounds of ``rule`` from time 0 with keys ``fold_in(key, r)``.

    Args:
      model: the cluster model (its ``inflight`` and ``allreduce`` end the rounds).
      key: PRNG key of the whole run.
      rule: one of :data:`ROUND_RULES`.
      M: the rule's batch size (``msync``: m, the workers a round waits for).
      rounds: number of rounds (static).
      capacity: Malenia's per-worker capacity (default
        :func:`~jaxnigt.cluster.schedules.default_malenia_capacity`).
      per_worker: the synchronous batch per worker, or ``match_M``
        (:func:`~jaxnigt.cluster.schedules.sync_batch`; default 1).

    Returns:
      dict of per-round arrays with leading axis ``[rounds]``: ``t_start``,
      ``t_collect_end``, ``t_end``, ``grads_used``, ``time_wasted``, ``traj_wasted``,
      ``time_used``, ``comms``, ``overflow``, ``counts`` ``[rounds, n]`` and ``busy_until``
      ``[rounds, n]`` (when each worker is free after the round).

    Raises:
      ValueError: ``rule`` is not a round rule.
    """
    fn = _rule(rule, model, M, capacity, per_worker)
    s = schedules.run_rounds(fn, model, key, rounds)
    return {
        "t_start": s.t_start,
        "t_collect_end": s.t_collect_end,
        "t_end": s.t_end,
        "grads_used": s.num_slots,
        "time_wasted": s.time_wasted,
        "traj_wasted": s.traj_wasted,
        "time_used": s.time_used,
        "comms": s.comms,
        "overflow": s.overflow,
        "counts": s.counts,
        "busy_until": s.busy_until,
    }


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
