"""One round of a collection rule: its sizes, its record and the end-of-round bookkeeping
every rule shares.

A round rule (:mod:`jaxnigt.cluster.rules`) decides which gradients count and when
collection ends (a :class:`Collection`); :func:`finish_round` turns that into the round's
:class:`RoundSchedule`: its end, AllReduce, wasted work and when each worker is free next;
:func:`run_rounds` chains rounds from time 0.  A rule reads every size from its
:class:`RoundSize` and the run's workers from :func:`worker_count` / :func:`live_rows`: the one
seam through which a padded program (:mod:`jaxnigt.cluster.padding`: several runs' sizes as
values of one program) reaches a rule, so no rule branches on whether it is padded.
The conventions, shared by every rule:

* **Start.** Worker ``i`` starts at ``s_i = max(t0, busy_until_i)``: ``busy_until`` is when
  the worker is free to work at the round's point (it received the point, and in ``discard``
  mode finished its stale gradient).  Its ``k``-th completion is
  ``s_i + tau_{i,0} + ... + tau_{i,k}``.  Completion times are computed relative to ``t0``
  with a *sequential* float32 prefix sum (:func:`sequential_cumsum`, a ``lax.scan``), so the
  rounding is reproducible by a plain-Python simulator; absolute times are ``t0 + relative``.
* **End.** Collection ends at ``T``; one AllReduce follows.  ``allreduce="all"``: over all
  workers, costing ``kappa_P = max_i kappa_i``.  ``allreduce="contributors"``: over the
  workers with ``b_i >= 1``, costing ``kappa_P = max_{b_i >= 1} kappa_i``; every other worker
  receives the new point over its own link and is ready at ``T + max(kappa_P, kappa_i)``.
  The next round starts at ``t_end = T + kappa_P`` (the server point is updated then).
  ``comms`` counts vector communications: one AllReduce = 1 (scalar signals are free).
* **In flight at T** is the gradient a worker *began before* ``T`` and had not completed by
  ``T`` (or completed exactly at ``T`` without being used, a Rennala tie).  A gradient that
  would begin at or after ``T`` has done no work: the worker whose completion ends the
  collection, and any worker completing exactly at ``T``, is free at ``T``.  In work-clock
  terms (a power trace): a gradient is in flight iff its worker has done a positive amount
  of work on it by ``T``; one begun while its worker is down, untouched by ``T``, is not
  (no waste; the worker takes the new point when it has it).
  ``cancel`` -- the partial gradient is stopped: wasted worker-time ``T - last completion``
  (or ``T - s_i``), wasted trajectories = the completed fraction of that gradient.
  ``discard`` -- the in-flight gradient runs to completion and is thrown away: wasted time =
  its whole compute time, 1 wasted trajectory, and the worker is busy until that completion.
  Either way ``busy_until`` of the next round is the later of that and the time the worker
  receives the new point.  With ``kappa = 0`` discard mode is Tyurin's asynchronous
  simulator: every worker restarts at the newest point after each completion, and
  completions computed at an older point are dropped.
* The synchronous rule has no in-flight work: every worker computes exactly ``b``
  gradients then idles (idle time is not "wasted"; see utilisation in ``jaxnigt clock``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxnigt.cluster import power
from jaxnigt.cluster.events import computing_time
from jaxnigt.cluster.model import ClusterModel, realize


class RoundSize(NamedTuple):
    """A round's sizes: the static bounds its arrays are shaped by, and the run's values.

    In an ordinary program the run's sizes are the bounds; in a padded program several runs
    of different sizes share the program's bounds and each carries its own values (``run``).
    A rule reads the static bound where a shape needs one (``size.M`` columns) and the run's
    value everywhere else (:meth:`value`), so the same code serves both.

    Attributes:
      M: the round's batch (Rennala's M, or M_init for round 0): the most slots.
      capacity: Malenia's most gradients per worker.
      per_worker: the synchronous round's gradients per worker.
      m: the workers an m-synchronous round waits for.
      run: a padded run's own values (``M``, ``capacity``, ``m``, ``threshold``; traced), or
        None: the bounds are the run's.  Read them with :meth:`value`.
    """

    M: int
    capacity: int = 1
    per_worker: int = 1
    m: int = 1
    run: Any = None

    def value(self, name: str, default: Any = None) -> Any:
        """The run's ``name``: its own value in a padded program, else the static bound (for
        a size without one, ``default``).

        Args:
          name: ``M``, ``capacity``, ``m`` (int32) or ``threshold`` (float32, Malenia's).
          default: the value of a name that has no bound (``threshold``).

        Returns:
          A traced ``[]`` int32 (``threshold``: float32) in a padded program; in an ordinary
          one the static bound, a Python int (``threshold``: a float32 scalar), so the
          program is the one its static sizes give.

        Raises:
          ValueError: an unknown name, or ``threshold`` without a default.
        """
        if name not in ("M", "capacity", "m", "threshold"):
            raise ValueError(f"RoundSize.value: {name!r}; expected M, capacity, m or threshold")
        if self.run is not None and name in self.run:
            dtype = jnp.float32 if name == "threshold" else jnp.int32
            return jnp.asarray(self.run[name], dtype)
        if name != "threshold":
            return int(getattr(self, name))
        if default is None:
            raise ValueError("RoundSize.value('threshold') needs the rule's default")
        return jnp.float32(default)


def worker_count(model: ClusterModel) -> Any:
    """The run's number of workers (a padded record's rows, ``model.n``, are more).

    Args:
      model: the cluster model.

    Returns:
      A traced ``[]`` int32 for a padded record; ``model.n`` (a Python int) otherwise.
    """
    return model.n if model.workers is None else jnp.asarray(model.workers, jnp.int32)


# The seam's masks: None stands for "every entry", so an ordinary program (every size its
# static bound, every row the run's) is the program its static sizes give, op for op.


def live_rows(model: ClusterModel, rows: jax.Array | None = None) -> jax.Array | None:
    """The rows of the record that are the run's workers.

    Args:
      model: the cluster model.
      rows: ``[m]`` worker ids to ask about (None: every row).

    Returns:
      ``[n]`` (or ``[m]``) bool for a padded record; None for an ordinary one (every row).
    """
    if model.workers is None:
        return None
    live = jnp.arange(model.n) < model.workers
    return live if rows is None else live[rows]


def leading(bound: int, own: Any) -> jax.Array | None:
    """The first ``own`` of ``bound`` entries (a run's own slots, columns or rows).

    Args:
      bound: the static length.
      own: the run's number (:meth:`RoundSize.value`, :func:`worker_count`).

    Returns:
      ``[bound]`` bool, or None when ``own`` is static and covers them all.
    """
    if isinstance(own, int) and own >= bound:
        return None
    return jnp.arange(bound) < own


def smaller(a: Any, b: Any) -> Any:
    """``min(a, b)``, static when both are.

    Args:
      a, b: Python ints or traced ints.

    Returns:
      The smaller.
    """
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else jnp.minimum(a, b)


def keep(x: jax.Array, mask: jax.Array | None, fill: Any, axis: int | None = None) -> jax.Array:
    """``x`` where ``mask`` holds, ``fill`` elsewhere (``x`` itself for a None mask).

    Args:
      x: values.
      mask: a mask (:func:`live_rows`, :func:`leading`), or None.
      fill: the value outside it.
      axis: the axis of ``x`` a 1-D ``mask`` runs along (None: ``mask`` broadcasts as is).

    Returns:
      ``x``'s shape.
    """
    if mask is None:
        return x
    if axis is not None:
        mask = mask.reshape([-1 if a == axis % x.ndim else 1 for a in range(x.ndim)])
    return jnp.where(mask, x, fill)


def each_slot(mask: jax.Array | None, b: int) -> jax.Array | None:
    """A row mask for each of a row's ``b`` slots, rows' slots one after another.

    Args:
      mask: ``[n]`` bool (:func:`live_rows`), or None.
      b: slots per row.

    Returns:
      ``[n * b]`` bool, or None for a None mask.
    """
    return None if mask is None else jnp.repeat(mask, b)


def every(mask: jax.Array | None, shape: tuple[int, ...]) -> jax.Array:
    """``mask`` as a bool array of ``shape`` (all true for a None mask).

    Args:
      mask: a mask or None.
      shape: its shape.

    Returns:
      ``[shape]`` bool.
    """
    return jnp.ones(shape, bool) if mask is None else mask


class RoundSchedule(NamedTuple):
    """One round of a collection schedule (arrays only).

    Attributes:
      slot_worker: ``[S]`` int32 worker of each trajectory slot; valid slots first, in
        completion-time order.
      slot_rank: ``[S]`` int32 ``k``: the slot is its worker's ``k``-th (0-based) gradient of
        the round (use for per-slot PRNG keys).
      slot_valid: ``[S]`` bool.
      num_slots: ``[]`` int32 number of valid slots.
      counts: ``[n]`` int32 gradients per worker ``b_i``.
      t_start: ``[]`` float32 round start ``t0``.
      t_collect_end: ``[]`` float32 end of collection ``T``.
      t_end: ``[]`` float32 ``T + comm_time``, the next round's start.
      comm_time: ``[]`` float32 ``kappa_P``, the AllReduce's cost (``max_i kappa_i`` over
        its participants).
      time_wasted: ``[]`` float32 worker-time spent on cancelled or discarded gradients.
      traj_wasted: ``[]`` float32 trajectories' worth of wasted work (times ``H`` = steps).
      comms: ``[]`` int32 vector communications (one AllReduce = 1).
      busy_until: ``[n]`` float32 absolute time each worker is free to start the next
        round's work: it has the new point and (``discard``) has finished its stale gradient.
      overflow: ``[]`` bool Malenia needed more than ``capacity`` gradients from a worker
        (always False for Rennala and sync).
      time_used: ``[]`` float32 worker-time spent on the gradients that count.
      worker_time: ``[]`` float32 the round's share of the total worker time: the time its
        workers spend computing its gradients, counted or not (an in-flight one to its
        cancel at ``T``, or, discarded, to its completion): ``time_used + time_wasted`` under
        constant power, the time up (speed > 0) while computing under a power trace
        (:func:`~jaxnigt.cluster.events.computing_time`; docs/howto/metrics.md).
      compute_end: ``[n]`` float32 when each worker's computing of the round ends (a
        discarded gradient's completion, which may be past ``t_end``); ``t0`` for a worker
        that computes nothing in the round.
    """

    slot_worker: jax.Array
    slot_rank: jax.Array
    slot_valid: jax.Array
    num_slots: jax.Array
    counts: jax.Array
    t_start: jax.Array
    t_collect_end: jax.Array
    t_end: jax.Array
    comm_time: jax.Array
    time_wasted: jax.Array
    traj_wasted: jax.Array
    comms: jax.Array
    busy_until: jax.Array
    overflow: jax.Array
    time_used: jax.Array
    worker_time: jax.Array
    compute_end: jax.Array


class Collection(NamedTuple):
    """What a rule decided (before the shared end-of-round bookkeeping).

    Attributes:
      t_rel: ``[]`` ``T - t0``.
      counts: ``[n]`` int32 gradients used per worker.
      slot_worker, slot_rank, slot_valid: ``[S]`` the slots, valid ones first.
      overflow: ``[]`` bool.
    """

    t_rel: jax.Array
    counts: jax.Array
    slot_worker: jax.Array
    slot_rank: jax.Array
    slot_valid: jax.Array
    overflow: jax.Array


class WorkerTimes(NamedTuple):
    """Per-worker times of a round, relative to ``t0`` (all ``[n]`` float32).

    Attributes:
      off: when the worker starts.
      done: compute time of its used gradients (``off + done`` = its last used completion).
      tau_next: compute time of its next gradient (the one that may be in flight).
      cum_next: ``done + tau_next``: that gradient's end relative to ``off``.
    """

    off: jax.Array
    done: jax.Array
    tau_next: jax.Array
    cum_next: jax.Array


def check_static(name: str, value: int) -> int:
    """A static size.

    Args:
      name: what the size is (named in the error).
      value: the size given.

    Returns:
      ``value`` as an int.

    Raises:
      ValueError: ``value`` is not an integer >= 1.
    """
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def sequential_cumsum(tau: jax.Array) -> jax.Array:
    """Prefix sums along the last axis of ``[n, K]``, accumulated left to right in order.

    ``jnp.cumsum`` may associate differently on some backends; a sequential sum makes the
    float32 completion times (and hence tie-breaking) reproducible by a plain simulator.
    """

    def step(acc, col):
        acc = acc + col
        return acc, acc

    _, out = lax.scan(step, jnp.zeros(tau.shape[0], tau.dtype), tau.T)
    return out.T


def start_offsets(t0: jax.typing.ArrayLike, busy_until: jax.Array) -> jax.Array:
    """``[n]`` float32 start of each worker relative to ``t0``: ``max(busy_until - t0, 0)``."""
    t0 = jnp.asarray(t0, jnp.float32)
    return jnp.maximum(jnp.asarray(busy_until, jnp.float32) - t0, 0.0)


def ends(
    model: ClusterModel,
    t0: jax.Array,
    off: jax.Array,
    work: jax.Array,
    rows: jax.Array | None = None,
) -> jax.Array:
    """When each worker, starting at ``t0 + off``, has done ``work`` (relative to ``t0``).

    Under constant power this is ``off + work``; with a power trace (``model.power``) each
    worker's work clock maps it (:func:`jaxnigt.cluster.power.finish`): the rules decide in
    work time and read their completions in simulated time.

    Args:
      model: the cluster model.
      t0: ``[]`` the round's start.
      off: ``[m]`` each worker's start relative to ``t0``.
      work: ``[m]`` or ``[m, K]`` amounts of work (prefix sums of compute times).
      rows: ``[m]`` the workers ``off`` and ``work`` belong to (None: all ``n``).

    Returns:
      ``work``'s shape: the completion times relative to ``t0``.
    """
    start = off if work.ndim == off.ndim else off[:, None]
    trace = model.trace
    if trace is None:
        return start + work
    trace = trace if rows is None else trace.take(rows)
    return power.finish(trace, t0 + start, work) - t0


def worked(model: ClusterModel, t0: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """``[n]`` the work each worker does between the relative times ``a`` and ``b``
    (``b - a`` under constant power)."""
    trace = model.trace
    if trace is None:
        return b - a
    a, b = jnp.broadcast_arrays(t0 + a, t0 + b)
    return power.work_at(trace, b) - power.work_at(trace, a)


def worker_times(off: jax.Array, tau: jax.Array, cum: jax.Array, counts: jax.Array):
    """:class:`WorkerTimes` from full ``[n, K]`` matrices and the used ``counts``
    (requires ``K > max(counts)`` for the next gradient; it is clipped to column K-1)."""
    prev = jnp.take_along_axis(cum, jnp.maximum(counts - 1, 0)[:, None], axis=1)[:, 0]
    done = jnp.where(counts > 0, prev, 0.0)
    idx = jnp.minimum(counts, tau.shape[1] - 1)[:, None]
    tau_next = jnp.take_along_axis(tau, idx, axis=1)[:, 0]
    cum_next = jnp.take_along_axis(cum, idx, axis=1)[:, 0]
    return WorkerTimes(off, done, tau_next, cum_next)


def allreduce_times(
    model: ClusterModel, counts: jax.Array, t_collect_end: jax.Array, most: int | None = None
) -> tuple[jax.Array, jax.Array]:
    """The AllReduce after a collection that ends at ``t_collect_end``.

    Args:
      model: the cluster model (``kappa``; ``allreduce`` names the participants P).
      counts: ``[n]`` gradients each worker contributed.
      t_collect_end: ``[]`` the end of the collection.
      most: at most this many workers contribute (static; the round's slots); None: n.

    Returns:
      ``(kappa_P, ready)``: the AllReduce's cost and ``[n]`` when each worker has the new
      point (``t_collect_end + kappa_P``, or ``+ max(kappa_P, kappa_i)`` for a worker outside
      P).
    """
    kappa = jnp.asarray(model.kappa, jnp.float32)
    if model.exchanges_wait:
        most = kappa.shape[0] if most is None else most
        return _allreduce_while_down(model, kappa, counts, t_collect_end, most)
    if model.allreduce == "all":
        kappa_p = jnp.max(kappa)
        return kappa_p, jnp.full(kappa.shape, t_collect_end + kappa_p)
    inside = counts >= 1
    kappa_p = jnp.max(jnp.where(inside, kappa, 0.0))
    ready = jnp.where(inside, kappa_p, jnp.maximum(kappa_p, kappa))
    return kappa_p, t_collect_end + ready


def _allreduce_while_down(model, kappa, counts, t_collect_end, most):
    """:func:`allreduce_times` when exchanges wait for down workers: the AllReduce needs
    ``kappa_P`` of time with every participant up; a worker outside it receives the new
    point over its own link (its ``kappa_i`` of up time from ``T``), not before the AllReduce
    ends.  The AllReduce's wait is computed on its participants' rows alone (at most
    ``most`` of them with ``contributors``)."""
    trace, n = model.trace, kappa.shape[0]
    if model.allreduce == "all":
        inside = jnp.ones((n,), bool)
        done = power.joint_exchange_end(trace, inside, t_collect_end, jnp.max(kappa))
        return _waited(done, t_collect_end), jnp.full((n,), done)
    inside = counts >= 1
    kappa_p = jnp.max(jnp.where(inside, kappa, 0.0))
    size = min(n, int(most))
    (rows,) = jnp.nonzero(inside, size=size, fill_value=0)
    member = jnp.arange(size) < jnp.sum(inside)
    done = power.joint_exchange_end(trace.take(rows), member, t_collect_end, kappa_p)
    own = power.exchange_end(trace, jnp.full(kappa.shape, t_collect_end), kappa)
    ready = jnp.where(inside, done, jnp.maximum(done, own))
    return _waited(done, t_collect_end), ready


def _waited(done: jax.Array, t_collect_end: jax.Array) -> jax.Array:
    """The AllReduce's time ``done - T``; 0 for a collection that never ends (``T = inf``,
    whose round then ends at inf, not at ``inf - inf = nan``)."""
    return jnp.where(done > t_collect_end, done - t_collect_end, 0.0)


def _in_flight(
    model: ClusterModel, t0, busy_until, work: WorkerTimes, t_rel, ready, has_inflight, may_continue
):
    """``(wasted time, wasted trajectories, busy_until)`` of each worker, its gradient in
    flight at ``T`` cancelled or discarded (``model.inflight``; see :func:`finish_round`).
    With a power trace, a cancelled gradient wastes the work done on it by ``T``, and a
    gradient on which no work was done by ``T`` (its worker down since it began) is not in
    flight."""
    inflight = model.inflight
    started = work.off < t_rel
    last = ends(model, t0, work.off, work.done)  # its last used completion (or its start)
    # In flight: work was done on its next gradient by T.  Under constant power: it began
    # strictly before T (a worker whose completion is exactly at T would only begin one at
    # T: it has done no work and is free at T).
    busy = started & (last < t_rel) if has_inflight else jnp.zeros_like(started)
    done_by_t = None  # the work done on it by T (with a power trace)
    if has_inflight and model.trace is not None:
        # With a trace, a worker down from then until T has done none: it is not in flight
        # (no waste, not kept busy); it takes the new point when it has it.
        done_by_t = worked(model, t0, last, t_rel)
        busy = busy & (done_by_t > 0)
    if may_continue is not None:
        busy = busy & may_continue
    if model.workers is not None:  # a padded worker never computes (jaxnigt.cluster.padding)
        busy = busy & model.active
    if inflight == "cancel":
        if done_by_t is None:
            done_by_t = worked(model, t0, last, t_rel)
        wasted = jnp.where(busy, done_by_t, 0.0)
        safe_tau = jnp.where(work.tau_next > 0, work.tau_next, 1.0)
        frac = jnp.where(busy & (work.tau_next > 0), jnp.clip(wasted / safe_tau, 0.0, 1.0), 0.0)
        return wasted, frac, ready
    wasted = jnp.where(busy, work.tau_next, 0.0)
    frac = busy.astype(jnp.float32)
    free = jnp.where(started, t0 + last, jnp.asarray(busy_until, jnp.float32))
    free = jnp.where(busy, t0 + ends(model, t0, work.off, work.cum_next), free)
    return wasted, frac, jnp.maximum(ready, free)


def finish_round(
    model: ClusterModel,
    t0: jax.Array,
    busy_until: jax.Array,
    work: WorkerTimes,
    coll: Collection,
    *,
    has_inflight: bool = True,
    may_continue: jax.Array | None = None,
) -> RoundSchedule:
    """Timing, waste and readiness bookkeeping shared by every round schedule.

    Args:
      model: the cluster model (``kappa``, ``inflight``, ``allreduce``).
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker was free to start the round's work.
      work: the workers' times of the round (:func:`worker_times`).
      coll: what the rule decided.
      has_inflight: the rule leaves work in flight at ``T`` (False: the synchronous round).
      may_continue: ``[n]`` bool, the workers that go on computing after their used
        gradients (the m-synchronous round: a worker that delivered its one gradient waits);
        None: every worker. A worker whose next gradient began before ``T`` has it in flight.

    Returns:
      The round's :class:`RoundSchedule`.
    """
    t_rel = coll.t_rel
    t_collect_end = t0 + t_rel
    comm_time, ready = allreduce_times(
        model, coll.counts, t_collect_end, most=coll.slot_worker.shape[0]
    )
    wasted, frac, new_busy = _in_flight(
        model, t0, busy_until, work, t_rel, ready, has_inflight, may_continue
    )
    time_wasted = jnp.sum(wasted).astype(jnp.float32)
    time_used = jnp.sum(work.done).astype(jnp.float32)
    goes_on = jnp.full(work.off.shape, has_inflight)  # after its counted gradients
    goes_on = goes_on if may_continue is None else goes_on & may_continue
    spent, compute_end = _computing(model, t0, work, t_rel, frac, goes_on)
    if spent is None:  # under constant power computing time is work: counted or wasted
        spent = time_used + time_wasted
    return RoundSchedule(
        slot_worker=coll.slot_worker.astype(jnp.int32),
        slot_rank=coll.slot_rank.astype(jnp.int32),
        slot_valid=coll.slot_valid,
        num_slots=jnp.sum(coll.counts).astype(jnp.int32),
        counts=coll.counts.astype(jnp.int32),
        t_start=t0,
        t_collect_end=t_collect_end,
        t_end=t_collect_end + comm_time,
        comm_time=comm_time,
        time_wasted=time_wasted,
        traj_wasted=jnp.sum(frac).astype(jnp.float32),
        comms=jnp.int32(1),
        busy_until=new_busy.astype(jnp.float32),
        overflow=jnp.asarray(coll.overflow, bool),
        time_used=time_used,
        worker_time=spent,
        compute_end=compute_end,
    )


def _computing(model: ClusterModel, t0, work: WorkerTimes, t_rel, frac, goes_on):
    """``(worker time, compute_end)`` of a round (:class:`RoundSchedule`): each worker that
    starts before ``T`` computes from its start to its last counted completion, then, if it
    goes on (``goes_on``), to ``T`` (its in-flight gradient cancelled there; a worker down
    since its last completion has no time up then either) or, discarded (:func:`_in_flight`'s
    ``frac``), to that gradient's completion.  The worker time is None under constant power
    (it is the work there: the caller adds the counted and the wasted).  Only the in-flight
    flags are read of :func:`_in_flight`'s results: the round's own sums are computed as they
    always were."""
    started = work.off < t_rel
    if model.workers is not None:  # a padded worker never computes (jaxnigt.cluster.padding)
        started = started & model.active
    end = ends(model, t0, work.off, work.done)  # its last counted completion (or its start)
    if model.inflight == "cancel":
        end = jnp.where(goes_on, jnp.maximum(end, t_rel), end)
    else:
        end = jnp.where(frac > 0, ends(model, t0, work.off, work.cum_next), end)
    compute_end = jnp.where(started, t0 + end, t0).astype(jnp.float32)
    if model.trace is None:
        return None, compute_end
    computing = computing_time(model, t0 + work.off, jnp.maximum(compute_end, t0 + work.off))
    return jnp.sum(jnp.where(started, computing, 0.0)).astype(jnp.float32), compute_end


def run_rounds(schedule, model: ClusterModel, key: jax.Array, rounds: int) -> RoundSchedule:
    """Consecutive rounds of a schedule from time 0 with every worker free.

    Args:
      schedule: ``(model, key, t0, busy_until) -> RoundSchedule``.
      model: the cluster model (outages drawn from ``key``: :func:`~jaxnigt.cluster.model.
        realize`).
      key: PRNG key; round r is keyed ``fold_in(key, r)``.
      rounds: static number of rounds.

    Returns:
      The schedules stacked along a leading ``[rounds]`` axis.
    """
    model = realize(model, key)[0]

    def one(carry, r):
        t0, busy = carry
        s = schedule(model, jax.random.fold_in(key, r), t0, busy)
        return (s.t_end, s.busy_until), s

    init = (jnp.float32(0.0), jnp.zeros((model.n,), jnp.float32))
    return jax.lax.scan(one, init, jnp.arange(rounds))[1]


def rounds_record(s: RoundSchedule) -> dict[str, jax.Array]:
    """The per-round arrays the clock writes, from :func:`run_rounds`'s stacked schedules.

    Args:
      s: the rounds' stacked :class:`RoundSchedule` (leading axis ``[rounds]``).

    Returns:
      dict: ``t_start``, ``t_collect_end``, ``t_end``, ``grads_used``, ``time_wasted``,
      ``traj_wasted``, ``time_used``, ``comms``, ``overflow``, ``counts`` and ``busy_until``.
    """
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
