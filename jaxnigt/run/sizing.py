"""How much memory a run or a clock simulation needs, estimated before anything of size n is
allocated or compiled, against what the device can hold.

The estimates are lower bounds, in two stages:

* **from n alone** (:func:`cluster_bytes`, :func:`clock_bytes`): building the cluster's time
  model (float64 profiles, then float32 arrays) and, for ``jaxnigt clock``, what the
  simulation and its CSV hold per worker; the constants are measured (peak resident memory
  at n = 2·10⁶ and 8·10⁶, ``/usr/bin/time -v``) and rounded up;
* **from the program's shapes** (:func:`program_bytes`): the run's state (``jax.eval_shape``
  of its vmapped ``init``) twice (the state a chunk reads and the one it writes) plus the
  largest single array one step makes (found by walking the jaxpr of the step: tracing only,
  nothing of size n is allocated).  XLA needs more (several temporaries live at once): on
  point_mass, for every engine at n = 10 and 1,000 and 5 runs, this bound was 0.23–0.75 of
  the compiled step's ``memory_analysis()``; ``jaxnigt plan`` compiles a step for the exact
  figure when it fits.

A size over the limit raises :class:`SizeError`, whose one-line message names the estimate,
the limit and the largest n that fits; the commands print it and exit with status 2.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

#: Bytes per worker of building the time model: h and κ as float64 profiles (with their
#: temporaries), then as float32 arrays (measured: 41 B at n = 8·10⁶; rounded up).
CLUSTER_BYTES_PER_WORKER = 48
#: ``jaxnigt clock``'s round rules per worker: the schedule's arrays, the per-round counts
#: and the CSV header (measured: 221 B at one round), and per worker and round (the counts
#: and their CSV text, measured: 14 B).
CLOCK_ROUND_BYTES_PER_WORKER = 240
CLOCK_ROUND_BYTES_PER_WORKER_ROUND = 16
#: The per-arrival rules (``async``, ``ringmaster``, ``seed``): the event state per worker is
#: what the time model needs again; each row of the CSV about this much.
CLOCK_BYTES_PER_ROW = 256
#: A computation-power trace (:class:`jaxnigt.cluster.power.PowerTrace`) per worker and
#: stretch: eight float32 arrays (start, speed, work, up, work_end, up_end, up_next,
#: down_next; ``jaxnigt.cluster.power.BYTES_PER_STRETCH``, which a test holds it to).
TRACE_ARRAYS = 8
TRACE_BYTES_PER_STRETCH = TRACE_ARRAYS * 4


class SizeError(ValueError):
    """A run or simulation does not fit in the device's memory (one-line message)."""


def device_limit() -> tuple[int, str]:
    """``(bytes, where)``: what the default JAX device can hold — an accelerator's
    ``memory_stats()["bytes_limit"]``, on a CPU the host's available memory
    (``MemAvailable`` of ``/proc/meminfo``, else the physical memory)."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]), f"{device.platform} device 0"
    return host_available(), "this host (available memory)"


def host_available() -> int:
    """The host's available memory in bytes (``MemAvailable``; else physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def cluster_bytes(n: int) -> int:
    """Host memory of building the time model of ``n`` workers."""
    return CLUSTER_BYTES_PER_WORKER * n


def trace_bytes(n: int, stretches: int, copies: int = 1) -> int:
    """A power trace's memory: ``n`` workers × ``stretches`` (K) × eight float32 arrays, for
    each of ``copies`` (one per run when each run draws its own)."""
    return TRACE_BYTES_PER_STRETCH * n * stretches * copies


class TraceSize(NamedTuple):
    """The size of a computation-power trace (:func:`trace_size`).

    Attributes:
      spec: the power spec (``cluster.power``, ``--power``).
      stretches: K, the stretches each worker's row holds.
      per_run: each run draws its own (``outages``); else one trace serves every run.
    """

    spec: str
    stretches: int
    per_run: bool

    def bytes(self, n: int, runs: int = 1) -> int:
        """Its memory for ``n`` workers and ``runs`` runs of one program."""
        return trace_bytes(n, self.stretches, runs if self.per_run else 1)


def trace_size(spec: str, n: int, horizon: float | None) -> TraceSize | None:
    """The size of a power spec's trace (:data:`jaxnigt.cluster.power_sources.SOURCES`; None:
    constant) from the spec alone, nothing of size n × K built: K as
    :func:`jaxnigt.cluster.power_sources.build` lays the trace out (a file's rows counted, a
    periodic trace's stretches from its period and ``horizon``, outages' bouts from their
    means).

    Raises:
      jaxnigt.cluster.power_sources.TraceError: a spec or trace file that cannot be used.
    """
    from jaxnigt.cluster import power, power_sources
    from jaxnigt.config.loader import one_period

    source, args = power_sources.parse_power(spec)
    if source == "constant":
        return None
    if source == "trace":  # a worker is at speed 1 before its first row; one not listed: 1
        rows = power_sources.read_trace_rows(args[0], n)
        return TraceSize(spec, max([1, *(len(ch) + (ch[0][0] > 0) for ch in rows.values())]), False)
    if source == "periodic":  # a start at 0, a change every half period, one past them
        power_sources.check_spec(spec, n, one_period(spec))
        return TraceSize(spec, math.ceil(horizon / (float(args[0]) / 2)) + 4, False)
    return TraceSize(spec, power.stretches(power_sources.build(spec, n, horizon)), True)


#: What makes a power trace smaller, by source (``{horizon}``: the key or flag of its horizon).
SMALLER_TRACE = {
    "trace": "a file with fewer changes per worker",
    "periodic": "a longer PERIOD or a shorter {horizon}",
    "outages": "a shorter {horizon}, longer UP and DOWN means, or fewer seeds",
}


def trace_problem(
    trace: TraceSize | None,
    n: int,
    runs: int,
    beside: Callable[[int], int],
    limit: tuple[int, str],
    *,
    horizon: str = "cluster.power_horizon (default: the budget)",
) -> str | None:
    """Why a power trace does not fit beside ``beside(n)`` bytes (the rest of the floor), to
    follow the key or flag that sets it (``cluster.power: ...``); None when it fits.

    Args:
      trace: its size (None: constant power, nothing to fit).
      n: the workers.
      runs: the runs of one program (each draws its own outages).
      beside: the bytes of the rest for n workers.
      limit: ``(bytes, where)``.
      horizon: how the hint names the horizon.
    """
    if trace is None:
        return None
    size = trace.bytes(n, runs)
    if beside(n) + size <= limit[0]:
        return None
    each = f", one per run ({runs} runs: outages are drawn per run)" if trace.per_run else ""
    hint = SMALLER_TRACE[trace.spec.partition(":")[0]].format(horizon=horizon)
    return (
        f"the trace of {trace.spec!r} has {n:,} workers × {trace.stretches:,} stretches × "
        f"{TRACE_ARRAYS} float32 arrays{each}: at least {size_text(size)}, more than the "
        f"{size_text(limit[0])} of {limit[1]} beside the cluster's time model; {hint}"
    )


def clock_bytes(n: int, rows: int, *, per_round: bool) -> int:
    """``jaxnigt clock``'s memory for ``n`` workers and ``rows`` rounds or arrivals:
    ``per_round`` for the round rules (a row holds every worker's count)."""
    if per_round:
        return (
            cluster_bytes(n)
            + CLOCK_ROUND_BYTES_PER_WORKER * n
            + CLOCK_ROUND_BYTES_PER_WORKER_ROUND * n * rows
        )
    return 2 * cluster_bytes(n) + CLOCK_BYTES_PER_ROW * rows


def largest_fitting(needed: Callable[[int], int], limit: int, n: int) -> int:
    """The largest m <= n with ``needed(m) <= limit`` (``needed`` grows with m); 0 if none."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if needed(mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def gib(x: float) -> str:
    return f"{x / 2**30:,.1f} GiB" if x >= 2**30 else f"{x / 2**20:,.0f} MiB"


def size_text(x: float) -> str:
    """Bytes in words down to KiB, with a decimal (``5.9 KiB``, ``1.4 MiB``, ``1.3 GiB``)."""
    if x < 2**20:
        return f"{x / 2**10:,.1f} KiB"
    if x < 2**30:
        return f"{x / 2**20:,.1f} MiB"
    return gib(x)


def problem(
    what: str,
    needed: Callable[[int], int],
    n: int,
    limit: tuple[int, str] | None = None,
    *,
    name: str = "cluster.n",
    symbol: str = "n",
) -> str | None:
    """The one-line message of ``needed(n)`` bytes exceeding the device's limit
    (:func:`device_limit` unless given), or None when they fit; ``what`` says what needs
    them, ``name`` what n is called (a config key or a flag), ``symbol`` how the message's
    end calls it (``the largest n that fits``)."""
    limit_bytes, where = limit if limit is not None else device_limit()
    estimate = needed(n)
    if estimate <= limit_bytes:
        return None
    fits = largest_fitting(needed, limit_bytes, n)
    largest = f"the largest {symbol} that fits is about {fits:,}" if fits else f"no {symbol} fits"
    return (
        f"{name} = {n:,}: {what} needs at least {gib(estimate)}, more than the "
        f"{gib(limit_bytes)} of {where}; {largest}"
    )


def check(
    what: str,
    needed: Callable[[int], int],
    n: int,
    limit: tuple[int, str] | None = None,
    *,
    name: str = "cluster.n",
    symbol: str = "n",
) -> None:
    """Raises :class:`SizeError` with :func:`problem`'s message when ``needed(n)`` does not fit."""
    message = problem(what, needed, n, limit, name=name, symbol=symbol)
    if message is not None:
        raise SizeError(message)


# ------------------------------------------------------------------ from a program's shapes


def _nbytes(aval: Any) -> int:
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return 0
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:  # PRNG key arrays and other extended dtypes
        itemsize = 8
    return int(math.prod(shape)) * itemsize


def tree_bytes(tree: Any) -> int:
    """Bytes of the arrays (or ``ShapeDtypeStruct``s) of a pytree."""
    import jax

    return sum(_nbytes(x) for x in jax.tree.leaves(tree))


def _kind(aval: Any) -> str:
    """``float32[5,64]``: an array's dtype and shape."""
    try:
        name = np.dtype(aval.dtype).name
    except TypeError:
        name = str(aval.dtype)
    return f"{name}[{','.join(str(d) for d in aval.shape)}]"


def largest_array(jaxpr: Any) -> tuple[int, str]:
    """``(bytes, type)`` of the largest array a (closed) jaxpr makes, nested jaxprs (scan,
    cond, while, pjit bodies) included; ``type`` such as ``float32[5,64]``."""
    from jax.extend import core as jex_core

    inner = getattr(jaxpr, "jaxpr", jaxpr)
    top = (0, "")
    for eqn in inner.eqns:
        for v in eqn.outvars:
            if hasattr(v.aval, "shape"):
                top = max(top, (_nbytes(v.aval), _kind(v.aval)))
        for param in eqn.params.values():
            for sub in param if isinstance(param, list | tuple) else (param,):
                if isinstance(sub, jex_core.ClosedJaxpr | jex_core.Jaxpr):
                    top = max(top, largest_array(sub))
    return top


def program_bytes(
    init: Callable, step: Callable, *init_args: Any, also: Sequence[tuple[Callable, tuple]] = ()
) -> dict[str, Any]:
    """``{"state", "step", "largest"}``: the bytes of the state ``init(*init_args)`` makes,
    the lower bound of one ``step(state)`` (its input and output state and its largest
    array) and that array's type, from shapes alone (``jax.eval_shape`` and
    ``jax.make_jaxpr``; nothing is allocated).

    ``also``: other programs a run calls on the same state, ``(fn, args)`` for
    ``fn(state, *args)`` (a first round of another size, the evaluation): the largest array
    is the largest any of them makes."""
    import jax

    state = jax.eval_shape(init, *init_args)
    largest, kind = largest_array(jax.make_jaxpr(step)(state))
    for fn, args in also:
        largest, kind = max((largest, kind), largest_array(jax.make_jaxpr(fn)(state, *args)))
    size = tree_bytes(state)
    return {"state": size, "step": 2 * size + largest, "largest": kind}
