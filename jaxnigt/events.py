"""The asynchronous event engine (AFedPG, A3C-style SGD, A3C, IMPALA's actors; SPEC §3, §6).

Each worker loops: it holds the server point it was dispatched with, computes one gradient
(``tau = h_i * xi``), then exchanges it with the server (``kappa_i``: gradient up, new point
down).  The server updates on every arrival, in arrival order, and the worker starts its next
gradient at once with the new point.  The time of an arrival depends on the server link
(``link``, a static string):

* ``shared`` (default) -- the server has one link, so exchanges are served one at a time,
  first come first served in the order of compute completion (ties: lower worker id); an
  exchange of worker ``i`` occupies the link for ``kappa_i``::

      start = max(link_free, compute_end_i);  arrival = start + kappa_i;  link_free = arrival

  This is the accounting behind the paper's bound for AFedPG: its communication time is at
  least ``kappa`` times the number of gradients.  ``link_wait = start - compute_end_i``.
* ``independent`` -- every worker has its own link and exchanges overlap:
  ``arrival = compute_end_i + kappa_i`` (ties: lower worker id).  A sensitivity case.

Every worker is dispatched with the initial point at ``t0`` for free (all workers build
``x_0`` from the same seed, as in the round methods).  Compute times depend only on keys,
never on trajectories, so a whole block of arrivals can be computed before any rollout.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxnigt.timing import TimeModel, sample_compute_times, sample_worker_compute_time

LINKS = ("shared", "independent")


class AsyncState(NamedTuple):
    """State of the asynchronous event engine (arrays only).

    Attributes:
      compute_end: ``[n]`` float32 when each worker's in-flight gradient finishes computing.
      dispatch_version: ``[n]`` int32 server version each worker was dispatched with.
      dispatch_count: ``[n]`` int32 gradients dispatched to each worker so far.
      version: ``[]`` int32 server version (= arrivals processed).
      time: ``[]`` float32 time of the last arrival (``t0`` initially).
      compute_time: ``[n]`` float32 ``tau`` of each worker's in-flight gradient.
      dispatch_time: ``[n]`` float32 when each in-flight gradient was dispatched.
      link_free: ``[]`` float32 when the server link is next free (``shared`` link).
      link_busy: ``[]`` float32 total exchange time served so far (sum of ``kappa``).
    """

    compute_end: jax.Array
    dispatch_version: jax.Array
    dispatch_count: jax.Array
    version: jax.Array
    time: jax.Array
    compute_time: jax.Array
    dispatch_time: jax.Array
    link_free: jax.Array
    link_busy: jax.Array


class Arrival(NamedTuple):
    """One gradient arriving at the server (all ``[]``).

    Attributes:
      worker: int32.
      time: float32 arrival time (the end of its exchange).
      dispatch_version: int32 server version the gradient was computed from.
      staleness: int32 version before this arrival minus ``dispatch_version``.
      compute_time: float32 ``tau`` of this gradient.
      grad_index: int32 this worker's 0-based gradient counter (for keys).
      dispatch_time: float32 when the worker received its point and began computing.
      compute_end: float32 when its computation finished.
      link_wait: float32 time it queued for the server link (0 with ``independent``).
    """

    worker: jax.Array
    time: jax.Array
    dispatch_version: jax.Array
    staleness: jax.Array
    compute_time: jax.Array
    grad_index: jax.Array
    dispatch_time: jax.Array
    compute_end: jax.Array
    link_wait: jax.Array


def _check_link(link: str) -> None:
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; allowed: {', '.join(LINKS)}")


def async_init(tm: TimeModel, key: jax.Array, t0: jax.typing.ArrayLike) -> AsyncState:
    """Dispatches every worker at ``t0`` with version 0 (for free).

    ``key`` draws the first compute time of each worker (``sample_compute_times(tm, key, 1)``).
    """
    t0 = jnp.asarray(t0, jnp.float32)
    tau = sample_compute_times(tm, key, 1)[:, 0]
    n = tm.n
    return AsyncState(
        compute_end=t0 + tau,
        dispatch_version=jnp.zeros((n,), jnp.int32),
        dispatch_count=jnp.ones((n,), jnp.int32),
        version=jnp.int32(0),
        time=t0,
        compute_time=tau,
        dispatch_time=jnp.full((n,), t0),
        link_free=t0,
        link_busy=jnp.float32(0.0),
    )


def next_exchange(
    tm: TimeModel, state: AsyncState, link: str
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(worker, start, arrival)`` of the next exchange to finish under ``link``."""
    _check_link(link)
    if link == "shared":
        w = jnp.argmin(state.compute_end).astype(jnp.int32)
        start = jnp.maximum(state.link_free, state.compute_end[w])
    else:
        w = jnp.argmin(state.compute_end + tm.kappa).astype(jnp.int32)
        start = state.compute_end[w]
    return w, start, start + tm.kappa[w]


def async_next(
    tm: TimeModel, key: jax.Array, state: AsyncState, *, link: str = "shared"
) -> tuple[AsyncState, Arrival]:
    """Processes the next arrival and re-dispatches that worker.

    The server version increments; the worker is re-dispatched at the arrival time ``t``
    with the new version and finishes computing at ``t + tau`` where ``tau = h_i * xi`` and
    ``xi`` is drawn from ``key`` (callers pass ``fold_in(run_key, state.version)``).  Each
    arrival is one vector exchange (one communication; no AllReduce).
    """
    w, start, t = next_exchange(tm, state, link)
    arrival = Arrival(
        worker=w,
        time=t,
        dispatch_version=state.dispatch_version[w],
        staleness=state.version - state.dispatch_version[w],
        compute_time=state.compute_time[w],
        grad_index=state.dispatch_count[w] - 1,
        dispatch_time=state.dispatch_time[w],
        compute_end=state.compute_end[w],
        link_wait=start - state.compute_end[w],
    )
    version = state.version + 1
    tau = sample_worker_compute_time(tm, key, w)
    new_state = AsyncState(
        compute_end=state.compute_end.at[w].set(t + tau),
        dispatch_version=state.dispatch_version.at[w].set(version),
        dispatch_count=state.dispatch_count.at[w].add(1),
        version=version,
        time=t,
        compute_time=state.compute_time.at[w].set(tau),
        dispatch_time=state.dispatch_time.at[w].set(t),
        link_free=t if link == "shared" else state.link_free,
        link_busy=state.link_busy + tm.kappa[w],
    )
    return new_state, arrival


def async_arrivals(
    tm: TimeModel, run_key: jax.Array, state: AsyncState, num: int, *, link: str = "shared"
) -> tuple[AsyncState, Arrival]:
    """Runs ``num`` (static) arrivals with keys ``fold_in(run_key, version)``.

    Returns the final state and the stacked :class:`Arrival` records (leading axis ``num``).
    """

    def step(s, _):
        return async_next(tm, jax.random.fold_in(run_key, s.version), s, link=link)

    return lax.scan(step, state, None, length=int(num))


def arrival_blocks(
    tm: TimeModel, key: jax.Array, blocks: int, size: int, *, link: str = "shared"
) -> Arrival:
    """The arrivals of ``blocks`` consecutive blocks of ``size`` from time 0 (both static),
    stacked ``[blocks, size]``: every worker starts at time 0 with key ``fold_in(key, 0)``,
    block b draws with ``fold_in(key, 1 + b)``. The asynchronous engines' clocks alone
    (``Algorithm.simulate_clock``), without rollouts."""
    state = async_init(tm, jax.random.fold_in(key, 0), 0.0)

    def block(s, b):
        return async_arrivals(tm, jax.random.fold_in(key, 1 + b), s, size, link=link)

    return lax.scan(block, state, jnp.arange(blocks))[1]
