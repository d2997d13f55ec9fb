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

(An algorithm's own clock, the trajectories and end time of each of its steps, is its
``simulate_clock`` (:mod:`jaxnigt.algorithms.core`); this module knows only the rules.)
"""

from __future__ import annotations

import functools

import jax

from jaxnigt.cluster import events, schedules, step_clock
from jaxnigt.cluster.timing import TimeModel

ROUND_RULES = ("rennala", "malenia", "sync", "msync")


def _rule(rule: str, tm: TimeModel, M: int, capacity, per_worker, modes: dict):
    """The round function ``(tm, key, t0, busy_until) -> RoundSchedule`` of ``rule``."""
    if rule == "rennala":
        return functools.partial(schedules.rennala, M=M, **modes)
    if rule == "malenia":
        cap = schedules.default_malenia_capacity(M, tm.n) if capacity is None else capacity
        return functools.partial(schedules.malenia, M=M, capacity=cap, **modes)
    if rule == "sync":
        b = schedules.sync_batch(M, tm.n, per_worker)
        return functools.partial(schedules.sync, per_worker=b, **modes)
    if rule == "msync":  # M is m: the workers a round waits for
        return functools.partial(schedules.msync, m=M, **modes)
    raise ValueError(f"unknown rule {rule!r}; allowed: {', '.join(ROUND_RULES)}")


@functools.partial(
    jax.jit,
    static_argnames=("rule", "M", "rounds", "inflight", "capacity", "per_worker", "allreduce"),
)
def simulate_rule_rounds(
    tm: TimeModel,
    key: jax.Array,
    *,
    rule: str,
    M: int,
    rounds: int,
    inflight: str = "cancel",
    capacity: int | None = None,
    per_worker: int | str = 1,
    allreduce: str = "all",
) -> dict[str, jax.Array]:
    """Runs ``rounds`` rounds of ``rule`` from time 0 with keys ``fold_in(key, r)``.

    Args:
      tm: the cluster's time model.
      key: PRNG key of the whole run.
      rule: one of :data:`ROUND_RULES`.
      M: the rule's batch size (``msync``: m, the workers a round waits for).
      rounds: number of rounds (static).
      inflight, allreduce: the round modes (:data:`jaxnigt.cluster.schedules.INFLIGHT`,
        :data:`jaxnigt.cluster.schedules.ALLREDUCE`).
      capacity: Malenia's per-worker capacity (default
        :func:`~jaxnigt.cluster.schedules.default_malenia_capacity`).
      per_worker: the synchronous batch per worker, or ``match_M``
        (:func:`~jaxnigt.cluster.schedules.sync_batch`; default 1).

    Returns:
      dict of per-round arrays with leading axis ``[rounds]``: ``t_start``,
      ``t_collect_end``, ``t_end``, ``grads_used``, ``time_wasted``, ``traj_wasted``,
      ``time_used``, ``comms``, ``overflow``, ``counts`` ``[rounds, n]`` and ``busy_until``
      ``[rounds, n]`` (when each worker is free after the round).
    """
    modes = {"inflight": inflight, "allreduce": allreduce}
    fn = _rule(rule, tm, M, capacity, per_worker, modes)
    s = schedules.run_rounds(fn, tm, key, rounds)
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


@functools.partial(jax.jit, static_argnames=("arrivals", "link"))
def simulate_async(
    tm: TimeModel, key: jax.Array, *, arrivals: int, link: str = "shared"
) -> tuple[events.AsyncState, events.Arrival]:
    """``arrivals`` arrivals of the per-arrival engine from time 0.

    Every worker's first compute time comes from ``fold_in(key, 0)`` and arrival ``j``'s
    redispatch from ``fold_in(fold_in(key, 1), j)``.  Returns the final engine state and the
    stacked :class:`~jaxnigt.cluster.events.Arrival` records.
    """
    state = events.async_init(tm, jax.random.fold_in(key, 0), 0.0)
    return events.async_arrivals(tm, jax.random.fold_in(key, 1), state, arrivals, link=link)


@functools.partial(jax.jit, static_argnames=("arrivals", "link", "stops"))
def simulate_ringmaster(
    tm: TimeModel,
    key: jax.Array,
    *,
    arrivals: int,
    R: jax.typing.ArrayLike,
    link: str = "shared",
    stops: bool = False,
) -> tuple[events.BoundedState, events.Event]:
    """``arrivals`` exchanges of Ringmaster's bounded-delay rule from time 0
    (:func:`jaxnigt.cluster.events.bounded_next`), keyed as :func:`simulate_async` (the first
    compute times from ``fold_in(key, 0)``, exchange ``e``'s redispatch from
    ``fold_in(fold_in(key, 1), e)``): with ``R`` above every delay, the same arrivals."""
    state = events.bounded_init(events.async_init(tm, jax.random.fold_in(key, 0), 0.0), R)
    run_key = jax.random.fold_in(key, 1)
    return events.bounded_events(tm, run_key, state, arrivals, link=link, stops=stops)


@functools.partial(jax.jit, static_argnames=("horizon", "batch", "updates", "link"))
def simulate_seed(
    tm: TimeModel,
    key: jax.Array,
    message: jax.Array,
    *,
    horizon: int,
    batch: int,
    updates: int,
    inference: jax.typing.ArrayLike = 0.0,
    learner_time: jax.typing.ArrayLike = 0.0,
    link: str = "shared",
):
    """``updates`` learner batches of central inference's per-step clock from time 0
    (:func:`jaxnigt.cluster.step_clock.simulate`, compute times from ``key``; ``message``
    ``[n]`` the step exchange times).  Returns the final clock, the batches stacked
    ``[updates, ...]`` (their steps' versions exact: every update's done time is kept) and
    each update's completion ``[updates]``."""
    return step_clock.simulate(
        tm, message, inference, key, horizon=horizon, batch=batch, updates=updates,
        learner_time=learner_time, history=updates, link=link,
    )  # fmt: skip
