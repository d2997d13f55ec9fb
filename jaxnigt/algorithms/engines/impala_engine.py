"""IMPALA's actor-learner split on the simulated cluster (Espeholt et al., 2018).

Workers are actors: each rolls out one trajectory with the parameters it last received and
sends it to the learner; that exchange (the trajectory up, the current parameters down) costs
the worker's ``kappa_i`` on the server link, as a gradient exchange of the per-arrival methods
does (:mod:`jaxnigt.cluster.events`: the same arrival times, on the cluster model's ``link``).  The
learner waits for a batch of ``B`` arrivals (``impala_batch``), computes V-trace targets and
the actor-critic loss with its *current* parameters against each trajectory's behaviour
policy (the parameters its actor had), and updates; an update takes ``impala_learner_time``
of simulated time, and an actor whose exchange ends before the update completes receives the
parameters before it.  The policy lag of a trajectory is the learner's version at its update
minus the version the actor had; it is logged like staleness (min / mean / max).

A step processes ``K = async_block / B`` learner batches (one rollout of B trajectories at
per-slot behaviour parameters and one update each); a step that crosses the budget stops
after the first update that completes past it.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxnigt.algorithms import core, updates
from jaxnigt.algorithms.core import Algorithm, Setup, TrainState
from jaxnigt.algorithms.engines import async_engine
from jaxnigt.cluster import events
from jaxnigt.rl.collect import slot_keys
from jaxnigt.rl.rollout import rollout

HISTORY = 4  # learner versions kept for actors whose exchange ends before an update completes


class ImpalaExtra(NamedTuple):
    """Engine state kept in ``TrainState.extra``.

    Attributes:
      event_state: the actors' exchanges (:class:`~jaxnigt.cluster.events.AsyncState`).
      worker_params: ``[n, ...]`` each actor's behaviour parameters.
      worker_version: ``[n]`` int32 the learner version each actor has.
      history: ``[HISTORY, ...]`` the learner's last parameters, newest first.
      version: ``[]`` int32 learner updates done.
      done_at: ``[HISTORY]`` float32 when those updates completed (newest first).
      time_key, roll_key: keys of the compute times and of the trajectories.
    """

    event_state: events.AsyncState
    worker_params: Any
    worker_version: jax.Array
    history: Any
    version: jax.Array
    done_at: jax.Array
    time_key: jax.Array
    roll_key: jax.Array


class ImpalaOptions(NamedTuple):
    """The IMPALA engine's options, from the config's hyperparameters.

    Attributes:
      block: arrivals per step (``async_block``; default n), a multiple of ``batch``.
      batch: trajectories per learner update (``impala_batch``; default n).
      learner_time: simulated time of one learner update (``impala_learner_time``).
    """

    block: int
    batch: int
    learner_time: float

    @classmethod
    def resolve(cls, setup: Setup, hparams: Any) -> ImpalaOptions:
        """The options of a run of ``setup`` with the config's ``hparams`` (defaults here)."""
        block, batch = hparams.async_block or setup.n, hparams.impala_batch or setup.n
        if block % batch:
            raise ValueError(
                f"hparams.async_block ({block}) must be a multiple of hparams.impala_batch "
                f"({batch})"
            )
        return cls(block=block, batch=batch, learner_time=float(hparams.impala_learner_time))


KEYS = ("async_block", "impala_batch", "impala_learner_time")

# Actors exchange trajectories and parameters over the server link, as the per-arrival
# methods do (a down actor's exchange waits for it or not: down_exchange); the learner keeps
# a bounded number of past versions for its lagging actors.
TRAITS = core.Traits(
    cluster_options=("link", "down_exchange"),
    overflow="the learner fell more versions behind its actors than it keeps (its updates "
    "take longer than a batch of arrivals: lower hparams.impala_learner_time or raise "
    "hparams.impala_batch)",
    options=KEYS,
)


def make(
    setup: Setup,
    options: ImpalaOptions,
    *,
    update: updates.Update,
    estimator: core.Estimator,
    traits: core.Traits = TRAITS,
) -> Algorithm:
    """IMPALA with ``options.batch`` trajectories per learner update.

    Args:
      setup: the run's setup.
      options: the engine's options.
      update: the learner's update.
      estimator: the V-trace actor-critic estimator.
      traits: its traits.

    Returns:
      The :class:`~jaxnigt.algorithms.core.Algorithm`.
    """
    return Algorithm(
        init=functools.partial(_init, setup, update.optimizer),
        step=functools.partial(_step, setup, options, update.optimizer, estimator),
        eval_params=update.eval_params,
        simulate_clock=functools.partial(_simulate_clock, setup, options),
        trajectories_per_update=options.batch,
        traits=traits.using(update),
        events_per_step=options.block,
    )


def _init(setup: Setup, optimizer, key: jax.Array, hyper: core.TracedHParams) -> TrainState:
    params, opt_state, event_state, k_time, k_roll, model = async_engine.start(
        setup, optimizer, key, hyper
    )
    extra = ImpalaExtra(
        event_state=event_state,
        worker_params=core.stack_workers(params, setup.n),
        worker_version=jnp.zeros((setup.n,), jnp.int32),
        history=core.stack_workers(params, HISTORY),
        version=jnp.int32(0),
        done_at=jnp.full((HISTORY,), -jnp.inf, jnp.float32),
        time_key=k_time,
        roll_key=k_roll,
    )
    return core.initial_state(setup, params, opt_state, key, hyper, extra, cluster=model)


def _received(ex: ImpalaExtra, t: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(slot, version, lost)``: the newest learner version completed by time ``t``, its
    index in the history (newest first), and whether it is older than the history holds."""
    done = ex.done_at <= t  # newest first; versions complete in order
    slot = jnp.argmax(done)  # the first (newest) completed one
    return slot, ex.version - slot, ~jnp.any(done)


def _select(cond: jax.Array, a: Any, b: Any) -> Any:
    """Per leading index ``j``: ``a[j]`` where ``cond[j]``, else ``b[j]`` (pytrees)."""
    pick = lambda x, y: jnp.where(cond.reshape(cond.shape + (1,) * (x.ndim - 1)), x, y)
    return jax.tree.map(pick, a, b)


def _behaviour(ex: ImpalaExtra, arr: events.Arrival) -> tuple[Any, jax.Array, jax.Array]:
    """``(params, lag, lost)`` per arrival of a batch: the parameters its trajectory was rolled
    out with, the policy lag, and whether they were older than the history keeps.

    An actor that already arrived earlier in this batch rolled the trajectory out with what it
    received then: a version finished before this batch's update (which needs all B).
    """
    w, j = arr.worker, jnp.arange(arr.worker.shape[0])
    earlier = (w[:, None] == w[None, :]) & (j[None, :] < j[:, None])  # [arrival, earlier one]
    again = jnp.any(earlier, axis=1)
    prev = jnp.argmax(jnp.where(earlier, j[None, :], -1), axis=1)  # its latest earlier arrival
    slots, versions, lost = jax.vmap(lambda t: _received(ex, t))(arr.time[prev])
    params = _select(
        again,
        jax.tree.map(lambda h: h[slots], ex.history),
        jax.tree.map(lambda p: p[w], ex.worker_params),
    )
    lag = ex.version - jnp.where(again, versions, ex.worker_version[w])
    return params, lag.astype(jnp.float32), lost & again


def _hand_out(ex: ImpalaExtra, arr: events.Arrival, n: int) -> tuple[ImpalaExtra, jax.Array]:
    """Each actor of the batch keeps what it received at its last arrival in it (the newest
    version finished by then, this batch's update included); and whether that was lost."""
    w, j = arr.worker, jnp.arange(arr.worker.shape[0])
    last = ~jnp.any((w[:, None] == w[None, :]) & (j[None, :] > j[:, None]), axis=1)
    slots, versions, lost = jax.vmap(lambda t: _received(ex, t))(arr.time)
    received = jax.tree.map(lambda h: h[slots], ex.history)
    into = jnp.where(last, w, n)  # out of range: dropped, so each actor is written once
    ex = ex._replace(
        worker_params=jax.tree.map(
            lambda wp, r: wp.at[into].set(r, mode="drop"), ex.worker_params, received
        ),
        worker_version=ex.worker_version.at[into].set(versions, mode="drop"),
    )
    return ex, lost & last


def _batch(setup, opt, estimator, B, learner_time, hyper, budget, carry, k):
    """One learner batch: B arrivals, one rollout at their behaviour parameters, V-trace,
    one update; then every arriving actor receives the parameters current at its arrival."""
    state, ex, stats = carry
    live = ex.done_at[0] < budget  # the previous update completed before the budget
    # the same keys as the per-arrival engine: fold_in(time_key, version) per arrival
    model = core.cluster_of(setup, state)
    event_state, arr = events.async_arrivals(model, ex.time_key, ex.event_state, B)
    w = arr.worker
    behaviour, lag, lost_before = _behaviour(ex, arr)
    keys = slot_keys(ex.roll_key, w, arr.grad_index)
    types = setup.cluster.worker_types[w]
    traj = rollout(setup.task, setup.policy, behaviour, keys, types, per_slot_params=True)
    weights = jnp.full((B,), 1.0 / B, jnp.float32)
    grads, s = estimator(setup.policy, state.params, traj, weights, hyper, behaviour=behaviour)
    params, opt_state = core.descend(opt, grads, state.opt_state, state.params)
    done = jnp.maximum(ex.done_at[0], arr.time[-1]) + learner_time
    new_ex = ex._replace(
        event_state=event_state,
        history=core.push_newest(ex.history, params),
        version=ex.version + 1,
        done_at=core.push_newest(ex.done_at, done),
    )
    new_ex, lost_after = _hand_out(new_ex, arr, setup.n)
    new = (state._replace(params=params, opt_state=opt_state), new_ex)
    state, ex = core.select(live, new, (state, ex))
    out = {
        "live": live,
        "ret": s["sum_return"],
        "len": s["sum_length"],
        "lag": lag,
        "finite": core.all_finite(grads),
        "lost": lost_before | lost_after,
        "computing": jnp.sum(events.arrivals_computing(model, arr)),  # the batch's gradients
    }
    return (state, ex, stats), out


def _step(setup, options: ImpalaOptions, optimizer, estimator, state: TrainState, budget):
    """``block / batch`` learner batches (see the module docstring)."""
    ex: ImpalaExtra = state.extra
    B = options.batch
    opt, lt = optimizer(state.hyper), options.learner_time
    batch = functools.partial(_batch, setup, opt, estimator, B, lt, state.hyper, budget)
    K = options.block // B
    (new, new_ex, _), out = jax.lax.scan(batch, (state, ex, ()), jnp.arange(K))
    live = out["live"].astype(jnp.float32)
    applied = jnp.sum(live) * B
    before = ex.event_state
    time = jnp.maximum(new_ex.event_state.time, new_ex.done_at[0])
    model = core.cluster_of(setup, state)
    # the gradients that came in, and those the actors hold, by the step's end (a gradient
    # begun after the last arrival and before a later update's end counts in the next step)
    held = lambda clock, t: events.computing_by(model, clock, t)
    computed = jnp.sum(jnp.where(out["live"], out["computing"], 0.0))
    spent = computed + held(new_ex.event_state, time) - held(before, state.counters.time)
    new = new._replace(
        steps=state.steps + 1,
        counters=core.advance(
            state.counters,
            time=time,
            env_steps=jnp.sum(live * out["len"]),
            comms=applied,
            worker_time=spent,
        ),
        extra=new_ex,
    )
    lag = jnp.where(out["live"][:, None], out["lag"], jnp.nan)
    return new, core.step_metrics(
        new,
        round_time=new.counters.time - state.counters.time,
        grads=applied,
        train_return=core.mean_return(jnp.sum(live * out["ret"]), applied),
        counts=new_ex.event_state.dispatch_count - before.dispatch_count,
        finite=jnp.all(out["finite"] | ~out["live"]) & core.all_finite(new.params),
        staleness=(jnp.nanmin(lag), jnp.nanmean(lag), jnp.nanmax(lag)),
        overflow=jnp.any(out["lost"] & out["live"][:, None]),
        link_util=events.link_utilisation(before, new_ex.event_state),
    )


def _simulate_clock(setup: Setup, options: ImpalaOptions, key: jax.Array, steps: int):
    """Steps of ``block`` arrivals: trajectories per step and the step's end (the last
    arrival or the last update's completion)."""
    A, B = options.block, options.batch
    arr = events.arrival_blocks(setup.cluster, key, steps, A)

    def block(done, times):
        for k in range(A // B):
            done = jnp.maximum(done, times[(k + 1) * B - 1]) + options.learner_time
        return done, jnp.maximum(times[-1], done)

    return jnp.full((steps,), A, jnp.int32), jax.lax.scan(block, jnp.float32(0.0), arr.time)[1]
