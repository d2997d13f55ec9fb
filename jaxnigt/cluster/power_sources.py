"""Where a computation-power trace comes from: the config's ``cluster.power`` spec, checked
and laid out as a :class:`jaxnigt.cluster.power.PowerTrace` (or, for drawn outages, the means
each run draws from; :mod:`jaxnigt.cluster.power` holds the trace and its clocks).

The sources (:data:`SOURCES`):

* ``constant`` -- ``v = 1`` (the default; no trace at all, so runs are exactly those of the
  constant model).
* ``outages:UP:DOWN`` -- each worker starts up and alternates up (``v = 1``) and down
  (``v = 0``) with exponential durations of means ``UP`` and ``DOWN`` (numbers or profile
  names, per worker), drawn from each run's key (:func:`jaxnigt.cluster.power.draw_outages`).
  Enough bouts are drawn to cover ``cluster.power_horizon`` (default: the budget) except with
  probability below 1e-9; past the drawn bouts the worker stays up.
* ``periodic:PERIOD:LOW`` -- speed 1 for the first half of every period and ``LOW`` for the
  second, worker ``i`` (1-based) shifted by ``(i - 1) / n`` of a period; ``LOW = 0`` is a
  periodic disconnection.  Past the horizon the speed is 1.
* ``trace:FILE`` -- a CSV file of changes, one row ``worker,start,speed`` each (UTF-8, a
  byte-order mark allowed; an optional header ``worker,start,speed``; worker 1-based,
  start >= 0, speed >= 0, each worker's rows in increasing start; a worker is at speed 1 before
  its first row, and a worker absent from the file at speed 1 throughout).  The trace is
  float32: a start, a speed or a worker's work by a start (``W_i``, :mod:`jaxnigt.cluster.
  power`) beyond :data:`FLOAT32_MAX` is refused.

Every check raises :class:`TraceError` with one line naming the spec or the file and its line.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from jaxnigt.cluster import timing
from jaxnigt.cluster.power import Outages, PowerTrace, make_trace

#: The sources of a computation-power trace, as a spec is written.
SOURCES = ("constant", "outages:UP:DOWN", "periodic:PERIOD:LOW", "trace:FILE")
#: The sources in words (the config's check, its reference and ``jaxnigt clock --power``).
SOURCE_TEXT = "constant, outages:UP:DOWN, periodic:PERIOD:LOW or trace:FILE"
#: The largest float32: a trace's arrays are float32, so a larger value would be ``inf``.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: A trace file's header.
HEADER = ["worker", "start", "speed"]


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
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark is no part of line 1
    except FileNotFoundError:
        raise TraceError(f"power trace file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"power trace file {str(path)!r} cannot be read: {e}") from None
    rows: dict[int, list[tuple[float, float]]] = {}
    work: dict[int, float] = {}  # each worker's W_i at its latest start
    for line_no, fields in enumerate(csv.reader(text.splitlines()), start=1):
        where = f"power trace {str(path)!r} line {line_no}"
        if not fields or all(not f.strip() for f in fields):
            continue
        if line_no == 1 and _is_header(fields):
            if [f.strip().lower() for f in fields] != HEADER:
                raise TraceError(
                    f"{where}: the header must be {','.join(HEADER)}, got {','.join(fields)!r}"
                )
            continue
        worker_f, start, speed = _row(fields, where, n)
        worker = int(worker_f) - 1
        previous = rows.setdefault(worker, [])
        if previous and start <= previous[-1][0]:
            raise TraceError(
                f"{where}: worker {worker + 1}'s starts must increase, got {start!r} after "
                f"{previous[-1][0]!r}"
            )
        since, pace = previous[-1] if previous else (0.0, 1.0)
        work[worker] = work.get(worker, 0.0) + pace * (start - since)
        if work[worker] > FLOAT32_MAX:
            raise TraceError(
                f"{where}: worker {worker + 1}'s work by t = {start:g} (the integral of its "
                f"speed) is {work[worker]:.6g}, more than float32 holds ({FLOAT32_MAX:.6g})"
            )
        previous.append((start, speed))
    if not rows:
        raise TraceError(f"power trace file {str(path)!r} has no rows")
    return rows


def _row(fields: list[str], where: str, n: int) -> tuple[float, float, float]:
    """``(worker, start, speed)`` of a trace file's row, each checked on its own."""
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
    if max(start, speed) > FLOAT32_MAX:
        raise TraceError(
            f"{where}: start and speed must be at most {FLOAT32_MAX:.6g} (the trace is "
            f"float32), got {','.join(fields)!r}"
        )
    return worker_f, start, speed


def _is_header(fields: list[str]) -> bool:
    """Whether a first line is a header: none of its fields is a number."""
    for f in fields:
        try:
            float(f)
            return False
        except ValueError:
            pass
    return True


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


def trace_file(spec: Any) -> str | None:
    """The FILE of a ``trace:FILE`` spec as written (None: another source or no valid spec)."""
    try:
        source, args = parse_power(spec)
    except TraceError:
        return None
    return args[0] if source == "trace" else None


def in_folder(spec: Any, folder: str | Path) -> Any:
    """``spec`` with a relative trace FILE made absolute in ``folder`` (any other spec, and an
    absolute FILE, unchanged).  A config file's trace path is relative to the config file's
    folder (:func:`jaxnigt.config.loader.read`), a command line's to the working directory."""
    path = trace_file(spec)
    if path is None or Path(path).is_absolute():
        return spec
    return "trace:" + os.path.abspath(os.path.join(folder, path))


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
