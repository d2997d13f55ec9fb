"""The asynchronous event engine (AFedPG, A3C-style SGD, A3C, IMPALA's actors).

The model it simulates is docs/cluster_model.md's; the methods, docs/algorithms.md's.

Each worker loops: it holds the server point it was dispatched with, computes one gradient
(``tau = h_i * xi``), then exchanges it with the server (``kappa_i``: gradient up, new point
down).  The server updates on every arrival, in arrival order, and the worker starts its next
gradient at once with the new point.  The time of an arrival depends on the server link
(the cluster model's ``link`` choice, :class:`~jaxnigt.cluster.model.ClusterModel`):

* ``shared`` (default) -- the server has one link, so exchanges are served one at a time,
  first come first served in the order of compute completion (ties: lower worker id); an
  exchange of worker ``i`` occupies the link for ``kappa_i``::

      start = max(link_free, compute_end_i);  arrival = start + kappa_i;  link_free = arrival

  This is the accounting behind the paper's bound for AFedPG: its communication time is at
  least ``kappa`` times the number of gradients.  ``link_wait = start - compute_end_i``.
* ``independent`` -- every worker has its own link and exchanges overlap:
  ``arrival = compute_end_i + kappa_i`` (ties: lower worker id).  A sensitivity case.

A bounded-delay rule (Ringmaster ASGD, :func:`bounded_next`) runs on the same state: a
gradient whose delay reaches ``R`` is not applied, and with stops its computation is cancelled
as soon as it does.

Every worker is dispatched with the initial point at ``t0`` for free (all workers build
``x_0`` from the same seed, as in the round methods).  Compute times depend only on keys,
never on trajectories, so a whole block of arrivals can be computed before any rollout.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxnigt.cluster import power
from jaxnigt.cluster.model import (
    ClusterModel,
    realize,
    sample_compute_times,
    sample_worker_compute_time,
)


def compute_end(model: ClusterModel, s: jax.Array, tau: jax.Array, worker=None) -> jax.Array:
    """When work ``tau`` begun at ``s`` is done: ``s + tau``, or through the workers' power
    trace (:func:`jaxnigt.cluster.power.finish`).

    Args:
      model: the cluster model.
      s: start times, ``[n]`` (``worker`` None) or ``[]``.
      tau: the work, as ``s``.
      worker: ``[]`` the one worker of scalar ``s`` (None: every worker).

    Returns:
      The end times.
    """
    trace = model.trace
    if trace is None:
        return s + tau
    return power.finish(trace if worker is None else trace.take(worker), s, tau)


def exchange_end(model: ClusterModel, s: jax.Array, length: jax.Array, worker=None) -> jax.Array:
    """When an exchange of ``length`` begun at ``s`` ends: ``s + length``, or with exchanges
    that wait for a down worker (``ClusterModel.exchanges_wait``) ``length`` of its up time
    later (:func:`jaxnigt.cluster.power.exchange_end`).  Arguments as :func:`compute_end`."""
    if not model.exchanges_wait:
        return s + length
    trace = model.trace
    return power.exchange_end(trace if worker is None else trace.take(worker), s, length)


class AsyncState(NamedTuple):
    """State of the asynchronous event engine (arrays only).

    Attributes:
      compute_end: ``[n]`` float32 when each worker's in-flight gradient finishes computing.
      dispatch_version: ``[n]`` int32 server version each worker was dispatched with.
      dispatch_count: ``[n]`` int32 gradients dispatched to each worker so far.
      version: ``[]`` int32 server version (= arrivals processed).
      time: ``[]`` float32 time of the last arrival (``t0`` initially).
      compute_time: ``[n]`` float32 ``tau`` of each worker's in-flight gradient.
      dispatch_time: ``[n]`` float32 when each in-flight gradient was dispatched.
      link_free: ``[]`` float32 when the server link is next free (``shared`` link).
      link_busy: ``[]`` float32 total exchange time served so far (sum of ``kappa``).
    """

    compute_end: jax.Array
    dispatch_version: jax.Array
    dispatch_count: jax.Array
    version: jax.Array
    time: jax.Array
    compute_time: jax.Array
    dispatch_time: jax.Array
    link_free: jax.Array
    link_busy: jax.Array


class Arrival(NamedTuple):
    """One gradient arriving at the server (all ``[]``).

    Attributes:
      worker: int32.
      time: float32 arrival time (the end of its exchange).
      dispatch_version: int32 server version the gradient was computed from.
      staleness: int32 version before this arrival minus ``dispatch_version``.
      compute_time: float32 ``tau`` of this gradient.
      grad_index: int32 this worker's 0-based gradient counter (for keys).
      dispatch_time: float32 when the worker received its point and began computing.
      compute_end: float32 when its computation finished.
      link_wait: float32 time it queued for the server link (0 with ``independent``).
    """

    worker: jax.Array
    time: jax.Array
    dispatch_version: jax.Array
    staleness: jax.Array
    compute_time: jax.Array
    grad_index: jax.Array
    dispatch_time: jax.Array
    compute_end: jax.Array
    link_wait: jax.Array


def computing_time(model: ClusterModel, start: jax.Array, end: jax.Array, worker=None) -> jax.Array:
    """The time a worker that computes from ``start`` to ``end`` spends computing (its share
    of the *worker time*, docs/howto/metrics.md): ``end - start``, or with a power trace the
    time it is up (speed > 0) in between (:func:`jaxnigt.cluster.power.up_at`): a worker that
    is down while it holds unfinished work is not computing, one at a reduced speed is.

    Args:
      model: the cluster model.
      start: when the computing begins, ``[n]`` (``worker`` None) or ``worker``'s shape.
      end: when it ends (``>= start``), as ``start``.
      worker: the workers of ``start``, ``[]`` or ``[m]`` (None: every worker).

    Returns:
      ``start``'s shape.
    """
    trace = model.trace
    if trace is None:
        return end - start
    trace = trace if worker is None else trace.take(worker)
    return power.up_at(trace, end) - power.up_at(trace, start)


def computing_by(model: ClusterModel, state: AsyncState, t: jax.Array) -> jax.Array:
    """``[]`` the time the workers have spent by ``t`` computing the gradients they hold:
    each from its dispatch to ``t`` or its compute end if earlier (a cancelled gradient's
    end is its cancel); ``t`` is at or after every dispatch (the clock's time or later).  A
    padded record's other rows (:mod:`jaxnigt.cluster.padding`) hold nothing.

    Args:
      model: the cluster model.
      state: the engine's state.
      t: ``[]`` the time.

    Returns:
      ``[]`` float32.
    """
    end = jnp.minimum(jnp.asarray(t, jnp.float32), state.compute_end)
    spent = computing_time(model, state.dispatch_time, end)
    if model.active is not None:
        spent = jnp.where(model.active, spent, 0.0)
    return jnp.sum(spent)


def computing_ahead(model: ClusterModel, compute_end: jax.Array, t: jax.Array) -> jax.Array:
    """``[]`` the computing time the workers have ahead of ``t`` on work begun by then, each
    computing until ``compute_end`` (a round's discarded gradient that runs past its end:
    :attr:`~jaxnigt.cluster.rounds.RoundSchedule.compute_end`; an actor's step share,
    :mod:`jaxnigt.cluster.step_clock`); 0 for a worker whose computing ends by ``t``.

    Args:
      model: the cluster model.
      compute_end: ``[n]`` when each worker's computing ends.
      t: ``[]`` the time.

    Returns:
      ``[]`` float32.
    """
    t = jnp.full(compute_end.shape, t, jnp.float32)
    ahead = computing_time(model, t, jnp.maximum(compute_end, t))
    if model.workers is not None:
        ahead = jnp.where(model.active, ahead, 0.0)
    return jnp.sum(ahead)


def arrivals_computing(model: ClusterModel, arrivals: Arrival) -> jax.Array:
    """The computing time of each arrival's gradient: from its dispatch to its compute end
    (a cancelled one's: its cancel).

    Args:
      model: the cluster model.
      arrivals: one :class:`Arrival` or several stacked.

    Returns:
      ``arrivals.worker``'s shape.
    """
    return computing_time(model, arrivals.dispatch_time, arrivals.compute_end, arrivals.worker)


def async_init(model: ClusterModel, key: jax.Array, t0: jax.typing.ArrayLike) -> AsyncState:
    """Dispatches every worker at ``t0`` with version 0 (for free).

    Args:
      model: the cluster model.
      key: draws the first compute time of each worker (``sample_compute_times(model, key,
        1)``).
      t0: ``[]`` the start.

    Returns:
      The engine's state.
    """
    t0 = jnp.asarray(t0, jnp.float32)
    tau = sample_compute_times(model, key, 1)[:, 0]
    n = model.n
    return AsyncState(
        compute_end=compute_end(model, jnp.full((n,), t0), tau),
        dispatch_version=jnp.zeros((n,), jnp.int32),
        dispatch_count=jnp.ones((n,), jnp.int32),
        version=jnp.int32(0),
        time=t0,
        compute_time=tau,
        dispatch_time=jnp.full((n,), t0),
        link_free=t0,
        link_busy=jnp.float32(0.0),
    )


def next_exchange(model: ClusterModel, state: AsyncState) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The next exchange to finish on the model's server link.

    Args:
      model: the cluster model (``kappa`` and ``link``).
      state: the engine's state.

    Returns:
      ``(worker, start, arrival)`` of that exchange.
    """
    if model.link == "shared":
        w = jnp.argmin(state.compute_end).astype(jnp.int32)
        start = jnp.maximum(state.link_free, state.compute_end[w])
        return w, start, exchange_end(model, start, model.kappa[w], w)
    w = jnp.argmin(exchange_end(model, state.compute_end, model.kappa)).astype(jnp.int32)
    start = state.compute_end[w]
    return w, start, exchange_end(model, start, model.kappa[w], w)


def async_next(
    model: ClusterModel, key: jax.Array, state: AsyncState
) -> tuple[AsyncState, Arrival]:
    """Processes the next arrival and re-dispatches that worker.

    The server version increments; the worker is re-dispatched at the arrival time ``t``
    with the new version and finishes computing at ``t + tau`` where ``tau = h_i * xi``.
    Each arrival is one vector exchange (one communication; no AllReduce).

    Args:
      model: the cluster model.
      key: draws the re-dispatched worker's ``xi`` (callers pass ``fold_in(run_key,
        state.version)``).
      state: the engine's state.

    Returns:
      ``(state, arrival)``: the state after the arrival and its :class:`Arrival`.
    """
    return exchange(model, key, state, 1)


def exchange(model: ClusterModel, key: jax.Array, state: AsyncState, updates):
    """The next exchange on the link, its worker re-dispatched at its end.

    Args:
      model: the cluster model.
      key: draws the worker's next compute time.
      state: the engine's state.
      updates: ``[]`` int32 server updates the exchange makes (1, or 0 for one that is not).

    Returns:
      ``(state, arrival)``: the state with the version advanced by ``updates`` and the
      worker dispatched with the version after it, and the exchange's :class:`Arrival`.
    """
    w, start, t = next_exchange(model, state)
    arrival = Arrival(
        worker=w,
        time=t,
        dispatch_version=state.dispatch_version[w],
        staleness=state.version - state.dispatch_version[w],
        compute_time=state.compute_time[w],
        grad_index=state.dispatch_count[w] - 1,
        dispatch_time=state.dispatch_time[w],
        compute_end=state.compute_end[w],
        link_wait=start - state.compute_end[w],
    )
    version = state.version + updates
    tau = sample_worker_compute_time(model, key, w)
    new_state = AsyncState(
        compute_end=state.compute_end.at[w].set(compute_end(model, t, tau, w)),
        dispatch_version=state.dispatch_version.at[w].set(version),
        dispatch_count=state.dispatch_count.at[w].add(1),
        version=version,
        time=t,
        compute_time=state.compute_time.at[w].set(tau),
        dispatch_time=state.dispatch_time.at[w].set(t),
        link_free=t if model.link == "shared" else state.link_free,
        link_busy=state.link_busy + model.kappa[w],
    )
    return new_state, arrival


def async_arrivals(
    model: ClusterModel, run_key: jax.Array, state: AsyncState, num: int
) -> tuple[AsyncState, Arrival]:
    """Runs ``num`` arrivals with keys ``fold_in(run_key, version)``.

    Args:
      model: the cluster model.
      run_key: the key the arrivals' draws are folded from.
      state: the engine's state.
      num: static number of arrivals.

    Returns:
      The final state and the stacked :class:`Arrival` records (leading axis ``num``).
    """

    def step(s, _):
        return async_next(model, jax.random.fold_in(run_key, s.version), s)

    return lax.scan(step, state, None, length=int(num))


def arrival_blocks(model: ClusterModel, key: jax.Array, blocks: int, size: int) -> Arrival:
    """The arrivals of consecutive blocks from time 0: the asynchronous engines' clocks alone
    (``Algorithm.simulate_clock``), without rollouts.

    Args:
      model: the cluster model (outages drawn from ``key``: :func:`~jaxnigt.cluster.model.
        realize`).
      key: every worker starts at time 0 with key ``fold_in(key, 0)``, block b draws with
        ``fold_in(key, 1 + b)``.
      blocks: static number of blocks.
      size: static arrivals per block.

    Returns:
      The arrivals stacked ``[blocks, size]``.
    """
    model = realize(model, key)[0]
    state = async_init(model, jax.random.fold_in(key, 0), 0.0)

    def block(s, b):
        return async_arrivals(model, jax.random.fold_in(key, 1 + b), s, size)

    return lax.scan(block, state, jnp.arange(blocks))[1]


# ------------------------------------------------------------------ bounded delay (Ringmaster)


class Event(NamedTuple):
    """One exchange of a per-arrival rule that may refuse gradients (all ``[]``).

    Attributes:
      arrival: the exchange's :class:`Arrival` (``staleness``: the gradient's delay).
      accepted: bool: the gradient is applied (one server update).
      wasted: float32 trajectories' worth of computed work thrown away: 1 for a discarded
        gradient, the computed fraction for a cancelled one, 0 for an accepted one.
      dispatch_event: int32 exchanges processed when the worker was dispatched (the
        exchange that gave it its point is ``dispatch_event - 1``; 0: the initial point).
      extra: what the rule's server table reads of the exchange (None: the rule has none;
        :class:`jaxnigt.algorithms.engines.async_engine.ServerTable`).
    """

    arrival: Arrival
    accepted: jax.Array
    wasted: jax.Array
    dispatch_event: jax.Array
    extra: Any = None


class BoundedState(NamedTuple):
    """State of the bounded-delay rule (Ringmaster ASGD) over the event engine's state.

    Attributes:
      clock: the :class:`AsyncState`; its ``version`` counts server *updates* (accepted
        gradients), so a delay is ``version - dispatch_version``.
      events: ``[]`` int32 exchanges processed (the key counter: ``fold_in(key, events)``).
      dispatch_event: ``[n]`` int32 ``events`` when each worker was dispatched.
      cancelled: ``[n]`` bool the worker's in-flight gradient was cancelled (with stops):
        its next exchange only fetches the current point.
      done: ``[n]`` float32 the fraction of a cancelled gradient computed when it was.
      R: ``[]`` int32 the delay threshold: data, not a constant of the compiled program, so
        runs with different R share one program.
    """

    clock: AsyncState
    events: jax.Array
    dispatch_event: jax.Array
    cancelled: jax.Array
    done: jax.Array
    R: jax.Array


def bounded_init(clock: AsyncState, R: jax.typing.ArrayLike) -> BoundedState:
    """The bounded-delay rule's state from the engine's initial one (nothing cancelled).

    Args:
      clock: the engine's initial state.
      R: the delay threshold (>= 1).

    Returns:
      The rule's state.
    """
    n = clock.compute_end.shape[0]
    return BoundedState(
        clock=clock,
        events=jnp.int32(0),
        dispatch_event=jnp.zeros((n,), jnp.int32),
        cancelled=jnp.zeros((n,), bool),
        done=jnp.zeros((n,), jnp.float32),
        R=jnp.asarray(R, jnp.int32),
    )


def bounded_next(
    model: ClusterModel, key: jax.Array, state: BoundedState, *, stops: bool = False
) -> tuple[BoundedState, Event]:
    """The next exchange of Ringmaster ASGD (Maranjyan, Tyurin & Richtárik, 2025).

    The gradient of the exchange's worker has delay ``delta = version - dispatch_version``
    (server updates since its point).  With ``delta < R`` (``state.R``) it is accepted: one
    server update, as :func:`async_next`.  Otherwise it is discarded: no update, and the
    worker restarts from the current point, which its exchange brought down (1 trajectory
    wasted).

    With ``stops`` (the variant with calculation stops), no gradient reaches the server with
    ``delta >= R``: after every update, each worker whose in-flight gradient's delay has
    reached ``R`` is cancelled at once.  Its computation ends there (the computed fraction is
    wasted) and it fetches the current point with one exchange on its link, queued as any
    other on a shared link; it starts computing when that exchange ends.  A worker already
    waiting for the link, or in its exchange, keeps its place and only fetches the point.

    Args:
      model: the cluster model.
      key: draws the restarted worker's compute time (callers pass ``fold_in(run_key,
        state.events)``: with ``R`` above every delay this is :func:`async_next` exactly, key
        for key).
      state: the rule's state.
      stops: the variant with calculation stops (static).

    Returns:
      ``(state, event)``: the state after the exchange and its :class:`Event`.
    """
    R = state.R
    s = state.clock
    w = next_exchange(model, s)[0]
    cancelled = state.cancelled[w]
    accepted = ~cancelled & (s.version - s.dispatch_version[w] < R)
    wasted = jnp.where(cancelled, state.done[w], jnp.where(accepted, 0.0, 1.0))
    clock, arrival = exchange(model, key, s, accepted.astype(jnp.int32))
    events = state.events + 1
    new = state._replace(
        clock=clock,
        events=events,
        dispatch_event=state.dispatch_event.at[w].set(events),
        cancelled=state.cancelled.at[w].set(False),
        done=state.done.at[w].set(0.0),
    )
    if stops:
        new = _cancel_stale(model, new, arrival.time, R)
    event = Event(arrival, accepted, wasted.astype(jnp.float32), state.dispatch_event[w])
    return new, event


def _cancel_stale(model: ClusterModel, state: BoundedState, t: jax.Array, R) -> BoundedState:
    """Cancels, at time ``t``, every in-flight gradient whose delay has reached ``R``."""
    c = state.clock
    stale = ~state.cancelled & (c.version - c.dispatch_version >= R)
    computing = c.compute_time > 0
    trace = model.trace
    if trace is None:
        done = t - c.dispatch_time
    else:
        done = power.work_at(trace, jnp.full_like(c.dispatch_time, t)) - power.work_at(
            trace, c.dispatch_time
        )
    fraction = done / jnp.where(computing, c.compute_time, 1.0)
    done = jnp.where(computing, jnp.clip(fraction, 0.0, 1.0), 1.0)
    compute_end = jnp.where(stale, jnp.minimum(c.compute_end, t), c.compute_end)
    return state._replace(
        clock=c._replace(compute_end=compute_end),
        cancelled=state.cancelled | stale,
        done=jnp.where(stale, done, state.done),
    )


def bounded_events(
    model: ClusterModel, run_key: jax.Array, state: BoundedState, num: int, *, stops: bool = False
) -> tuple[BoundedState, Event]:
    """Runs exchanges of :func:`bounded_next` with keys ``fold_in(run_key, events)``.

    Args:
      model: the cluster model.
      run_key: the key the exchanges' draws are folded from.
      state: the rule's state.
      num: static number of exchanges.
      stops: the variant with calculation stops (static).

    Returns:
      The final state and the stacked :class:`Event` records (leading axis ``num``).
    """

    def step(s, _):
        key = jax.random.fold_in(run_key, s.events)
        return bounded_next(model, key, s, stops=stops)

    return lax.scan(step, state, None, length=int(num))


def link_utilisation(before, after) -> jax.Array:
    """Server link busy time / elapsed simulated time between two clock states (an
    :class:`AsyncState`, or a :mod:`~jaxnigt.cluster.step_clock` state: ``time`` and
    ``link_busy``); NaN over an empty interval. Above 1 only with overlapping exchanges
    (``link: independent``).

    Args:
      before: the state at the step's start.
      after: the state at its end.

    Returns:
      ``[]`` float32.
    """
    elapsed = after.time - before.time
    served = after.link_busy - before.link_busy
    return jnp.where(elapsed > 0, served / jnp.where(elapsed > 0, elapsed, 1.0), jnp.nan)
