"""Central inference on the simulated cluster: SEED RL's actors and learner (Espeholt et al.,
ICLR 2020).

The parameters stay on the learner.  At every environment step an actor sends its
observation and receives its action, computed with the learner's parameters current at that
moment (:mod:`jaxnigt.cluster.step_clock`: the per-step clock, its exchanges on the server link and
the version each step is served with).  The learner updates on every batch of ``B``
completed trajectories (``seed_batch``, default n; whole trajectories of H steps are the
unrolls), in completion order; an update starts when the batch is in and the previous update
is done, and takes ``seed_learner_time``.  So IMPALA's one large exchange per trajectory
(parameters down, trajectory up) becomes H small ones, and the policy lag arises *inside* a
trajectory: consecutive steps may come from different versions.

**Versions.**  The learner keeps its last ``R`` parameter versions (``seed_versions``,
default 8) for the steps of trajectories still under way.  A batch's trajectories are rolled
out when the learner takes them, each step at the version it was served with (the rollout
depends on nothing else: a trajectory is one episode from its own key), and V-trace weighs
each step by its own behaviour log-probability against the learner's current parameters.
A step more than ``R - 1`` versions behind its update raises the overflow flag, which stops
the run (raise ``seed_versions``).  The policy lag of a step is the learner's version at the
update minus the step's version; it is logged over *steps* (min / mean / max).

**Counts.**  ``comms`` counts vector exchanges (none: no parameters or gradients travel);
``messages`` counts the step exchanges, H per trajectory.  The link utilisation is the
exchange time served over elapsed time, as for the other event engines.

A step processes ``async_block / B`` learner batches (default one); a step that crosses the
budget stops after the first update that completes past it.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxnigt.algorithms import core, updates
from jaxnigt.algorithms.core import Algorithm, Setup, TrainState
from jaxnigt.algorithms.engines import async_engine
from jaxnigt.cluster import events, step_clock
from jaxnigt.cluster.model import ClusterModel
from jaxnigt.rl.collect import slot_keys
from jaxnigt.rl.rollout import rollout


class SeedExtra(NamedTuple):
    """Engine state kept in ``TrainState.extra``.

    Attributes:
      clock: the actors' per-step clock (:class:`~jaxnigt.cluster.step_clock.ClockState`).
      history: ``[R, ...]`` the learner's last parameters, newest first (``history[0]`` is
        ``TrainState.params``).
      version: ``[]`` int32 learner updates done.
      done_at: ``[R]`` float32 when those updates completed (newest first; ``-inf`` for
        updates that never happened).
      time_key, roll_key: keys of the compute times and of the trajectories.
    """

    clock: step_clock.ClockState
    history: Any
    version: jax.Array
    done_at: jax.Array
    time_key: jax.Array
    roll_key: jax.Array


class SeedOptions(NamedTuple):
    """The central-inference engine's options, from the config's hyperparameters.

    Attributes:
      block: trajectories per step (``async_block``; default ``batch``), a multiple of it.
      batch: trajectories per learner update (``seed_batch``; default n).
      learner_time: simulated time of one learner update (``seed_learner_time``).
      inference_time: the learner's inference time per step (``seed_inference_time``).
      message_time: every worker's step exchange time (``seed_message_time``), or None for
        the cluster model's own (:func:`message_times`).
      versions: parameter versions kept (``seed_versions``).
    """

    block: int
    batch: int
    learner_time: float
    inference_time: float
    message_time: float | None
    versions: int

    @classmethod
    def resolve(cls, setup: Setup, hparams: Any) -> SeedOptions:
        """The options of a run of ``setup`` with the config's ``hparams`` (defaults here)."""
        batch = hparams.seed_batch or setup.n
        block = hparams.async_block or batch
        if block % batch:
            raise ValueError(
                f"hparams.async_block ({block}) must be a multiple of hparams.seed_batch ({batch})"
            )
        message = hparams.seed_message_time
        return cls(
            block=block,
            batch=batch,
            learner_time=float(hparams.seed_learner_time),
            inference_time=float(hparams.seed_inference_time),
            message_time=None if message is None else float(message),
            versions=int(hparams.seed_versions),
        )


def message_times(cluster: ClusterModel, options: SeedOptions) -> jax.Array:
    """Each worker's step exchange time.

    Args:
      cluster: the cluster model: its ``message`` times (κ_i, and with ``scale_by_dim`` the
        d^{1/4} of a vector exchange replaced by (o + a)^{1/4}, the size of an observation
        and an action).
      options: the engine's options (``seed_message_time`` for every worker instead).

    Returns:
      ``[n]`` float32.
    """
    if options.message_time is None:
        return cluster.message
    return jnp.full(cluster.h.shape, options.message_time, jnp.float32)


KEYS = (
    "async_block",
    "seed_batch",
    "seed_learner_time",
    "seed_inference_time",
    "seed_message_time",
    "seed_versions",
)

# Each step's exchange queues on the server link like the per-arrival methods' exchanges (and
# waits for a down actor or not: down_exchange).
TRAITS = core.Traits(
    cluster_options=("link", "down_exchange"),
    overflow="a step lagged more learner updates behind than the learner keeps versions "
    "(raise hparams.seed_versions, or hparams.seed_batch so that updates come less often)",
    options=KEYS,
)


def make(
    setup: Setup,
    options: SeedOptions,
    *,
    update: updates.Update,
    estimator: core.Estimator,
    traits: core.Traits = TRAITS,
) -> Algorithm:
    """Central inference with ``options.batch`` trajectories per learner update.

    Args:
      setup: the run's setup.
      options: the engine's options.
      update: the learner's update.
      estimator: the V-trace estimator; it takes per-step behaviour log-probabilities
        (``behaviour_log_prob``).
      traits: its traits.

    Returns:
      The :class:`~jaxnigt.algorithms.core.Algorithm`.
    """
    return Algorithm(
        init=functools.partial(_init, setup, options, update.optimizer),
        step=functools.partial(_step, setup, options, update.optimizer, estimator),
        eval_params=update.eval_params,
        simulate_clock=functools.partial(_simulate_clock, setup, options),
        trajectories_per_update=options.batch,
        traits=traits.using(update),
        events_per_step=options.block * setup.horizon,
    )


def _init(setup: Setup, options: SeedOptions, optimizer, key, hyper) -> TrainState:
    # x_0 and the keys of the other event engines (the same initial point for a seed)
    params, opt_state, _, k_time, k_roll, model = async_engine.start(setup, optimizer, key, hyper)
    R = options.versions
    extra = SeedExtra(
        clock=step_clock.init(model, k_time, setup.horizon),
        history=core.stack_workers(params, R),
        version=jnp.int32(0),
        done_at=jnp.full((R,), -jnp.inf, jnp.float32),
        time_key=k_time,
        roll_key=k_roll,
    )
    return core.initial_state(setup, params, opt_state, key, hyper, extra, cluster=model)


def behaviour_log_prob(policy, history: Any, traj, index: jax.Array) -> jax.Array:
    """``[S, H]`` ``log μ(u_t|s_t)`` of each step under the version it acted with
    (``history[index[s, t]]``): every kept version's log-probabilities of the whole batch,
    then each step's own (R small forward passes rather than S·H gathered parameter sets)."""
    alive = (traj.mask > 0)[..., None]
    obs, u = jnp.where(alive, traj.obs, 0.0), jnp.where(alive, traj.u, 0.0)
    every = jax.vmap(lambda p: policy.log_prob(p, obs, u))(history)  # [R, S, H]
    return jnp.take_along_axis(every, index[None], axis=0)[0]


def _batch(setup, options: SeedOptions, opt, estimator, hyper, budget, carry, _):
    """One learner batch: serve steps until B trajectories completed, roll them out at their
    per-step versions, V-trace against the current parameters, one update."""
    state, ex = carry
    B, R = options.batch, options.versions
    live = ex.done_at[0] < budget  # the previous update completed before the budget
    message = message_times(setup.cluster, options)
    clock, b = step_clock.next_batch(
        core.cluster_of(setup, state),
        message,
        options.inference_time,
        ex.time_key,
        ex.clock,
        B,
        ex.version,
        ex.done_at,
    )
    behind = ex.version - b.versions  # [B, H] the policy lag of every step
    index = jnp.minimum(behind, R - 1)
    keys = slot_keys(ex.roll_key, b.worker, b.traj)
    types = setup.cluster.worker_types[b.worker]
    traj = rollout(setup.task, setup.policy, ex.history, keys, types, versions=index)
    lb = behaviour_log_prob(setup.policy, ex.history, traj, index)
    weights = jnp.full((B,), 1.0 / B, jnp.float32)
    grads, s = estimator(setup.policy, state.params, traj, weights, hyper, behaviour_log_prob=lb)
    params, opt_state = core.descend(opt, grads, state.opt_state, state.params)
    done = step_clock.update_done(ex.done_at[0], b, options.learner_time)
    new_ex = ex._replace(
        clock=clock,
        history=core.push_newest(ex.history, params),
        version=ex.version + 1,
        done_at=core.push_newest(ex.done_at, done),
    )
    new = (state._replace(params=params, opt_state=opt_state), new_ex)
    state, ex = core.select(live, new, (state, ex))
    out = {
        "live": live,
        "ret": s["sum_return"],
        "len": s["sum_length"],
        "worker": b.worker,
        "lag": behind.astype(jnp.float32),
        "finite": core.all_finite(grads),
        "lost": jnp.any(behind >= R),
    }
    return (state, ex), out


def _step(setup, options: SeedOptions, optimizer, estimator, state: TrainState, budget):
    """``block / batch`` learner batches (see the module docstring)."""
    ex: SeedExtra = state.extra
    B = options.batch
    batch = functools.partial(
        _batch, setup, options, optimizer(state.hyper), estimator, state.hyper, budget
    )
    (new, new_ex), out = jax.lax.scan(batch, (state, ex), None, length=options.block // B)
    live = out["live"].astype(jnp.float32)
    applied = jnp.sum(live) * B
    counts = jnp.zeros((setup.n,), jnp.float32).at[out["worker"]].add(live[:, None])
    lag = jnp.where(out["live"][:, None, None], out["lag"], jnp.nan)
    time = jnp.maximum(new_ex.clock.time, new_ex.done_at[0])
    new = new._replace(
        steps=state.steps + 1,
        counters=core.advance(
            state.counters,
            time=time,
            env_steps=jnp.sum(live * out["len"]),
            comms=0.0,  # no vector exchanges: the parameters stay on the learner
            worker_time=worker_time(setup, state, ex.clock, new_ex.clock, time),
        ),
        extra=new_ex,
    )
    return new, core.step_metrics(
        new,
        round_time=new.counters.time - state.counters.time,
        grads=applied,
        train_return=core.mean_return(jnp.sum(live * out["ret"]), applied),
        counts=counts,
        finite=jnp.all(out["finite"] | ~out["live"]) & core.all_finite(new.params),
        staleness=(jnp.nanmin(lag), jnp.nanmean(lag), jnp.nanmax(lag)),
        overflow=jnp.any(out["lost"] & out["live"]),
        link_util=events.link_utilisation(ex.clock, new_ex.clock),
        messages=new_ex.clock.messages,
    )


def worker_time(setup: Setup, state: TrainState, before, after, time: jax.Array) -> jax.Array:
    """The total worker time's growth over a step: the actors' computing of their step
    shares by ``time`` less by the step's start
    (:attr:`~jaxnigt.cluster.step_clock.ClockState.computing` less what is still ahead,
    :func:`~jaxnigt.cluster.events.computing_ahead`).

    Args:
      setup: the run's setup.
      state: the state the step starts from.
      before: its clock.
      after: the clock at the step's end.
      time: ``[]`` the step's end (its last step served, or a later update's end).

    Returns:
      ``[]`` float32.
    """
    model = core.cluster_of(setup, state)
    by = lambda clock, t: clock.computing - events.computing_ahead(model, clock.request, t)
    return by(after, time) - by(before, state.counters.time)


def _simulate_clock(setup: Setup, options: SeedOptions, key: jax.Array, steps: int):
    """Steps of ``block`` trajectories: trajectories per step and the step's end (its last
    completion or its last update's, whichever is later)."""
    K = options.block // options.batch
    _, batches, done = step_clock.simulate(
        setup.cluster,
        message_times(setup.cluster, options),
        options.inference_time,
        key,
        horizon=setup.horizon,
        batch=options.batch,
        updates=steps * K,
        learner_time=options.learner_time,
    )
    last = batches.time[:, -1].reshape(steps, K)[:, -1]
    end = jnp.maximum(last, done.reshape(steps, K)[:, -1])
    return jnp.full((steps,), options.block, jnp.int32), end
