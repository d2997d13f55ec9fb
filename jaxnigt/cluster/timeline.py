"""The clock's timeline: every worker's intervals of work, from a clock's result (numpy).

A :class:`Timeline` is what ``jaxnigt clock --plot`` draws (:mod:`jaxnigt.cluster.timeline_plot`
draws it; docs/cluster_model.md shows one per worked example): a flat table of bars, one per
interval a worker spent on something the model simulated, with the round (or server update)
it counts in, plus the round ends, the counts ``b_i`` and the power trace.  It is built from
the same arrays the clock writes to its CSV, never from anything else:

* a round rule (:func:`from_rounds`): :func:`~jaxnigt.cluster.simulation.simulate_rule_rounds`
  with ``gradients=True``, whose per-gradient completions are the round's own draws
  (:func:`~jaxnigt.cluster.simulation.round_gradients`).  Worker ``i``'s ``b_i`` counted
  gradients run back to back from its start; the gradient in flight at the collection's end
  ``T`` is wasted up to ``T`` (``inflight: cancel``) or to its completion (``discard``); the
  AllReduce runs from ``T`` until the worker has the next point.  The synchronous round has
  no work in flight and an m-synchronous worker that delivered waits (docs/cluster_model.md).
  A rule of one's own is drawn per gradient when its draws are
  :func:`~jaxnigt.cluster.rules.draw_times` (the per-gradient times must add up to the
  round's ``time_used`` and, under constant power, its ``time_wasted``); otherwise
  :attr:`Timeline.exact` is False and only the round ends, counts and exchanges are kept;
* the per-arrival engines (:func:`from_arrivals`; ``async``, and ``ringmaster`` whose refused
  gradients are wasted): a gradient computes from its dispatch to its compute end, waits for
  the server link, then exchanges until it arrives;
* central inference's per-step clock (:func:`from_seed`): each trajectory, its H steps and
  their exchanges (which the clock does not record one by one) from the end of the worker's
  previous trajectory to its own; the learner's updates end its "rounds".

:func:`clock_timeline` simulates a rule and returns its timeline in one call.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.cluster import power, simulation
from jaxnigt.cluster.model import ClusterModel, realize

#: What a bar is: a counted gradient, wasted work (cancelled, discarded or refused), a wait
#: for the server link, an exchange (an AllReduce, or an arrival's), a trajectory of central
#: inference, a gradient still computing when the clock stops.
KINDS = ("compute", "wasted", "wait", "exchange", "trajectory", "pending")
#: Round rules whose workers leave no work in flight (``none``) or only those that delivered
#: nothing go on (``idle``); every other rule's workers go on computing until ``T``.
IN_FLIGHT = {"sync": "none", "msync": "idle"}


@dataclasses.dataclass(frozen=True)
class Timeline:
    """A clock's bars, one per interval of one worker (all arrays numpy).

    Attributes:
      rule: the clock's rule.
      n: the number of workers.
      worker: ``[B]`` int the bar's worker (0-based, as the CSV's ``b_i`` and ``worker``).
      start: ``[B]`` float64 its start.
      end: ``[B]`` float64 its end.
      kind: ``[B]`` int index into :data:`KINDS`.
      group: ``[B]`` int the round (server update, learner update) it counts in.
      round_end: ``[R]`` float64 each round's end (``t_end``; learner updates' completions;
        empty for the per-arrival engines).
      counts: ``[R, n]`` int each round's ``b_i`` (None: the per-arrival engines).
      power: ``(start, speed)`` ``[n, K]`` the power trace's stretches (None: constant).
      exact: every gradient's bar is drawn (False: a rule whose draws are its own).
    """

    rule: str
    n: int
    worker: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    group: np.ndarray
    round_end: np.ndarray
    counts: np.ndarray | None = None
    power: tuple[np.ndarray, np.ndarray] | None = None
    exact: bool = True

    def bars(self, kind: str) -> dict[str, np.ndarray]:
        """The bars of one kind (:data:`KINDS`): ``worker``, ``start``, ``end``, ``group``."""
        mask = self.kind == KINDS.index(kind)
        return {k: getattr(self, k)[mask] for k in ("worker", "start", "end", "group")}

    @property
    def t_end(self) -> float:
        """The right edge: the last bar's or round's end (0 for an empty timeline)."""
        found = [np.max(x) for x in (self.end, self.round_end) if x.size]
        return float(max(found)) if found else 0.0


def _trace(model: ClusterModel, key: jax.Array):
    """The stretches of the model's power trace, outages drawn from ``key`` as the clock
    drew them (None: constant power)."""
    trace = realize(model, key)[0].trace
    if trace is None:
        return None
    return np.asarray(trace.start, np.float64), np.asarray(trace.speed, np.float64)


def _table(parts: list[tuple]) -> dict[str, np.ndarray]:
    """One flat table from ``(worker, start, end, kind name, group)`` parts; empty bars
    (``end <= start``) and bars that never end are left out."""
    cols = [[], [], [], [], []]
    for worker, start, end, kind, group in parts:
        start, end = np.broadcast_arrays(np.asarray(start, np.float64), end)
        keep = np.isfinite(end) & (end > start)
        cols[0].append(np.broadcast_to(worker, start.shape)[keep])
        cols[1].append(start[keep])
        cols[2].append(np.asarray(end, np.float64)[keep])
        cols[3].append(np.full(int(keep.sum()), KINDS.index(kind)))
        cols[4].append(np.broadcast_to(group, start.shape)[keep])
    names = ("worker", "start", "end", "kind", "group")
    out = {k: np.concatenate(c) if c else np.zeros(0) for k, c in zip(names, cols, strict=True)}
    for k in ("worker", "kind", "group"):
        out[k] = out[k].astype(np.int64)
    return out


def _in_flight(rule: str, model: ClusterModel, key, res: dict, used_end: np.ndarray):
    """Each round's and worker's gradient in flight at ``T``: ``(busy, start, end)`` ``[R, n]``
    (its end: ``T`` when cancelled, its completion when discarded).  In flight: work was done
    on it by ``T`` (under a power trace, a worker down from its start until ``T`` has none)."""
    counts, done = res["counts"], res["grad_end"]
    T = res["t_collect_end"][:, None]
    busy = (res["grad_start"] < T) & (used_end < T) & (counts < done.shape[2])
    trace = realize(model, key)[0].trace
    if trace is not None:  # the work clock between its start and T, as the round measured it
        at = lambda t: np.asarray(power.work_at(trace, jnp.asarray(t.T, jnp.float32))).T
        busy &= at(np.broadcast_to(T, busy.shape)) > at(used_end)
    mode = IN_FLIGHT.get(rule, "all")
    if mode == "none":
        busy = np.zeros_like(busy)
    elif mode == "idle":
        busy &= counts == 0
    if model.inflight == "cancel":
        return busy, used_end, np.broadcast_to(T, busy.shape)
    return busy, used_end, _column(done, counts)


def _column(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``x[r, i, k[r, i]]`` (``k`` clipped to the last column)."""
    k = np.clip(k, 0, x.shape[2] - 1)[..., None]
    return np.take_along_axis(x, k, axis=2)[..., 0]


def _consistent(model: ClusterModel, res: dict, used, busy, start, end) -> bool:
    """The redrawn gradients add up to the rounds' own ``time_used`` (and, under constant
    power, ``time_wasted``): the rule drew what :func:`~jaxnigt.cluster.simulation.
    round_gradients` drew again."""
    close = lambda a, b: np.allclose(a, b, rtol=1e-4, atol=1e-4)
    work = np.where(used, np.nan_to_num(res["grad_work"], posinf=0.0), 0.0).sum(axis=(1, 2))
    if not close(work, res["time_used"]):
        return False
    if model.power is not None:  # a cancelled gradient wastes the work done on it: not its time
        return True
    if model.inflight == "cancel":
        wasted = np.where(busy, end - start, 0.0)
    else:
        wasted = np.where(busy, _column(res["grad_work"], res["counts"]), 0.0)
    return close(wasted.sum(axis=1), res["time_wasted"])


def _rounds_ended(res: dict[str, Any]) -> dict[str, np.ndarray]:
    """``res`` as numpy, cut before the first round that never ends (``t_end = inf``)."""
    res = {k: np.asarray(v, np.int64 if k == "counts" else np.float64) for k, v in res.items()}
    finite = np.isfinite(res["t_end"])
    last = finite.size if finite.all() else int(np.argmin(finite))
    return {k: v[:last] for k, v in res.items()}


def from_rounds(model: ClusterModel, key: jax.Array, res: dict[str, Any], *, rule: str) -> Timeline:
    """The timeline of a round rule's rounds (module docstring).

    Args:
      model: the cluster model the rounds ran on.
      key: their key (it draws the outages of ``outages`` power).
      res: :func:`~jaxnigt.cluster.simulation.simulate_rule_rounds` with ``gradients=True``
        (a round that never ends, ``t_end = inf``, and those after it are left out).
      rule: its rule.

    Returns:
      The :class:`Timeline`.

    Raises:
      ValueError: ``res`` has no per-gradient times.
    """
    if "grad_end" not in res:
        raise ValueError("the rounds hold no per-gradient times: simulate them with gradients=True")
    res = _rounds_ended(res)
    R, n, K = res["grad_end"].shape
    counts, done = res["counts"], res["grad_end"]
    used = np.arange(K)[None, None, :] < counts[..., None]
    begin = np.concatenate([res["grad_start"][..., None], done[..., :-1]], axis=2)
    used_end = np.where(counts > 0, _column(done, counts - 1), res["grad_start"])
    busy, w_start, w_end = _in_flight(rule, model, key, res, used_end)
    exact = _consistent(model, res, used, busy, w_start, w_end)
    rounds, workers = np.arange(R)[:, None], np.arange(n)[None, :]
    parts = [(workers, res["t_collect_end"][:, None], res["ready"], "exchange", rounds)]
    if exact:
        grid = np.zeros(used.shape, np.int64)
        compute = np.where(used, done, -np.inf)
        parts.append(
            (workers[..., None] + grid, begin, compute, "compute", rounds[..., None] + grid)
        )
        parts.append((workers, w_start, np.where(busy, w_end, -np.inf), "wasted", rounds))
    return Timeline(
        rule,
        n,
        **_table(parts),
        round_end=res["t_end"],
        counts=counts,
        power=_trace(model, key),
        exact=exact,
    )


def from_arrivals(
    model: ClusterModel,
    key: jax.Array,
    arrivals: Any,
    *,
    accepted: Any = None,
    pending: tuple[Any, Any] | None = None,
    rule: str = "async",
) -> Timeline:
    """The timeline of the per-arrival engine's arrivals (module docstring).

    Args:
      model: the cluster model they ran on.
      key: their key (it draws the outages of ``outages`` power).
      arrivals: the stacked :class:`~jaxnigt.cluster.events.Arrival` records (an arrival
        that never happens, ``time = inf``, and those after it are left out).
      accepted: ``[J]`` bool the gradients the server applied (None: every one); the others
        are wasted.
      pending: ``(dispatch_time, compute_end[, cancelled])`` ``[n]`` the gradients in flight
        when the last arrival ends (the engine's final state), drawn up to it (a cancelled
        one as wasted); None: none drawn.
      rule: the clock's rule (``async``, ``ringmaster``).

    Returns:
      The :class:`Timeline` (no round ends: the server updates at every arrival).
    """
    a = jax.tree.map(lambda x: np.asarray(x, np.float64), arrivals)
    finite = np.isfinite(a.time)
    J = finite.size if finite.all() else int(np.argmin(finite))
    a = jax.tree.map(lambda x: x[:J], a)
    worker, group = a.worker.astype(np.int64), np.arange(J)
    ok = np.ones(J, bool) if accepted is None else np.asarray(accepted, bool)[:J]
    queued = a.compute_end + a.link_wait
    parts = [
        (worker, a.dispatch_time, np.where(ok, a.compute_end, -np.inf), "compute", group),
        (worker, a.dispatch_time, np.where(ok, -np.inf, a.compute_end), "wasted", group),
        (worker, a.compute_end, queued, "wait", group),
        (worker, queued, a.time, "exchange", group),
    ]
    if pending is not None and J == finite.size and J:
        begun, ends = (np.asarray(x, np.float64) for x in pending[:2])
        last = np.minimum(ends, a.time[-1])
        gone = np.asarray(pending[2], bool) if len(pending) > 2 else np.zeros(model.n, bool)
        parts.append((np.arange(model.n), begun, np.where(gone, -np.inf, last), "pending", J))
        parts.append((np.arange(model.n), begun, np.where(gone, last, -np.inf), "wasted", J))
    empty = np.zeros(0)
    return Timeline(rule, model.n, **_table(parts), round_end=empty, power=_trace(model, key))


def from_seed(model: ClusterModel, key: jax.Array, batches: Any, done: Any) -> Timeline:
    """The timeline of central inference's per-step clock (module docstring).

    Args:
      model: the cluster model it ran on.
      key: its key (it draws the outages of ``outages`` power).
      batches: the learner's batches of trajectories (:class:`~jaxnigt.cluster.step_clock.
        Batch`, stacked ``[updates, B]``); an update whose batch never completes and those
        after it are left out.
      done: ``[updates]`` when each learner update completes.

    Returns:
      The :class:`Timeline`: one bar per trajectory, grouped by the update it counts in.
    """
    end = np.asarray(batches.time, np.float64)
    finite = np.isfinite(end).all(axis=1)
    U = finite.size if finite.all() else int(np.argmin(finite))
    end = end[:U].ravel()
    worker = np.asarray(batches.worker, np.int64)[:U].ravel()
    traj = np.asarray(batches.traj, np.int64)[:U].ravel()
    group = np.repeat(np.arange(U), np.asarray(batches.worker).shape[1])
    order = np.lexsort((traj, worker))
    # a trajectory starts when its worker's previous one ends (its first at time 0)
    prev = np.concatenate([[0.0], end[order][:-1]])
    first = np.concatenate([[True], worker[order][1:] != worker[order][:-1]])
    start = np.empty_like(end)
    start[order] = np.where(first, 0.0, prev)
    counts = np.zeros((U, model.n), np.int64)
    np.add.at(counts, (group, worker), 1)
    parts = [(worker, start, end, "trajectory", group)]
    round_end = np.asarray(done, np.float64)[:U]
    table = _table(parts)
    return Timeline(
        "seed", model.n, **table, round_end=round_end, counts=counts, power=_trace(model, key)
    )


def clock_timeline(
    model: ClusterModel, key: jax.Array, *, rule: str, rounds: int, **sizes
) -> Timeline:
    """Simulates ``rounds`` rounds (arrivals, exchanges, learner updates) of ``rule`` as
    ``jaxnigt clock`` does (:mod:`jaxnigt.cluster.simulation`) and returns their timeline.

    Args:
      model: the cluster model.
      key: the clock's key (``jax.random.key(seed)``).
      rule: a registered round rule, ``async``, ``ringmaster`` or ``seed``.
      rounds: rounds, arrivals (``async``), exchanges (``ringmaster``) or learner updates
        (``seed``).
      **sizes: the rule's sizes: ``M``, ``capacity``, ``per_worker`` (round rules); ``R``,
        ``stops`` (``ringmaster``); ``horizon``, ``batch``, ``inference``, ``learner_time``
        (``seed``).

    Returns:
      The :class:`Timeline`.

    Example::

      model = make_cluster_model(4, h="sqrt", kappa=0.5)
      tl = clock_timeline(model, jax.random.key(0), rule="rennala", rounds=3, M=8)
    """
    if rule == "async":
        final, arr = simulation.simulate_async(model, key, arrivals=rounds)
        pending = (final.dispatch_time, final.compute_end)
        return from_arrivals(model, key, arr, pending=pending)
    if rule == "ringmaster":
        R, stops = sizes.get("R", model.n), sizes.get("stops", False)
        final, ev = simulation.simulate_ringmaster(model, key, arrivals=rounds, R=R, stops=stops)
        c = final.clock
        pending = (c.dispatch_time, c.compute_end, final.cancelled)
        return from_arrivals(
            model, key, ev.arrival, accepted=ev.accepted, pending=pending, rule=rule
        )
    if rule == "seed":
        extra = {k: sizes[k] for k in ("inference", "learner_time") if k in sizes}
        batch = sizes.get("batch") or model.n
        _, batches, done = simulation.simulate_seed(
            model, key, horizon=sizes["horizon"], batch=batch, updates=rounds, **extra
        )
        return from_seed(model, key, batches, done)
    keep = {k: sizes[k] for k in ("capacity", "per_worker") if sizes.get(k) is not None}
    res = simulation.simulate_rule_rounds(
        model, key, rule=rule, M=sizes["M"], rounds=rounds, gradients=True, **keep
    )
    return from_rounds(model, key, res, rule=rule)
