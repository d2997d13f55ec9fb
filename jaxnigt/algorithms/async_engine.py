"""The engine of the asynchronous per-arrival methods (AFedPG, A3C-style SGD).

The event engine (:mod:`jaxnigt.events`) delivers gradients one at a time in arrival order;
each is rolled out at the point its worker was dispatched with (stale), and the server
applies an optax update per arrival.  :func:`make` turns an optax update into an
:class:`~jaxnigt.algorithms.core.Algorithm` whose step processes ``async_block`` arrivals.

Keys: a worker's trajectory for its k-th gradient uses ``fold_in(fold_in(roll_key, worker),
k)``; the compute time drawn at server version v uses ``fold_in(time_key, v)``.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxnigt import events
from jaxnigt.algorithms import core
from jaxnigt.algorithms.core import Algorithm, Setup, TrainState
from jaxnigt.estimator import policy_gradient
from jaxnigt.rollout import rollout


class AsyncExtra(NamedTuple):
    """Engine state kept in ``TrainState.extra``.

    Attributes:
      event_state: the :class:`~jaxnigt.events.AsyncState`.
      worker_params: ``[n, ...]`` the point each worker was dispatched with.
      time_key: key of the compute times.
      roll_key: key of the trajectories.
    """

    event_state: events.AsyncState
    worker_params: Any
    time_key: jax.Array
    roll_key: jax.Array


def factory(*, update: core.Update) -> core.AlgorithmFactory:
    """``make(setup, hparams)`` of an asynchronous algorithm with this server update."""

    def make_algorithm(setup: Setup, hparams) -> Algorithm:
        del hparams
        return make(setup, update=update)

    return make_algorithm


def make(setup: Setup, *, update: core.Update) -> Algorithm:
    """An asynchronous algorithm from the server's update on each arrival."""
    return Algorithm(
        init=functools.partial(_init, setup, update.optimizer),
        step=functools.partial(_block, setup, update.optimizer),
        eval_params=update.eval_params,
    )


def _init(setup: Setup, optimizer, key: jax.Array, hyper: core.TracedHParams) -> TrainState:
    """Every worker dispatched at x_0 (server version 0) at time 0."""
    k_init, k_time, k_roll, k_first = jax.random.split(key, 4)
    params = setup.policy.init(k_init)
    event_state = events.async_init(setup.tm, k_first, 0.0)
    extra = AsyncExtra(event_state, core.stack_workers(params, setup.n), k_time, k_roll)
    return core.initial_state(setup, params, optimizer(hyper).init(params), key, hyper, extra)


def _arrival(setup: Setup, opt: optax.GradientTransformation, hyper, ex: AsyncExtra, carry, _):
    """One arrival: its trajectory at the worker's dispatch point, then the server update."""
    event_state, params, opt_state, worker_params = carry
    key = jax.random.fold_in(ex.time_key, event_state.version)
    event_state, arr = events.async_next(setup.tm, key, event_state, link=setup.link)
    point = jax.tree.map(lambda w: w[arr.worker], worker_params)
    key = jax.random.fold_in(jax.random.fold_in(ex.roll_key, arr.worker), arr.grad_index)
    types = jnp.asarray(setup.worker_types, jnp.int32)[arr.worker][None]
    traj = rollout(setup.task, setup.policy, point, key[None], types)
    grads, stats = policy_gradient(
        setup.policy, point, traj, jnp.ones((1,), jnp.float32), hyper["gamma"]
    )
    updates, opt_state = opt.update(core.negate(grads), opt_state, params)
    params = optax.apply_updates(params, updates)
    # The arriving worker is re-dispatched with the new server point.
    worker_params = jax.tree.map(lambda w, p: w.at[arr.worker].set(p), worker_params, params)
    out = {
        "ret": stats["sum_return"],
        "len": stats["sum_length"],
        "staleness": arr.staleness.astype(jnp.float32),
        "finite": core.all_finite(grads),
    }
    return (event_state, params, opt_state, worker_params), out


def _block(setup: Setup, optimizer, state: TrainState, budget: jax.Array):
    """``async_block`` arrivals, each one server update: ``(state) -> (state, metrics)``."""
    del budget
    ex: AsyncExtra = state.extra
    arrival = functools.partial(_arrival, setup, optimizer(state.hyper), state.hyper, ex)
    carry = (ex.event_state, state.params, state.opt_state, ex.worker_params)
    (event_state, params, opt_state, worker_params), out = jax.lax.scan(
        arrival, carry, None, length=setup.async_block
    )
    block = float(setup.async_block)
    before = ex.event_state
    new = state._replace(
        params=params,
        opt_state=opt_state,
        steps=state.steps + 1,
        counters=core.advance(
            state.counters, time=event_state.time, env_steps=jnp.sum(out["len"]), comms=block
        ),
        extra=ex._replace(event_state=event_state, worker_params=worker_params),
    )
    elapsed = event_state.time - before.time
    served = event_state.link_busy - before.link_busy
    stale = out["staleness"]
    return new, core.step_metrics(
        new,
        round_time=elapsed,
        grads=block,
        train_return=jnp.mean(out["ret"]),
        counts=event_state.dispatch_count - before.dispatch_count,
        finite=jnp.all(out["finite"]) & core.all_finite(params),
        staleness=(jnp.min(stale), jnp.mean(stale), jnp.max(stale)),
        link_util=jnp.where(elapsed > 0, served / jnp.where(elapsed > 0, elapsed, 1.0), jnp.nan),
    )
