"""Computation power: workers whose speed changes over time and who disconnect.

Worker ``i`` computes at a power ``v_i(t) >= 0`` that is piecewise constant: speed
``speed[i, j]`` from ``start[i, j]`` on (``start[i, 0] = 0``, starts increasing; the last speed
holds for ever).  Its *work clock* is ``W_i(t) = int_0^t v_i``: a gradient whose compute time
under constant power would be ``tau`` (:func:`jaxnigt.cluster.model.sample_compute_times`) and
that begins at ``s`` ends at the first ``T`` with ``W_i(T) = W_i(s) + tau``; stretches at speed 0
are skipped.  ``v = 1`` is the constant model exactly, and with ``v = c`` every compute time is
``tau / c``.

A worker at speed 0 is *down*: it neither computes nor exchanges (the cluster model's
``down_exchange`` choice: ``wait``, the default).  Its *up clock* ``U_i(t)`` is the time it
has been up (speed > 0) by ``t``; an exchange of length ``kappa`` begun at ``s`` needs
``kappa`` of up time, so it ends at the first ``T >= s`` with ``U_i(T) = U_i(s) + kappa``
(:func:`exchange_end`; an exchange of length 0 is instantaneous, like the free scalar
signals).  An AllReduce over a set of workers needs ``kappa_P`` of time during which every
member is up (:func:`joint_exchange_end`): it starts when all are up and pauses whenever one
goes down.  With ``down_exchange: free`` exchanges ignore the power (only computing stops).

Where a trace comes from (the config's ``cluster.power``) is
:mod:`jaxnigt.cluster.power_sources`; :func:`draw_outages` draws a run's outages from its key.

The trace is data (:class:`PowerTrace`, ``[n, K]`` arrays, ``K`` static); the maps between
simulated time and each worker's work and up clocks are ``searchsorted`` over its ``K``
breakpoints, so a run with a trace costs ``O(log K)`` more per time it maps.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

#: The tag folded into a run's key to draw its outages (no other draw uses it).
OUTAGE_TAG = 0x706F77


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PowerTrace:
    """Piecewise-constant computation powers of ``n`` workers (all ``[n, K]`` float32).

    Attributes:
      start: when each stretch starts (``start[:, 0] = 0``, non-decreasing; a row with fewer
        than ``K`` stretches repeats its last start and speed).
      speed: the power of each stretch (the last one holds for ever).
      work: ``W_i(start)``: the work done by each stretch's start.
      up: ``U_i(start)``: the time up (speed > 0) by each stretch's start.
      work_end: ``W_i`` at each stretch's end (the last stretch: inf if its speed is > 0).
      up_end: ``U_i`` at each stretch's end (likewise).
      up_next: the start of the first later stretch with speed > 0 (inf: none).
      down_next: the start of the first later stretch with speed 0 (inf: none).
    """

    start: jax.Array
    speed: jax.Array
    work: jax.Array
    up: jax.Array
    work_end: jax.Array
    up_end: jax.Array
    up_next: jax.Array
    down_next: jax.Array

    @property
    def stretches(self) -> int:
        """``K``, the stretches each worker's row holds (static)."""
        return self.start.shape[-1]

    def take(self, rows: jax.Array) -> PowerTrace:
        """Some workers' rows.

        Args:
          rows: worker indices (an ``[m]`` array, or a scalar index).

        Returns:
          The trace of those workers: ``[m, K]`` arrays, or one worker's ``[K]`` row.
        """
        return jax.tree.map(lambda x: x[rows], self)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Outages:
    """Two-state availability to draw per run (:func:`draw_outages`).

    Attributes:
      up: ``[n]`` float32 mean time up between outages.
      down: ``[n]`` float32 mean length of an outage.
      bouts: static up-and-down cycles drawn per worker.
    """

    up: jax.Array
    down: jax.Array
    bouts: int = dataclasses.field(default=1, metadata={"static": True})


def make_trace(start: Any, speed: Any) -> PowerTrace:
    """A :class:`PowerTrace` from its stretches (works on concrete and traced arrays).

    Args:
      start: ``[n, K]`` stretch starts, ``start[:, 0] = 0``, non-decreasing.
      speed: ``[n, K]`` their speeds, ``>= 0``.

    Returns:
      The trace, its clocks at every start precomputed.
    """
    start = jnp.asarray(start, jnp.float32)
    speed = jnp.asarray(speed, jnp.float32)
    length = start[:, 1:] - start[:, :-1]
    zero = jnp.zeros((*start.shape[:1], 1), jnp.float32)
    work = jnp.concatenate([zero, jnp.cumsum(speed[:, :-1] * length, axis=1)], axis=1)
    up = jnp.concatenate([zero, jnp.cumsum(jnp.where(speed[:, :-1] > 0, length, 0.0), axis=1)], 1)
    inf = jnp.full((start.shape[0], 1), jnp.inf, jnp.float32)
    up_from = lax.cummin(jnp.where(speed > 0, start, jnp.inf), axis=1, reverse=True)
    down_from = lax.cummin(jnp.where(speed > 0, jnp.inf, start), axis=1, reverse=True)
    moving = speed[:, -1:] > 0
    work_end = jnp.concatenate([work[:, 1:], jnp.where(moving, inf, work[:, -1:])], axis=1)
    up_end = jnp.concatenate([up[:, 1:], jnp.where(moving, inf, up[:, -1:])], axis=1)
    up_next = jnp.concatenate([up_from[:, 1:], inf], axis=1)
    down_next = jnp.concatenate([down_from[:, 1:], inf], axis=1)
    return PowerTrace(start, speed, work, up, work_end, up_end, up_next, down_next)


#: Bytes of a trace per worker and stretch (its eight float32 arrays).
BYTES_PER_STRETCH = 8 * 4


# ------------------------------------------------------------------ one worker's clocks
#
# The functions below take one worker's row (``[K]`` arrays) and times of any shape; the
# public ones map them over the workers.


def _stretch(row: PowerTrace, t: jax.Array) -> jax.Array:
    """The stretch each time ``t`` falls in (the last one whose start is ``<= t``)."""
    j = jnp.searchsorted(row.start, t, side="right") - 1
    return jnp.clip(j, 0, row.stretches - 1)


def _clock_at(at_start: jax.Array, rate: jax.Array, row: PowerTrace, t: jax.Array) -> jax.Array:
    j = _stretch(row, t)
    # A stopped clock stays put, also at t = inf (a worker down for good: 0 * inf is nan).
    return at_start[j] + jnp.where(rate[j] > 0, rate[j] * (t - row.start[j]), 0.0)


def _first_time(at_start, end, rate, row: PowerTrace, value: jax.Array):
    """The first time a clock (``at_start`` at each start, ``end`` at each stretch's end,
    slope ``rate``) reaches ``value`` (``> 0``); inf when it never does."""
    j = jnp.minimum(jnp.searchsorted(end, value, side="left"), row.stretches - 1)
    safe = jnp.where(rate[j] > 0, rate[j], 1.0)
    t = row.start[j] + (value - at_start[j]) / safe
    return jnp.where(value > end[-1], jnp.inf, t)


def _finish(row: PowerTrace, s: jax.Array, tau: jax.Array) -> jax.Array:
    target = _clock_at(row.work, row.speed, row, s) + tau
    end = _first_time(row.work, row.work_end, row.speed, row, target)
    return jnp.where(tau > 0, jnp.maximum(s, end), s)


def _next_up(row: PowerTrace, t: jax.Array) -> jax.Array:
    j = _stretch(row, t)
    return jnp.where(row.speed[j] > 0, t, row.up_next[j])


def _next_down(row: PowerTrace, t: jax.Array) -> jax.Array:
    """The next time at or after ``t`` the worker is down (``t`` itself when it is)."""
    j = _stretch(row, t)
    return jnp.where(row.speed[j] > 0, row.down_next[j], t)


def _exchange_end(row: PowerTrace, s: jax.Array, kappa: jax.Array) -> jax.Array:
    rate = (row.speed > 0).astype(jnp.float32)
    target = _clock_at(row.up, rate, row, s) + kappa
    end = _first_time(row.up, row.up_end, rate, row, target)
    return jnp.where(kappa > 0, jnp.maximum(s, end), s)


def _rows(fn, trace: PowerTrace, *args: jax.Array) -> jax.Array:
    """``fn`` on each worker's row: ``trace`` ``[n, K]`` and ``args`` ``[n, ...]``, or one row
    ``[K]`` and args of any shape."""
    if trace.start.ndim == 1:
        return fn(trace, *args)
    return jax.vmap(fn)(trace, *args)


def work_at(trace: PowerTrace, t: jax.Array) -> jax.Array:
    """``W_i(t)``: each worker's work by time ``t`` (``[n, ...]``)."""
    return _rows(lambda r, x: _clock_at(r.work, r.speed, r, x), trace, t)


def up_at(trace: PowerTrace, t: jax.Array) -> jax.Array:
    """``U_i(t)``: each worker's time up (speed > 0) by time ``t``.

    Args:
      trace: ``[n, K]`` (or one row ``[K]``).
      t: ``[n, ...]`` times (any shape for one row).

    Returns:
      ``t``'s shape.
    """
    return _rows(lambda r, x: _clock_at(r.up, (r.speed > 0).astype(jnp.float32), r, x), trace, t)


def finish(trace: PowerTrace, s: jax.Array, tau: jax.Array) -> jax.Array:
    """When work ``tau`` begun at ``s`` is done: the first ``T >= s`` with ``W(T) = W(s) +
    tau`` (``s`` itself for ``tau = 0``; inf if the worker never does it).

    Args:
      trace: ``[n, K]`` (or one row ``[K]``).
      s: ``[n, ...]`` start times.
      tau: ``[n, ...]`` work (compute times under constant power), broadcast against ``s``.

    Returns:
      The end times, ``s``'s shape broadcast with ``tau``'s.
    """
    s, tau = jnp.broadcast_arrays(jnp.asarray(s, jnp.float32), jnp.asarray(tau, jnp.float32))
    return _rows(_finish, trace, s, tau)


def next_up(trace: PowerTrace, t: jax.Array) -> jax.Array:
    """The first time at or after ``t`` each worker is up (inf: never again)."""
    return _rows(_next_up, trace, t)


def exchange_end(trace: PowerTrace, s: jax.Array, kappa: jax.Array) -> jax.Array:
    """When an exchange of length ``kappa`` begun at ``s`` ends: ``kappa`` of the worker's up
    time after ``s`` (an exchange of length 0 is instantaneous, like a scalar signal).

    Args:
      trace: ``[n, K]`` (or one row ``[K]``).
      s: ``[n, ...]`` start times.
      kappa: ``[n, ...]`` exchange lengths, broadcast against ``s``.

    Returns:
      The end times.
    """
    s, kappa = jnp.broadcast_arrays(jnp.asarray(s, jnp.float32), jnp.asarray(kappa, jnp.float32))
    return _rows(_exchange_end, trace, s, kappa)


def joint_exchange_end(
    trace: PowerTrace, members: jax.Array, s: jax.Array, kappa: jax.Array
) -> jax.Array:
    """When an AllReduce over ``members`` begun at ``s`` ends: ``kappa`` of time during which
    every member is up (it waits until all are up and pauses while one is down); one of length
    0 is instantaneous.

    Args:
      trace: the members' rows, ``[m, K]`` (gather them with :meth:`PowerTrace.take`: the cost
        is that of ``m`` rows).
      members: ``[m]`` bool, which rows take part (no member: ``s``).
      s: ``[]`` when it may start.
      kappa: ``[]`` its length.

    Returns:
      ``[]`` its end (inf when the members are never all up again).
    """
    s = jnp.asarray(s, jnp.float32)
    kappa = jnp.asarray(kappa, jnp.float32)
    m = trace.start.shape[0]

    def all_up(t):
        # The first time >= t every member is up: a fixed point of "the latest next-up".
        def body(c):
            u, _ = c
            nxt = jnp.max(jnp.where(members, next_up(trace, jnp.full((m,), u)), -jnp.inf))
            nxt = jnp.maximum(nxt, u)
            return nxt, (nxt > u) & jnp.isfinite(nxt)

        return lax.while_loop(lambda c: c[1], body, (t, jnp.bool_(True)))[0]

    def body(c):
        t, left, _ = c
        a = all_up(t)
        downs = jax.vmap(_next_down)(trace, jnp.full((m,), a))
        d = jnp.min(jnp.where(members, downs, jnp.inf))
        fits = (d - a >= left) | ~jnp.isfinite(a)
        end = jnp.where(fits, a + left, d)
        return end, jnp.where(fits, 0.0, left - (d - a)), fits

    trivial = (kappa <= 0) | ~jnp.any(members)
    end, _, _ = lax.while_loop(lambda c: ~c[2], body, (s, kappa, trivial))
    return jnp.where(trivial, s, end)


# ------------------------------------------------------------------ sources


def draw_outages(outages: Outages, key: jax.Array) -> PowerTrace:
    """One run's outages: every worker up at 0, then alternately down and up for
    exponential times of means ``outages.down`` and ``outages.up``; up after the last bout.

    Args:
      outages: the means and the static number of bouts.
      key: the run's outage key (every draw comes from it).

    Returns:
      The :class:`PowerTrace` (``K = 2 * bouts + 1``).
    """
    n, bouts = outages.up.shape[0], outages.bouts
    means = jnp.stack([outages.up, outages.down], axis=1)  # [n, 2]
    means = jnp.tile(means, (1, bouts))  # up, down, up, down, ...
    lengths = means * jax.random.exponential(key, (n, 2 * bouts), jnp.float32)
    start = jnp.concatenate([jnp.zeros((n, 1), jnp.float32), jnp.cumsum(lengths, axis=1)], 1)
    speed = jnp.tile(jnp.array([1.0, 0.0], jnp.float32), (n, bouts))
    speed = jnp.concatenate([speed, jnp.ones((n, 1), jnp.float32)], axis=1)
    return make_trace(start, speed)


def stretches(power: PowerTrace | Outages | None) -> int:
    """``K``, the stretches per worker a run's trace holds (0: constant power)."""
    if power is None:
        return 0
    if isinstance(power, Outages):
        return 2 * power.bouts + 1
    return power.stretches
