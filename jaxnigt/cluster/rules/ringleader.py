"""Ringleader (Maranjyan & Richtárik, ICLR 2026, arXiv 2509.22860) on the library's rounds
(docs/cluster_model.md, "Ringleader: a round per cycle"), read in one place: its options
(:class:`Options`), its draws (:func:`sample_times`), the rule (:func:`ringleader`, registered
as ``ringleader``; :func:`round_with` for other options), on given times
(:func:`ringleader_from_times`) and its weights (:data:`WEIGHTS`: the mean over workers of
each worker's table entry, the mean of its gradients of the round).

**The paper's method** (Ringleader ASGD).  The server keeps a table, per worker the sum and
the count of the gradients it delivered, and works in cycles.  Phase 1 only buffers: every
arrival joins its worker's entry and the worker goes on at the point it holds, until every
worker has at least one gradient in the table.  The worker whose arrival completes the table
triggers the cycle's first update, ``x <- x - gamma (1/n) sum_i G_i / b_i``, and receives the
new point; then (Phase 2) each other worker's next arrival joins its entry and triggers one
more update and that worker alone receives the new point, so a cycle makes exactly ``n``
updates, one per worker.  The further arrivals of a worker already updated in the cycle are
buffered for the next cycle's table, which replaces the old one when the cycle ends.
Nothing is discarded, no worker waits, and a gradient is at most ``2n - 2`` updates old.

**The library's round** has one point and one update: every gradient of a round is computed
at its broadcast point, and every worker receives the new point at its end.  A Ringleader
round here is a cycle collapsed to one update:

* it ends (option ``end``) once every worker has delivered a gradient of the round
  (``every``, the default: Phase 1's end, the instant of the paper's first update of a
  cycle), or at the end of the paper's cycle (``cycle``: after Phase 1 ends at ``T1``, each
  worker but the *last finisher* -- the one whose first completion is ``T1``, the highest
  index among ties -- completes one more gradient after ``T1``; ``T`` is the last of those);
* workers that delivered go on computing at the round's point (the paper's Phase 1); every
  completion at or before ``T`` counts (completions at the same instant count together),
  at most ``capacity`` per worker (Malenia's, ``hparams.malenia_capacity``, default ``6 M``):
  a worker whose ``capacity + 1``-th completion is at or before ``T`` sets ``overflow``;
* the table (option ``table``) holds each worker's mean of its gradients of the round
  (``mean``, the default: the paper's ``G_i / b_i``) or its latest gradient alone
  (``latest``: IA2SGD's table; the earlier ones are wasted work);
* the work in flight at ``T`` is cancelled or discarded (``model.inflight``), where the
  paper's workers finish it and it enters later updates.  That, and the cycle's ``n - 1``
  further updates, are what one point per round cannot hold.  Nor does a table persist
  across rounds: every worker's entry is filled afresh in every round, so no state is kept.

Every worker contributes, so ``allreduce`` makes no difference.  With ``end = every`` and
``table = mean`` the rule is Malenia's (:mod:`~jaxnigt.cluster.rules.malenia`) at ``M = n``
(``sum_i 1/b_i <= n`` holds as soon as every ``b_i >= 1``) with the same draws: the same
rounds, without a batch to choose.  A padded program's run has its own capacity and workers
(:class:`~jaxnigt.cluster.rounds.RoundSize`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxnigt.cluster import aggregators, events
from jaxnigt.cluster.model import ClusterModel
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    RoundSize,
    check_static,
    ends,
    finish_round,
    keep,
    leading,
    live_rows,
    sequential_cumsum,
    start_offsets,
    worker_times,
)
from jaxnigt.cluster.rules.blocks import padded_times
from jaxnigt.cluster.rules.registry import register_rule

#: How a round ends: ``every`` worker has delivered once (the default), or the paper's
#: ``cycle`` (then each worker but the last finisher once more).
ENDS = ("every", "cycle")
#: What a worker's table entry holds: the ``mean`` of its gradients of the round (the
#: default, the paper's), or its ``latest`` gradient alone.
TABLES = ("mean", "latest")
OVERFLOW = "Ringleader capacity overflow (raise hparams.malenia_capacity)"

#: Ringleader's aggregation: the mean over workers of each worker's table entry (Malenia's
#: weights ``1 / (n b_i)``; with ``table = latest`` every ``b_i`` is 1).
WEIGHTS = aggregators.malenia_weights


@dataclasses.dataclass(frozen=True)
class Options:
    """Ringleader's options (static: part of a program's identity; module docstring).

    Attributes:
      end: one of :data:`ENDS`.
      table: one of :data:`TABLES`.
    """

    end: str = ENDS[0]
    table: str = TABLES[0]

    def __post_init__(self):
        for name, allowed in (("end", ENDS), ("table", TABLES)):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(
                    f"ringleader {name}: got {value!r}; expected one of {list(allowed)}"
                )


#: The registered rule's options: ``end = every``, ``table = mean``.
DEFAULT = Options()


def sample_times(model: ClusterModel, key: jax.Array, size: RoundSize) -> jax.Array:
    """The round's compute times ``[n, capacity + 1]``, column k each worker's (k+1)-th
    gradient, drawn as Malenia draws them (a padded run's are its unpadded run's draw:
    :func:`~jaxnigt.cluster.rules.blocks.padded_times`).

    Args:
      model: the cluster model.
      key: the round's PRNG key.
      size: the round's sizes (``capacity``).

    Returns:
      ``[n, size.capacity + 1]`` float32.
    """
    num = size.capacity + 1
    return padded_times(model, key, (model.n, num), size.value("capacity") + 1)


def round_with(options: Options):
    """The round rule of ``options``.

    Args:
      options: the options.

    Returns:
      ``rule(model, key, t0, busy_until, size) -> RoundSchedule``.
    """

    def rule(model, key, t0, busy_until, size: RoundSize) -> RoundSchedule:
        return _round(model, sample_times(model, key, size), t0, busy_until, size, options)

    return rule


@register_rule(
    "ringleader", pads=True, cluster_options=("inflight", "down_exchange"), overflow=OVERFLOW
)
def ringleader(
    model: ClusterModel, key: jax.Array, t0: jax.typing.ArrayLike, busy_until, size: RoundSize
) -> RoundSchedule:
    """Ringleader: every worker delivers, then one update on the mean of per-worker means.

    The registered rule's options are :data:`DEFAULT`; :func:`round_with` makes the rule of
    others.

    Args:
      model: the cluster model.
      key: the round's PRNG key (:func:`sample_times`).
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      size: the round's sizes (``capacity``).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    return round_with(DEFAULT)(model, key, t0, busy_until, size)


def ringleader_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    capacity: int,
    options: Options = DEFAULT,
) -> RoundSchedule:
    """A round from given compute times ``tau`` ``[n, K >= capacity + 1]`` (module docstring).

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times, column k each worker's (k+1)-th gradient.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      capacity: static most gradients per worker.
      options: the options.

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: ``capacity`` is no size or ``tau`` has too few columns.
    """
    size = RoundSize(M=1, capacity=check_static("capacity", capacity))
    if tau.shape[1] < size.capacity + 1:
        raise ValueError(
            f"ringleader (capacity + 1) needs {size.capacity + 1} compute times per worker, "
            f"got {tau.shape[1]}"
        )
    return _round(model, jnp.asarray(tau)[:, : size.capacity + 1], t0, busy_until, size, options)


def _round(model: ClusterModel, tau, t0, busy_until, size: RoundSize, options: Options):
    cap, run_cap = size.capacity, size.value("capacity")
    t0 = jnp.asarray(t0, jnp.float32)
    tau = tau[:, : cap + 1].astype(jnp.float32)
    off, cum = start_offsets(t0, busy_until), sequential_cumsum(tau)
    comp = ends(model, t0, off, cum)  # [n, capacity + 1] completions, relative to t0
    live = live_rows(model)
    # a padded run's gradients past its own capacity are not its events
    used = keep(comp[:, :cap], leading(cap, run_cap), jnp.inf, axis=1)
    beyond = keep(comp[:, run_cap], live, jnp.inf)  # each worker's (capacity + 1)-th
    first = keep(comp[:, 0], live, -jnp.inf)
    t_rel = jnp.max(first)  # every worker has delivered once: Phase 1 ends
    if options.end == "cycle":
        t_rel = _cycle_end(comp, first, t_rel, run_cap, live)
    counts = jnp.sum(used <= t_rel, axis=1).astype(jnp.int32)
    flat = used.reshape(-1)
    if options.table == "latest":  # each worker's last counted gradient alone
        last = (jnp.arange(cap)[None, :] == counts[:, None] - 1).reshape(-1)
        order = jnp.argsort(jnp.where(last, flat, jnp.inf), stable=True)
        valid, table = last[order], jnp.minimum(counts, 1)
    else:
        order = jnp.argsort(flat, stable=True)
        valid, table = flat[order] <= t_rel, counts
    coll = Collection(
        t_rel=t_rel,
        counts=table,
        slot_worker=order // cap,
        slot_rank=order % cap,
        slot_valid=valid,
        overflow=jnp.any(beyond <= t_rel),
    )
    sched = finish_round(model, t0, busy_until, worker_times(off, tau, cum, counts), coll)
    if options.table == "mean":
        return sched
    # the earlier gradients of a worker were computed and are not used: wasted work
    latest = jnp.take_along_axis(tau, jnp.maximum(counts - 1, 0)[:, None], axis=1)[:, 0]
    kept = jnp.sum(jnp.where(counts > 0, latest, 0.0)).astype(jnp.float32)
    return sched._replace(
        time_used=kept,
        time_wasted=sched.time_wasted + (sched.time_used - kept),
        traj_wasted=sched.traj_wasted + jnp.sum(counts - table).astype(jnp.float32),
    )


def _cycle_end(comp, first, t1, run_cap, live) -> jax.Array:
    """The end of the paper's cycle (relative to ``t0``): the last of the first completions
    after Phase 1's end ``t1`` of every worker but the last finisher (the highest index whose
    first completion is ``t1``); ``t1`` for a single worker.  A worker with no completion
    after ``t1`` within its capacity + 1 gradients counts its (capacity + 1)-th (at or
    before ``t1``: the round overflows)."""
    n = comp.shape[0]
    index = jnp.arange(n)
    finisher = jnp.max(jnp.where(first == t1, index, -1))
    drawn = keep(comp, leading(comp.shape[1], run_cap + 1), jnp.inf, axis=1)
    after = jnp.min(jnp.where(drawn > t1, drawn, jnp.inf), axis=1)
    nxt = jnp.where(jnp.isfinite(after), after, comp[:, run_cap])
    others = keep(index != finisher, live, False)
    return jnp.maximum(t1, jnp.max(jnp.where(others, nxt, -jnp.inf)))


# ------------------------------------------------------- the paper's cycles, per exchange
#
# Ringleader ASGD itself runs on the event engine (:mod:`jaxnigt.cluster.events`: every
# worker computes, exchanges with the server over its link and starts its next gradient at
# once), not on rounds.  The rule below decides, from the arrival order alone, what each
# exchange does to the table and the point; :data:`TABLE` keeps the gradients.  The docs'
# "Ringleader ASGD: the paper's cycles" states it; tests/reference_ringleader.py checks it.


class CycleState(NamedTuple):
    """The cycle rule's state over the event engine's.

    Attributes:
      clock: the :class:`~jaxnigt.cluster.events.AsyncState`; its ``version`` counts server
        updates, so an arrival's ``staleness`` is the updates since its worker's point.
      events: ``[]`` int32 exchanges processed (the key counter: ``fold_in(key, events)``).
      dispatch_event: ``[n]`` int32 ``events`` when each worker started its gradient.
      filled: ``[n]`` bool: the worker has a gradient in the cycle's table.
      filled_next: ``[n]`` bool: ... in the next cycle's table.
      pending: ``[n]`` bool: in Phase 2, the workers whose update of the cycle is still due.
      phase2: ``[]`` bool: the cycle's first update was made.
      cycles: ``[]`` int32 cycles completed.
    """

    clock: events.AsyncState
    events: jax.Array
    dispatch_event: jax.Array
    filled: jax.Array
    filled_next: jax.Array
    pending: jax.Array
    phase2: jax.Array
    cycles: jax.Array


class CycleEvent(NamedTuple):
    """What one exchange does to the table (all ``[]``; :attr:`events.Event.extra`).

    Attributes:
      into_next: bool: its gradient joins the next cycle's table (its worker's update of the
        cycle was made), else the cycle's.
      rotate: bool: its update is the cycle's last: the next table becomes the cycle's.
      takes_point: bool: its worker takes the server's point (else keeps its own).
      cycle: int32 the cycle it belongs to.
    """

    into_next: jax.Array
    rotate: jax.Array
    takes_point: jax.Array
    cycle: jax.Array


#: Which point a worker computes at after an exchange that is not its update: ``held``, the
#: one it holds (the paper: a worker receives a new point at most once per cycle, at its
#: update), or ``current``, the server's (the authors' simulation code re-dispatches every
#: arrival with the current point).
POINTS = ("held", "current")


def cycle_init(clock: events.AsyncState) -> CycleState:
    """The cycle rule's state from the engine's initial one.

    Args:
      clock: the engine's initial state (:func:`~jaxnigt.cluster.events.async_init`).

    Returns:
      The :class:`CycleState`: both tables empty, Phase 1, no exchange made.
    """
    n = clock.compute_end.shape[0]
    no = jnp.zeros((n,), bool)
    start = jnp.zeros((n,), jnp.int32)
    return CycleState(clock, jnp.int32(0), start, no, no, no, jnp.bool_(False), jnp.int32(0))


def cycle_next(
    model: ClusterModel, key: jax.Array, state: CycleState, *, point: str = "held"
) -> tuple[CycleState, events.Event]:
    """The next exchange of Ringleader ASGD.

    Phase 1: the gradient joins its worker's entry of the cycle's table; the exchange that
    fills the table (every worker has one) is the cycle's first update, and Phase 2 begins
    with every other worker pending.  Phase 2: a pending worker's gradient joins the cycle's
    table and is one more update; a worker already updated puts its gradient in the next
    cycle's table.  The update that leaves no worker pending ends the cycle: the next
    table becomes the cycle's, and the next one starts empty.  Nothing is discarded.

    Args:
      model: the cluster model.
      key: draws the worker's next compute time (callers pass ``fold_in(run_key,
        state.events)``: the exchanges are :func:`~jaxnigt.cluster.events.async_next`'s,
        key for key).
      state: the rule's state.
      point: one of :data:`POINTS` (static).

    Returns:
      ``(state, event)``; the event's ``extra`` is its :class:`CycleEvent`.

    Raises:
      ValueError: ``point`` is not one of :data:`POINTS`.
    """
    if point not in POINTS:
        raise ValueError(f"ringleader point: got {point!r}; expected one of {list(POINTS)}")
    s = state.clock
    n = s.compute_end.shape[0]
    live = live_rows(model)
    live = jnp.ones((n,), bool) if live is None else live
    w = events.next_exchange(model, s)[0]
    into_next = state.phase2 & ~state.pending[w]
    filled = state.filled | ((jnp.arange(n) == w) & ~into_next)
    filled_next = state.filled_next | ((jnp.arange(n) == w) & into_next)
    completes = ~state.phase2 & jnp.all(filled | ~live)
    due = state.phase2 & state.pending[w]
    accepted = completes | due
    pending = jnp.where(completes, live & (jnp.arange(n) != w), state.pending)
    pending = pending & ~((jnp.arange(n) == w) & due)
    rotate = accepted & ~jnp.any(pending)
    takes_point = accepted if point == "held" else jnp.bool_(True)
    clock, arrival = events.exchange(model, key, s, accepted.astype(jnp.int32))
    kept = jnp.where(takes_point, clock.dispatch_version[w], s.dispatch_version[w])
    clock = clock._replace(dispatch_version=clock.dispatch_version.at[w].set(kept))
    count = state.events + 1
    new = CycleState(
        clock=clock,
        events=count,
        dispatch_event=state.dispatch_event.at[w].set(count),
        filled=jnp.where(rotate, filled_next, filled),
        filled_next=filled_next & ~rotate,
        pending=pending,
        phase2=(state.phase2 | completes) & ~rotate,
        cycles=state.cycles + rotate.astype(jnp.int32),
    )
    extra = CycleEvent(into_next, rotate, takes_point, state.cycles)
    event = events.Event(arrival, accepted, jnp.float32(0.0), state.dispatch_event[w], extra)
    return new, event


class Table(NamedTuple):
    """The server's gradient table: per worker the sum and count of its gradients, of the
    cycle (``sums``, ``counts``) and of the next (``next_sums``, ``next_counts``).

    Attributes:
      sums, next_sums: pytrees of ``[n, ...]`` (the params' shapes).
      counts, next_counts: ``[n]`` float32.
      live: ``[n]`` bool the run's workers (a padded program's rows beyond are not).
    """

    sums: Any
    counts: jax.Array
    next_sums: Any
    next_counts: jax.Array
    live: jax.Array


def table_init(params, model: ClusterModel) -> Table:
    """The empty table of a run.

    Args:
      params: the policy's parameters (their shapes and dtypes).
      model: the run's cluster record (its workers; a padded record's live rows).

    Returns:
      The :class:`Table`, every entry empty.
    """
    n = model.n
    zeros = jax.tree.map(lambda p: jnp.zeros((n, *p.shape), p.dtype), params)
    live = live_rows(model)
    live = jnp.ones((n,), bool) if live is None else live
    return Table(zeros, jnp.zeros((n,), jnp.float32), zeros, jnp.zeros((n,), jnp.float32), live)


def table_put(table: Table, worker: jax.Array, grad, extra: CycleEvent):
    """The gradient of ``worker`` into its entry (the cycle's or the next's), the direction
    ``(1/n) sum_i G_i / b_i`` over the cycle's table, and the table after a cycle's end.

    Args:
      table: the table.
      worker: ``[]`` int32 the exchange's worker.
      grad: its gradient (the params' pytree).
      extra: the exchange's :class:`CycleEvent`.

    Returns:
      ``(table, direction, takes_point)`` (:class:`~jaxnigt.algorithms.engines.async_engine.
      ServerTable`).
    """
    one = (jnp.arange(table.counts.shape[0]) == worker).astype(jnp.float32)
    now, later = one * (1.0 - extra.into_next), one * extra.into_next
    add = lambda sums, by: jax.tree.map(
        lambda S, g: S + by.reshape((-1,) + (1,) * g.ndim).astype(S.dtype) * g[None], sums, grad
    )
    sums, counts = add(table.sums, now), table.counts + now
    next_sums, next_counts = add(table.next_sums, later), table.next_counts + later
    weights = table.live / (jnp.sum(table.live) * jnp.maximum(counts, 1.0))
    direction = jax.tree.map(lambda S: jnp.tensordot(weights.astype(S.dtype), S, 1), sums)
    r = extra.rotate
    zero = lambda x: jax.tree.map(jnp.zeros_like, x)
    pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(r, x, y), a, b)
    new = Table(
        sums=pick(next_sums, sums),
        counts=jnp.where(r, next_counts, counts),
        next_sums=pick(zero(next_sums), next_sums),
        next_counts=jnp.where(r, 0.0, next_counts),
        live=table.live,
    )
    return new, direction, extra.takes_point
