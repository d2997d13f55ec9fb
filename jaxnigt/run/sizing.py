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
from typing import Any

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
