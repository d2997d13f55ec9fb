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

Sources of a trace (the config's ``cluster.power``; :data:`SOURCES`):

* ``constant`` -- ``v = 1`` (the default; no trace at all, so runs are exactly those of the
  constant model).
* ``outages:UP:DOWN`` -- each worker starts up and alternates up (``v = 1``) and down
  (``v = 0``) with exponential durations of means ``UP`` and ``DOWN`` (numbers or profile
  names, per worker), drawn from each run's key (:func:`draw_outages`).  Enough bouts are
  drawn to cover ``cluster.power_horizon`` (default: the budget) except with probability
  below 1e-9; past the drawn bouts the worker stays up.
* ``periodic:PERIOD:LOW`` -- speed 1 for the first half of every period and ``LOW`` for the
  second, worker ``i`` (1-based) shifted by ``(i - 1) / n`` of a period; ``LOW = 0`` is a
  periodic disconnection.  Past the horizon the speed is 1.
* ``trace:FILE`` -- a CSV file of changes, one row ``worker,start,speed`` each (an optional
  header ``worker,start,speed``; worker 1-based, start >= 0, speed >= 0, each worker's rows in
  increasing start; a worker is at speed 1 before its first row, and a worker absent from the
  file at speed 1 throughout).

The trace is data (:class:`PowerTrace`, ``[n, K]`` arrays, ``K`` static); the maps between
simulated time and each worker's work and up clocks are ``searchsorted`` over its ``K``
breakpoints, so a run with a trace costs ``O(log K)`` more per time it maps.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

#: The sources of a computation-power trace, as a spec is written.
SOURCES = ("constant", "outages:UP:DOWN", "periodic:PERIOD:LOW", "trace:FILE")
#: The sources in words (the config's check, its reference and ``jaxnigt clock --power``).
SOURCE_TEXT = "constant, outages:UP:DOWN, periodic:PERIOD:LOW or trace:FILE"
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
        """The rows ``rows`` (an index array: ``[m, K]``; a scalar index: one ``[K]`` row)."""
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


def outage_bouts(up: np.ndarray, down: np.ndarray, horizon: float) -> int:
    """Up-and-down cycles to draw so that every worker's cover ``horizon`` except with
    probability below 1e-9: the cycles' count by then, plus six standard deviations of it
    (a renewal process of exponential up and down times), plus 2."""
    up, down = np.asarray(up, np.float64), np.asarray(down, np.float64)
    mean = up + down
    sd = np.sqrt(horizon * (up**2 + down**2) / mean**3)
    return int(np.max(np.ceil(horizon / mean + 6.0 * sd))) + 2


def periodic_trace(n: int, period: float, low: float, horizon: float) -> PowerTrace:
    """Speed 1 for the first half of each period and ``low`` for the second; worker ``i``
    (0-based) shifted by ``i / n`` of a period; speed 1 once ``horizon`` is covered."""
    half = period / 2
    halves = math.ceil(horizon / half) + 2
    starts, speeds = [], []
    for i in range(n):
        shift = i / n * period
        # Worker i's phase is (t + shift) / period: it changes at k * half - shift.
        k0 = math.floor(shift / half) + 1
        ks = np.arange(k0, k0 + halves)
        first = 1.0 if (shift / period) % 1.0 < 0.5 else low
        after = np.where(ks % 2 == 0, 1.0, low)
        starts.append(np.concatenate([[0.0], ks * half - shift, [(k0 + halves) * half - shift]]))
        speeds.append(np.concatenate([[first], after, [1.0]]))
    return _padded(starts, speeds)


def _padded(starts: list[np.ndarray], speeds: list[np.ndarray]) -> PowerTrace:
    """A trace from per-worker rows of different lengths (each padded with its last stretch)."""
    K = max(len(s) for s in starts)
    start = np.stack([np.concatenate([s, np.full(K - len(s), s[-1])]) for s in starts])
    speed = np.stack([np.concatenate([v, np.full(K - len(v), v[-1])]) for v in speeds])
    return make_trace(start.astype(np.float32), speed.astype(np.float32))


class TraceError(ValueError):
    """A trace file or spec that cannot be used (its message is one line)."""


def read_trace_rows(path: str | Path, n: int) -> dict[int, list[tuple[float, float]]]:
    """The rows of a trace file, checked: ``{worker (0-based): [(start, speed), ...]}``.

    Args:
      path: the CSV file (``worker,start,speed`` rows, an optional header).
      n: the number of workers.

    Returns:
      Each listed worker's changes in file order.

    Raises:
      TraceError: naming the file, its line and what is wrong.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise TraceError(f"power trace file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"power trace file {str(path)!r} cannot be read: {e}") from None
    rows: dict[int, list[tuple[float, float]]] = {}
    for line_no, fields in enumerate(csv.reader(text.splitlines()), start=1):
        where = f"power trace {str(path)!r} line {line_no}"
        if not fields or all(not f.strip() for f in fields):
            continue
        if line_no == 1 and [f.strip().lower() for f in fields] == ["worker", "start", "speed"]:
            continue
        if len(fields) != 3:
            raise TraceError(f"{where}: expected worker,start,speed, got {','.join(fields)!r}")
        try:
            worker_f, start, speed = (float(f) for f in fields)
        except ValueError:
            raise TraceError(f"{where}: not a number in {','.join(fields)!r}") from None
        if not all(math.isfinite(x) for x in (worker_f, start, speed)):
            raise TraceError(f"{where}: values must be finite, got {','.join(fields)!r}")
        if worker_f != int(worker_f) or not 1 <= worker_f <= n:
            raise TraceError(f"{where}: worker must be an integer in 1..{n}, got {fields[0]!r}")
        if start < 0:
            raise TraceError(f"{where}: start must be >= 0, got {start!r}")
        if speed < 0:
            raise TraceError(f"{where}: speed must be >= 0, got {speed!r}")
        worker = int(worker_f) - 1
        previous = rows.setdefault(worker, [])
        if previous and start <= previous[-1][0]:
            raise TraceError(
                f"{where}: worker {worker + 1}'s starts must increase, got {start!r} after "
                f"{previous[-1][0]!r}"
            )
        previous.append((start, speed))
    if not rows:
        raise TraceError(f"power trace file {str(path)!r} has no rows")
    return rows


def file_trace(rows: dict[int, list[tuple[float, float]]], n: int) -> PowerTrace:
    """The trace of checked file rows (:func:`read_trace_rows`)."""
    starts, speeds = [], []
    for i in range(n):
        changes = rows.get(i, [])
        if not changes or changes[0][0] > 0:
            changes = [(0.0, 1.0), *changes]
        starts.append(np.array([c[0] for c in changes], np.float64))
        speeds.append(np.array([c[1] for c in changes], np.float64))
    return _padded(starts, speeds)


def all_down_from(rows: dict[int, list[tuple[float, float]]], n: int) -> float:
    """The time from which every worker is at speed 0 for ever (inf: never)."""
    if len(rows) < n or any(changes[-1][1] > 0 for changes in rows.values()):
        return math.inf
    return max(changes[-1][0] for changes in rows.values())


def parse_power(spec: Any) -> tuple[str, tuple[str, ...]]:
    """``(source, args)`` of a power spec such as ``"outages:50:5"`` (arguments unparsed).

    Raises:
      TraceError: the source is unknown or takes another number of arguments.
    """
    allowed = f"allowed: {SOURCE_TEXT}"
    if not isinstance(spec, str) or not spec.strip():
        raise TraceError(f"power: got {spec!r}; {allowed}")
    source, _, rest = spec.strip().partition(":")
    arity = {"constant": 0, "outages": 2, "periodic": 2, "trace": 1}
    if source not in arity:
        raise TraceError(f"power: unknown source {spec!r}; {allowed}")
    if source == "trace":
        args = (rest,) if rest else ()
    else:
        args = tuple(rest.split(":")) if rest else ()
    if len(args) != arity[source]:
        raise TraceError(f"power: {spec!r} takes {arity[source]} argument(s); {allowed}")
    return source, args


def _number(spec: str, what: str, value: str, *, low: float, open_low: bool) -> float:
    try:
        x = float(value)
    except ValueError:
        raise TraceError(f"power {spec!r}: {what} must be a number, got {value!r}") from None
    bad = not math.isfinite(x) or (x <= low if open_low else x < low)
    if bad:
        raise TraceError(f"power {spec!r}: {what} must be {'>' if open_low else '>='} {low:g}")
    return x


def build(spec: str, n: int, horizon: float | None) -> PowerTrace | Outages | None:
    """The cluster model's ``power`` field from a spec (checked; see the module docstring).

    Args:
      spec: one of :data:`SOURCES` with its arguments.
      n: the number of workers.
      horizon: the simulated time a drawn or periodic trace must cover (the budget); a trace
        file in which every worker is down for ever before it is refused.

    Returns:
      None (constant), an :class:`Outages` to draw per run, or a :class:`PowerTrace`.

    Raises:
      TraceError: one line naming what is wrong.
    """
    from jaxnigt.cluster import timing

    source, args = parse_power(spec)
    if source == "constant":
        return None
    if source == "trace":
        rows = read_trace_rows(args[0], n)
        down = all_down_from(rows, n)
        if horizon is not None and down < horizon:
            raise TraceError(
                f"power trace {args[0]!r}: every worker is at speed 0 from t = {down:g} on, "
                f"before the budget {horizon:g}: no gradient could ever finish after it"
            )
        return file_trace(rows, n)
    if horizon is None or not math.isfinite(horizon):
        raise TraceError(
            f"power {spec!r} needs cluster.power_horizon (or a budget): the time it must cover"
        )
    if source == "periodic":
        period = _number(spec, "PERIOD", args[0], low=0.0, open_low=True)
        low = _number(spec, "LOW", args[1], low=0.0, open_low=False)
        return periodic_trace(n, period, low, horizon)
    means = []
    for what, value in zip(("UP", "DOWN"), args, strict=True):
        if value.strip() in timing.PROFILES:
            means.append(timing.profile_values(value.strip(), n, name=what))
        else:
            means.append(np.full(n, _number(spec, what, value, low=0.0, open_low=True)))
    bouts = outage_bouts(means[0], means[1], horizon)
    return Outages(jnp.asarray(means[0], jnp.float32), jnp.asarray(means[1], jnp.float32), bouts)


def check_spec(spec: Any, n: int, horizon: float | None) -> None:
    """Checks a power spec as :func:`build` does (reads a trace file; draws nothing)."""
    build(spec, n, horizon)


def stretches(power: PowerTrace | Outages | None) -> int:
    """``K``, the stretches per worker a run's trace holds (0: constant power)."""
    if power is None:
        return 0
    if isinstance(power, Outages):
        return 2 * power.bouts + 1
    return power.stretches
