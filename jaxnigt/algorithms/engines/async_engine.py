"""The engine of the asynchronous per-arrival methods (AFedPG, A3C-style SGD, A3C).

The event engine (:mod:`jaxnigt.cluster.events`) delivers gradients one at a time in arrival order;
each is rolled out at the point its worker was dispatched with (stale), and the server
applies an optax update per arrival.  :func:`make` turns an optax update into an
:class:`~jaxnigt.algorithms.core.Algorithm` whose step processes ``async_block`` arrivals.

**Waves.**  Compute times never depend on trajectories, so a block's whole arrival sequence
(worker, dispatch version, gradient index, times) is computed first, before any rollout.
Arrival j's trajectory needs only the point its worker was dispatched with, which is known
once the server has applied the updates up to that dispatch (version ``d_j``).  So a block
is processed in *waves*: with ``a`` arrivals applied (server version ``V0 + a``), a wave
rolls out, as one batch at per-slot points, up to ``W`` (``async_wave``) of the arrivals not
rolled out yet whose points are known (``d_j <= V0 + a``), in arrival order, keeps their
gradients, and then applies the server updates in arrival order for as long as the next
arrival's gradient is there.  A worker's second arrival in a block is dispatched by its
first, so it waits for a later wave; the number of waves per block is at least the number of
arrivals of the most frequent worker.  The results are those of rolling out one arrival at a
time (``W = 1``): the same trajectory keys, arrival order and updates.  Memory: the block's
gradients, ``async_block × d`` floats per run.

**Rules.**  An :class:`EventRule` says how exchanges become server updates: :data:`PLAIN`
applies every arrival; a bounded-delay rule (Ringmaster, :mod:`~jaxnigt.algorithms.
ringmaster_pg`) refuses some, and a refused exchange is neither rolled out nor applied: its
worker only takes the current point.  A rule with a :class:`ServerTable` (Ringleader,
:mod:`~jaxnigt.cluster.rules.ringleader`) rolls out every exchange and puts each gradient in
its table; the update, on the exchanges the rule accepts, steps along the table's direction,
and the table says whether the exchange's worker takes the new point or keeps its own.
Readiness is counted in exchanges (an arrival's point is known once the exchange that
dispatched its worker is processed), so every rule shares the waves.

Keys: a worker's trajectory for its k-th gradient uses ``fold_in(fold_in(roll_key, worker),
k)``; the compute time drawn at the e-th exchange uses ``fold_in(time_key, e)`` (with
:data:`PLAIN`, e is the server version).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxnigt.algorithms import core, sizes, updates
from jaxnigt.algorithms.core import Algorithm, Setup, TrainState
from jaxnigt.algorithms.engines import waves
from jaxnigt.cluster import events
from jaxnigt.cluster.model import realize
from jaxnigt.rl.collect import slot_keys
from jaxnigt.rl.rollout import rollout


class ServerTable(NamedTuple):
    """A server that keeps gradients between updates (Ringleader's table).

    Attributes:
      init: ``(params, model) -> table``: the empty table for the run's cluster record.
      put: ``(table, worker, grad, extra) -> (table, direction, takes_point)``: the table
        after the exchange's gradient joined it (``extra``: the exchange's
        :attr:`~jaxnigt.cluster.events.Event.extra`), the direction an update of this
        exchange steps along (used only when the rule accepts it), and whether the worker
        takes the server's point after the exchange (else it keeps the one it holds).
    """

    init: Callable[..., Any]
    put: Callable[..., tuple[Any, Any, jax.Array]]


class EventRule(NamedTuple):
    """How the event engine's exchanges become server updates.

    Attributes:
      init: ``AsyncState -> state``: the rule's state from the engine's initial one.
      next: ``(model, time_key, state) -> (state, events.Event)``: the next exchange on the
        cluster model (:class:`~jaxnigt.cluster.model.ClusterModel`), its compute time drawn
        from ``fold_in(time_key, exchanges processed)``.
      clock: ``state -> AsyncState``.
      exchanges: ``state -> []`` int32 exchanges processed.
      refuses: static: some exchanges are neither rolled out nor server updates (False:
        every one is rolled out; without a table every one is an update).
      table: the server's table (None: each accepted gradient is the update's direction).
    """

    init: Callable[[events.AsyncState], Any]
    next: Callable[..., tuple[Any, events.Event]]
    clock: Callable[[Any], events.AsyncState]
    exchanges: Callable[[Any], jax.Array]
    refuses: bool
    table: ServerTable | None = None


def _plain_next(model, time_key, state: events.AsyncState):
    key = jax.random.fold_in(time_key, state.version)
    new, arr = events.async_next(model, key, state)
    return new, events.Event(arr, jnp.bool_(True), jnp.float32(0.0), arr.dispatch_version)


# Every arrival is a server update (AFedPG, asynchronous SGD, A3C).
PLAIN = EventRule(
    init=lambda clock: clock,
    next=_plain_next,
    clock=lambda state: state,
    exchanges=lambda state: state.version,
    refuses=False,
)


class AsyncExtra(NamedTuple):
    """Engine state kept in ``TrainState.extra``.

    Attributes:
      event_state: the rule's state (:data:`PLAIN`: the
        :class:`~jaxnigt.cluster.events.AsyncState`).
      worker_params: ``[n, ...]`` the point each worker was dispatched with.
      time_key: key of the compute times.
      roll_key: key of the trajectories.
      table: the rule's :class:`ServerTable` state (None without one).
    """

    event_state: events.AsyncState
    worker_params: Any
    time_key: jax.Array
    roll_key: jax.Array
    table: Any = None


class AsyncOptions(NamedTuple):
    """The asynchronous engine's options, from the config's hyperparameters.

    Attributes:
      block: arrivals per step (``async_block``; default n).
      wave: at most this many ready arrivals are rolled out as one batch (``async_wave``;
        default :func:`jaxnigt.algorithms.engines.waves.default_wave` of the cluster); every
        value gives the same results.
    """

    block: int
    wave: int

    @classmethod
    def resolve(cls, setup: Setup, hparams: Any) -> AsyncOptions:
        """The options of a run of ``setup`` with the config's ``hparams`` (defaults here)."""
        block = hparams.async_block or setup.n
        wave = hparams.async_wave or waves.setup_wave(setup.host_cluster, block)
        return cls(block=block, wave=wave)


KEYS = ("async_block", "async_wave")

# Every exchange crosses the server link (queued when ``link: shared``) and waits for a down
# worker or not (``down_exchange``); there are no rounds, so neither the in-flight rule nor
# the AllReduce participants apply.
TRAITS = core.Traits(cluster_options=("link", "down_exchange"), options=KEYS, pads=True)


def factory(
    *, update: updates.Update, estimator: core.Estimator = core.reinforce
) -> core.AlgorithmFactory:
    """``make(setup, hparams)`` of an asynchronous algorithm.

    Args:
      update: the server's update on each arrival.
      estimator: the gradient estimator (the policy gradient by default).

    Returns:
      The factory.
    """

    def make_algorithm(setup: Setup, hparams) -> Algorithm:
        return make(setup, AsyncOptions.resolve(setup, hparams), update=update, estimator=estimator)

    return make_algorithm


def make(
    setup: Setup,
    options: AsyncOptions,
    *,
    update: updates.Update,
    estimator: core.Estimator = core.reinforce,
    traits: core.Traits = TRAITS,
    rule: EventRule = PLAIN,
) -> Algorithm:
    """An asynchronous algorithm from the server's update on each accepted arrival.

    Args:
      setup: the run's setup.
      options: the engine's options.
      update: the server's update.
      estimator: the gradient estimator.
      traits: its traits.
      rule: how exchanges become server updates.

    Returns:
      The :class:`~jaxnigt.algorithms.core.Algorithm`.
    """
    return Algorithm(
        init=functools.partial(_init, setup, update.optimizer, rule),
        step=functools.partial(_block, setup, options, update.optimizer, estimator, rule),
        eval_params=update.eval_params,
        simulate_clock=functools.partial(_simulate_clock, setup, options.block, rule),
        trajectories_per_update=1 if rule.table is None else 0,
        traits=traits.using(update),
        events_per_step=options.block,
    )


def _simulate_clock(setup: Setup, block_size: int, rule: EventRule, key: jax.Array, steps: int):
    """Blocks of ``block_size`` exchanges: the trajectories each block rolls out (its
    accepted arrivals) and the block's end (keys as :func:`events.arrival_blocks`)."""
    if not rule.refuses:
        arr = events.arrival_blocks(setup.cluster, key, steps, block_size)
        return jnp.full((steps,), block_size, jnp.int32), arr.time[:, -1]
    model = realize(setup.cluster, key)[0]
    state = rule.init(events.async_init(model, jax.random.fold_in(key, 0), 0.0))

    def block(s, b):
        run_key = jax.random.fold_in(key, 1 + b)
        one = lambda s, _: rule.next(model, run_key, s)
        s, ev = jax.lax.scan(one, s, None, length=block_size)
        return s, (jnp.sum(ev.accepted.astype(jnp.int32)), ev.arrival.time[-1])

    return jax.lax.scan(block, state, jnp.arange(steps))[1]


def start(setup: Setup, optimizer, key: jax.Array, hyper: core.TracedHParams):
    """What an event engine starts from: x_0, every worker dispatched at server version 0 at
    time 0.

    Args:
      setup: the run's setup.
      optimizer: the server's optimizer factory.
      key: the run's key.
      hyper: the traced hyperparameters.

    Returns:
      ``(params, opt_state, event_state, time_key, roll_key, cluster)``; ``cluster`` is the
      run's cluster record (:func:`~jaxnigt.algorithms.core.run_cluster`), for its state.
    """
    k_init, k_time, k_roll, k_first = jax.random.split(key, 4)
    params = setup.policy.init(k_init)
    model = core.run_cluster(setup, key)
    event_state = events.async_init(model, k_first, 0.0)
    return params, optimizer(hyper).init(params), event_state, k_time, k_roll, model


def _init(
    setup: Setup, optimizer, rule: EventRule, key: jax.Array, hyper: core.TracedHParams
) -> TrainState:
    """Every worker dispatched at x_0 (server version 0) at time 0."""
    params, opt_state, event_state, k_time, k_roll, model = start(setup, optimizer, key, hyper)
    workers = core.stack_workers(params, setup.n)
    table = None if rule.table is None else rule.table.init(params, model)
    extra = AsyncExtra(rule.init(event_state), workers, k_time, k_roll, table)
    return core.initial_state(setup, params, opt_state, key, hyper, extra, cluster=model)


class _Plan(NamedTuple):
    """A block's exchanges, known before any rollout (leading axis ``[A]``)."""

    worker: jax.Array
    grad_index: jax.Array
    dispatch_event: jax.Array  # exchanges processed when the worker was dispatched
    staleness: jax.Array
    accepted: jax.Array  # a server update (else only the worker's restart)
    rolled_out: jax.Array  # its gradient is computed (accepted, or every one with a table)
    extra: Any  # what the rule's table reads of each exchange (None without one)
    wasted: jax.Array  # trajectories' worth of discarded or cancelled work
    computing: jax.Array  # its gradient's computing time (worker time; 0 if not processed)
    live: jax.Array  # processed: the previous exchange came before the budget
    num_live: jax.Array  # [] the processed exchanges are a prefix of this length


def _plan(model, rule: EventRule, block: int, ex: AsyncExtra, budget: jax.Array, run_block=None):
    """``(event state, plan)``: the block's exchange sequence and the rule's state after its
    processed exchanges.

    An exchange is processed only while the previous one came before ``budget``: the first
    one past the budget is the last one (later ones change nothing and count nothing).  In
    a padded program (:mod:`jaxnigt.algorithms.sizes`) ``block`` is the bound and
    ``run_block`` the run's block: exchanges from ``run_block`` on are not processed.
    """

    def step(s, i):
        live = rule.clock(s).time < budget
        if run_block is not None:
            live = live & (i < run_block)
        nxt, ev = rule.next(model, ex.time_key, s)
        spent = jnp.where(live, events.arrivals_computing(model, ev.arrival), 0.0)
        return core.select(live, nxt, s), (ev, live, spent)

    final, (ev, live, spent) = jax.lax.scan(step, ex.event_state, jnp.arange(block))
    num_live = jnp.sum(live.astype(jnp.int32))
    arr = ev.arrival
    plan = _Plan(
        worker=arr.worker,
        grad_index=arr.grad_index,
        dispatch_event=ev.dispatch_event,
        staleness=arr.staleness,
        accepted=ev.accepted,
        rolled_out=ev.accepted if rule.table is None else jnp.ones_like(ev.accepted),
        extra=ev.extra,
        wasted=ev.wasted,
        computing=spent,
        live=live,
        num_live=num_live,
    )
    return final, plan


class _Carry(NamedTuple):
    applied: jax.Array  # [] int32 exchanges processed so far in the block
    rolled: jax.Array  # [A] bool: gradient computed
    grads: Any  # [A, ...] the computed gradients, waiting for their turn
    returns: jax.Array  # [A] their trajectories' returns
    lengths: jax.Array  # [A] and lengths
    params: Any
    opt_state: Any
    worker_params: Any
    table: Any  # the rule's table (None without one)


def _roll_out(
    setup: Setup, wave: int, estimator, hyper, ex: AsyncExtra, plan: _Plan, event0, carry: _Carry
):
    """Rolls out, as one batch, up to ``wave`` accepted arrivals whose points are known; keeps
    their gradients, returns and lengths in the block's buffers."""
    A = plan.worker.shape[0]
    known = plan.dispatch_event <= event0 + carry.applied
    ready = ~carry.rolled & plan.live & plan.rolled_out & known
    (idx,) = jnp.nonzero(ready, size=wave, fill_value=A)
    valid = idx < A
    idx = jnp.minimum(idx, A - 1)
    worker = plan.worker[idx]
    points = jax.tree.map(lambda w: w[worker], carry.worker_params)
    keys = slot_keys(ex.roll_key, worker, plan.grad_index[idx])
    types = setup.cluster.worker_types[worker]
    traj = rollout(setup.task, setup.policy, points, keys, types, per_slot_params=True)
    weights = valid.astype(jnp.float32)
    grads, _ = estimator(setup.policy, points, traj, weights, hyper, per_slot_params=True)
    drop = jnp.where(valid, idx, A)  # out of range: not written
    put = lambda buf, x: buf.at[drop].set(x, mode="drop")
    return carry._replace(
        rolled=put(carry.rolled, True),
        grads=jax.tree.map(put, carry.grads, grads),
        returns=put(carry.returns, traj.returns),
        lengths=put(carry.lengths, traj.lengths.astype(jnp.float32)),
    )


def _apply_ready(opt, rule: EventRule, plan: _Plan, carry: _Carry) -> _Carry:
    """Server updates in arrival order while the next arrival's gradient is computed (or
    the next exchange is refused: its worker only takes the current point)."""
    last = plan.worker.shape[0] - 1

    def can(c):
        j = jnp.minimum(c.applied, last)
        return (c.applied < plan.num_live) & (c.rolled[j] | ~plan.rolled_out[j])

    def one(c):
        j = c.applied
        w = plan.worker[j]
        g = jax.tree.map(lambda b: b[j], c.grads)
        table, takes_point = c.table, None  # None: the worker takes the new point
        if rule.table is not None:
            extra = jax.tree.map(lambda e: e[j], plan.extra)
            table, g, takes_point = rule.table.put(c.table, w, g, extra)
        descend = lambda: core.descend(opt, g, c.opt_state, c.params)
        if rule.refuses or rule.table is not None:
            keep = lambda: (c.params, c.opt_state)
            params, opt_state = jax.lax.cond(plan.accepted[j], descend, keep)
        else:
            params, opt_state = descend()
        # The exchange's worker is re-dispatched with the (new) server point, or keeps its own.
        point = params
        if takes_point is not None:  # a table's rule: only some exchanges bring the point
            keep_own = lambda ws, p: jnp.where(takes_point, p, ws[w])
            point = jax.tree.map(keep_own, c.worker_params, params)
        workers = jax.tree.map(lambda ws, p: ws.at[w].set(p), c.worker_params, point)
        return c._replace(
            applied=j + 1, params=params, opt_state=opt_state, worker_params=workers, table=table
        )

    return jax.lax.while_loop(can, one, carry)


def _block(
    setup: Setup,
    options: AsyncOptions,
    optimizer,
    estimator,
    rule: EventRule,
    state: TrainState,
    budget: jax.Array,
):
    """Up to ``options.block`` exchanges, each accepted one a server update, stopping after
    the first exchange past ``budget``: ``(state, budget) -> (state, metrics)``."""
    ex: AsyncExtra = state.extra
    model = core.cluster_of(setup, state)
    run_block = sizes.run_size(state.sizes, "async_block")
    event_state, plan = _plan(model, rule, options.block, ex, budget, run_block)
    opt = optimizer(state.hyper)
    event0 = rule.exchanges(ex.event_state)
    roll = functools.partial(
        _roll_out, setup, options.wave, estimator, state.hyper, ex, plan, event0
    )
    apply = functools.partial(_apply_ready, opt, rule, plan)
    A = options.block
    zeros = jnp.zeros((A,), jnp.float32)
    carry = _Carry(
        applied=jnp.int32(0),
        rolled=jnp.zeros((A,), bool),
        grads=jax.tree.map(lambda p: jnp.zeros((A, *p.shape), p.dtype), state.params),
        returns=zeros,
        lengths=zeros,
        params=state.params,
        opt_state=state.opt_state,
        worker_params=ex.worker_params,
        table=ex.table,
    )
    carry = jax.lax.while_loop(lambda c: c.applied < plan.num_live, lambda c: apply(roll(c)), carry)
    return _finish_block(setup, rule, state, event_state, plan, carry, model)


def worker_time(model, before: events.AsyncState, after: events.AsyncState, computed):
    """The total worker time's growth from the clock ``before`` to ``after`` (at their
    times): the computing of the gradients whose exchanges came in between, and that of the
    gradients the workers hold, by ``after``'s time less by ``before``'s
    (:func:`~jaxnigt.cluster.events.computing_by`).

    Args:
      model: the run's cluster record.
      before: the clock at the step's start.
      after: the clock at its end.
      computed: ``[]`` the computing time of the gradients whose exchanges came in between
        (:func:`~jaxnigt.cluster.events.arrivals_computing`).

    Returns:
      ``[]`` float32.
    """
    held = events.computing_by(model, after, after.time)
    return computed + held - events.computing_by(model, before, before.time)


def _finish_block(
    setup, rule: EventRule, state: TrainState, event_state, plan: _Plan, carry: _Carry, model
):
    """The new state and the step's metrics after a block's processed exchanges."""
    ex: AsyncExtra = state.extra
    exchanges = plan.num_live.astype(jnp.float32)
    live = plan.live.astype(jnp.float32)
    used = live * plan.rolled_out.astype(jnp.float32)
    grads = jnp.sum(used) if rule.refuses else exchanges
    before, after = rule.clock(ex.event_state), rule.clock(event_state)
    computed = jnp.sum(plan.computing)
    new = state._replace(
        params=carry.params,
        opt_state=carry.opt_state,
        steps=state.steps + 1,
        counters=core.advance(
            state.counters,
            time=after.time,
            env_steps=jnp.sum(live * carry.lengths),
            env_steps_wasted=jnp.sum(live * plan.wasted) * setup.horizon,
            comms=exchanges,
            worker_time=worker_time(model, before, after, computed),
        ),
        extra=ex._replace(
            event_state=event_state, worker_params=carry.worker_params, table=carry.table
        ),
    )
    if rule.refuses:  # gradients used per worker
        counts = jax.ops.segment_sum(used.astype(jnp.int32), plan.worker, num_segments=setup.n)
    else:
        counts = after.dispatch_count - before.dispatch_count
    stale = jnp.where(used > 0, plan.staleness.astype(jnp.float32), jnp.nan)
    grads_finite = jax.vmap(core.all_finite)(carry.grads) | ~plan.live
    return new, core.step_metrics(
        new,
        round_time=after.time - before.time,
        grads=grads,
        train_return=core.mean_return(jnp.sum(live * carry.returns), grads),
        counts=counts,
        active=model.active,
        finite=jnp.all(grads_finite) & core.all_finite(carry.params),
        staleness=(jnp.nanmin(stale), jnp.nanmean(stale), jnp.nanmax(stale)),
        link_util=events.link_utilisation(before, after),
    )
