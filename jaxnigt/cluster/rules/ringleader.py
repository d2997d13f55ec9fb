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

import jax
import jax.numpy as jnp

from jaxnigt.cluster import aggregators
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
