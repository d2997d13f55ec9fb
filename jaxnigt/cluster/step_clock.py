"""The per-step exchange clock of central inference (SEED RL; Espeholt et al., ICLR 2020).

Under central inference the parameters never leave the learner: at *every* environment step
an actor sends its observation up and receives its action down, computed by the learner with
the parameters current at that moment.  One trajectory is thus H small exchanges, and the
learner may update while an actor is mid-trajectory, so the steps of one trajectory come
from different parameter versions.

Worker ``i``'s trajectory ``k`` costs ``tau_{i,k} = h_i xi_{i,k}`` of compute, as for every
other method (:mod:`jaxnigt.cluster.timing`; with ``per_step`` the model's ``h`` is already H times
the per-step time), spread evenly over its H steps.  Step ``j`` of a trajectory:

* its compute share ends at ``request = end of step j-1 + tau/H`` (the trajectory's start
  for ``j = 0``; a trajectory starts when the previous one ends); with a power trace that
  share of work is done on the worker's work clock, and its exchange waits while it is down
  (:func:`jaxnigt.cluster.events.compute_end`, :func:`~jaxnigt.cluster.events.exchange_end`);
* its exchange (observation up, action down) takes ``m_i`` (the message time) on the server
  link (the cluster model's ``link``, as in :mod:`jaxnigt.cluster.events`):

  - ``shared``: the learner's link serves exchanges one at a time, first come first served
    in the order of the requests (ties: lower worker id):
    ``start = max(link_free, request)``, ``served = start + m_i``, ``link_free = served``;
  - ``independent``: exchanges overlap, ``served = request + m_i`` (ties: lower worker id);

* the action is computed with the learner's newest version whose update completed by
  ``served`` (an update completing at that instant counts), and the step ends at
  ``served + inference`` (the learner's inference time per step).

A trajectory completes at the end of its last step and is then on the learner (its unroll is
assembled there: no upload).  Every trajectory takes its H steps on this clock, also when its
episode ends earlier (every method here charges a trajectory its whole compute time).

Steps are simulated one event at a time in the order they are served, until ``B`` trajectories
have completed (:func:`next_batch`); the learner then updates on them (its done times are the
``done_at`` history the next batch's steps read their versions from).  Compute times are drawn
per (worker, trajectory) from ``fold_in(fold_in(time_key, worker), trajectory)``, so they do
not depend on the event order.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxnigt.cluster.events import compute_end, computing_time, exchange_end
from jaxnigt.cluster.model import ClusterModel, realize, sample_worker_compute_time


class ClockState(NamedTuple):
    """The actors' progress on the per-step clock (arrays only).

    Attributes:
      request: ``[n]`` float32 when each actor's next step asks for its action.
      step: ``[n]`` int32 that step's index in its trajectory (0 .. H-1).
      traj: ``[n]`` int32 the actor's current trajectory (0-based count).
      share: ``[n]`` float32 the compute time of one step of that trajectory (tau / H).
      versions: ``[n, H]`` int32 the version each step of that trajectory was served with.
      link_free: ``[]`` float32 when the shared link is next free.
      link_busy: ``[]`` float32 total exchange time served so far.
      messages: ``[]`` float32 exchanges served so far.
      time: ``[]`` float32 when the last served step ended.
      computing: ``[]`` float32 the actors' computing of every step share begun so far,
        whole (:func:`~jaxnigt.cluster.events.computing_time`; each share from the end of
        its previous step to ``request``): the total worker time by a time ``t >=`` every
        share's start is this less what is ahead of ``t``
        (:func:`~jaxnigt.cluster.events.computing_ahead` of ``request``).
    """

    request: jax.Array
    step: jax.Array
    traj: jax.Array
    share: jax.Array
    versions: jax.Array
    link_free: jax.Array
    link_busy: jax.Array
    messages: jax.Array
    time: jax.Array
    computing: jax.Array


class Batch(NamedTuple):
    """The ``B`` trajectories that completed next, in completion order.

    Attributes:
      worker: ``[B]`` int32.
      traj: ``[B]`` int32 the worker's trajectory index (for its rollout key).
      time: ``[B]`` float32 completion times (non-decreasing).
      versions: ``[B, H]`` int32 the version each step was served with.
    """

    worker: jax.Array
    traj: jax.Array
    time: jax.Array
    versions: jax.Array


def _share(model: ClusterModel, time_key: jax.Array, worker, traj, horizon: int) -> jax.Array:
    key = jax.random.fold_in(jax.random.fold_in(time_key, worker), traj)
    return sample_worker_compute_time(model, key, worker) / horizon


def init(model: ClusterModel, time_key: jax.Array, horizon: int) -> ClockState:
    """Every actor starts its trajectory 0 at time 0.

    Args:
      model: the cluster model.
      time_key: the key of the compute times.
      horizon: steps per trajectory (static).

    Returns:
      The clock.
    """
    n = model.n
    workers = jnp.arange(n, dtype=jnp.int32)
    share = jax.vmap(lambda w: _share(model, time_key, w, 0, horizon))(workers)
    zero = jnp.float32(0.0)
    request = share if model.trace is None else compute_end(model, jnp.zeros((n,)), share)
    return ClockState(
        request=request,
        step=jnp.zeros((n,), jnp.int32),
        traj=jnp.zeros((n,), jnp.int32),
        share=share,
        versions=jnp.zeros((n, horizon), jnp.int32),
        link_free=zero,
        link_busy=zero,
        messages=zero,
        time=zero,
        computing=jnp.sum(computing_time(model, jnp.zeros((n,)), request)),
    )


def served_version(served: jax.Array, version: jax.Array, done_at: jax.Array) -> jax.Array:
    """The learner version current at time ``served``: ``version`` (updates done) minus the
    kept updates (``done_at``, newest first) that complete after it."""
    return version - jnp.sum(done_at > served).astype(jnp.int32)


def next_batch(
    model: ClusterModel,
    message: jax.Array,
    inference: jax.typing.ArrayLike,
    time_key: jax.Array,
    state: ClockState,
    batch: int,
    version: jax.Array,
    done_at: jax.Array,
) -> tuple[ClockState, Batch]:
    """Serves steps, one at a time, until ``batch`` (static) more trajectories completed.

    Args:
      model: the cluster model (compute times and the server ``link``).
      message: ``[n]`` float32 each actor's exchange time per step (the model's ``message``,
        or the engine's own).
      inference: the learner's inference time per step.
      time_key: the key of the compute times (see the module docstring).
      state: the clock.
      batch: trajectories to complete.
      version: the learner's updates done so far.
      done_at: ``[R]`` when its newest kept updates completed (newest first; ``-inf`` for
        updates that never happened): a step's version is :func:`served_version`.

    Returns:
      ``(state, batch)``: the clock after them and the :class:`Batch` that completed.
    """
    horizon = state.versions.shape[1]
    inference = jnp.asarray(inference, jnp.float32)
    empty = Batch(
        worker=jnp.zeros((batch,), jnp.int32),
        traj=jnp.zeros((batch,), jnp.int32),
        time=jnp.zeros((batch,), jnp.float32),
        versions=jnp.zeros((batch, horizon), jnp.int32),
    )
    serve = functools.partial(
        _serve, model, message, inference, time_key, version, done_at, batch, horizon
    )
    state, out, _ = jax.lax.while_loop(lambda c: c[2] < batch, serve, (state, empty, jnp.int32(0)))
    return state, out


def _serve(model, message, inference, time_key, version, done_at, batch, horizon, carry):
    """One event: the next step served (see the module docstring)."""
    s, out, count = carry
    if model.link == "shared":
        w = jnp.argmin(s.request).astype(jnp.int32)
        served = exchange_end(model, jnp.maximum(s.link_free, s.request[w]), message[w], w)
    else:
        w = jnp.argmin(exchange_end(model, s.request, message)).astype(jnp.int32)
        served = exchange_end(model, s.request[w], message[w], w)
    end = served + inference
    j = s.step[w]
    versions = s.versions.at[w, j].set(served_version(served, version, done_at))
    last = j == horizon - 1
    into = jnp.where(last, count, batch)  # out of range: dropped
    out = jax.tree.map(
        lambda buf, x: buf.at[into].set(x, mode="drop"),
        out,
        Batch(worker=w, traj=s.traj[w], time=end, versions=versions[w]),
    )
    traj = s.traj[w] + last.astype(jnp.int32)
    share = jnp.where(last, _share(model, time_key, w, traj, horizon), s.share[w])
    request = compute_end(model, end, share, w)
    s = ClockState(
        request=s.request.at[w].set(request),
        step=s.step.at[w].set(jnp.where(last, 0, j + 1)),
        traj=s.traj.at[w].set(traj),
        share=s.share.at[w].set(share),
        versions=versions,
        link_free=served if model.link == "shared" else s.link_free,
        link_busy=s.link_busy + message[w],
        messages=s.messages + 1.0,
        time=end,
        computing=s.computing + computing_time(model, end, request, w),
    )
    return s, out, count + last.astype(jnp.int32)


def update_done(previous: jax.Array, batch: Batch, learner_time) -> jax.Array:
    """When the learner's update on a batch completes: it starts when the learner is free
    and the batch's last trajectory is in, and takes ``learner_time``.

    Args:
      previous: ``[]`` when the learner's previous update completed.
      batch: the batch.
      learner_time: the time of one update.

    Returns:
      ``[]`` the update's completion.
    """
    return jnp.maximum(previous, batch.time[-1]) + learner_time


def simulate(
    model: ClusterModel,
    message: jax.Array,
    inference: jax.typing.ArrayLike,
    key: jax.Array,
    *,
    horizon: int,
    batch: int,
    updates: int,
    learner_time: jax.typing.ArrayLike = 0.0,
    history: int = 1,
) -> tuple[ClockState, Batch, jax.Array]:
    """The clock alone for learner batches from time 0.

    Versions are exact while no step lags ``history`` or more updates behind (the learner
    keeps that many done times).

    Args:
      model: the cluster model (compute times and the server ``link``).
      message: ``[n]`` each actor's exchange time per step.
      inference: the learner's inference time per step.
      key: the key of the compute times.
      horizon: steps per trajectory (static).
      batch: trajectories per learner update (static).
      updates: learner updates (static).
      learner_time: the time of one update.
      history: the done times the learner keeps (static).

    Returns:
      The final clock, the batches stacked ``[updates, ...]`` and each update's completion
      ``[updates]``.
    """
    model = realize(model, key)[0]
    state = init(model, key, horizon)
    done_at = jnp.full((history,), -jnp.inf, jnp.float32)
    learner_time = jnp.asarray(learner_time, jnp.float32)

    def one(carry, version):
        state, done_at = carry
        state, b = next_batch(model, message, inference, key, state, batch, version, done_at)
        done = update_done(done_at[0], b, learner_time)
        done_at = jnp.concatenate([done[None], done_at[:-1]])  # newest first
        return (state, done_at), (b, done)

    (state, _), (batches, done) = jax.lax.scan(
        one, (state, done_at), jnp.arange(updates, dtype=jnp.int32)
    )
    return state, batches, done
