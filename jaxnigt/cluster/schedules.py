"""Round schedules of the AllReduce methods: Rennala, Malenia, synchronous and m-synchronous
(docs/cluster_model.md).

A schedule is a pure function of sampled compute times: it decides *which* gradients count
and when the round ends, before any trajectory is rolled out, so only the trajectories that
count need to be simulated.  This module is the public face of the round rules:
:func:`rennala`, :func:`malenia`, :func:`sync` and :func:`msync` draw a round's compute times from a
:class:`~jaxnigt.cluster.timing.TimeModel` and return its :class:`RoundSchedule`; :func:`run_rounds`
chains rounds; :func:`sync_batch` and :func:`default_malenia_capacity` give the rules'
static sizes.  What a round is, and the conventions every rule shares (start, end,
AllReduce, in-flight work), live in :mod:`jaxnigt.cluster.rounds`; the rules on a given matrix of
compute times (``*_from_times``, the ties) in :mod:`jaxnigt.cluster.round_kernels`; the names
callers use from those two (``RoundSchedule``, ``INFLIGHT``, ``ALLREDUCE``, the
``*_from_times`` rules, ...: :data:`__all__`) are importable from here too.  Aggregator
weights live in :mod:`jaxnigt.cluster.aggregators`; the asynchronous per-arrival engine lives in
:mod:`jaxnigt.cluster.events`.

Compute times drawn per round: Malenia ``capacity + 1`` per worker and sync ``per_worker``
(``sample_compute_times(tm, key, num)``; the extra column is the in-flight gradient).
Rennala draws every worker's first time and ``M`` more only for the ``min(n, M)`` workers
that can contribute (:func:`sample_rennala_times`), so its cost does not grow with ``n * M``.
The ``*_from_times`` functions take a full ``[n, K]`` matrix explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxnigt.cluster.round_kernels import (
    MALENIA_RTOL,
    malenia_from_times,
    msync_from_times,
    rennala_candidates,
    rennala_from_times,
    rennala_round,
    sync_from_times,
)
from jaxnigt.cluster.rounds import (
    ALLREDUCE,
    INFLIGHT,
    RoundSchedule,
    check_modes,
    check_static,
    sequential_cumsum,
    start_offsets,
)
from jaxnigt.cluster.timing import TimeModel, sample_compute_times, sample_noise

__all__ = [
    "ALLREDUCE",
    "INFLIGHT",
    "MALENIA_RTOL",
    "MATCH_M",
    "RoundSchedule",
    "default_malenia_capacity",
    "default_msync_m",
    "malenia",
    "malenia_from_times",
    "msync",
    "msync_from_times",
    "rennala",
    "rennala_from_times",
    "run_rounds",
    "sample_rennala_times",
    "sequential_cumsum",
    "start_offsets",
    "sync",
    "sync_batch",
    "sync_from_times",
]


#: The named synchronous batch that matches Rennala's: b = max(1, ceil(M/n)), so a round
#: aggregates about M gradients (a sensitivity variant; docs/cluster_model.md).
MATCH_M = "match_M"


def sync_batch(M: int, n: int, per_worker: int | str = 1) -> int:
    """Per-worker batch b of the synchronous schedule (docs/cluster_model.md): ``per_worker``
    gradients (default 1: every worker one trajectory per round, the paper's Sync NIGT), or with
    :data:`MATCH_M` ``max(1, ceil(M / n))``, Rennala's batch M spread over the n workers."""
    if per_worker == MATCH_M:
        return max(1, math.ceil(M / n))
    if isinstance(per_worker, str) or int(per_worker) < 1:
        raise ValueError(f"per_worker must be >= 1 or {MATCH_M!r}, got {per_worker!r}")
    return int(per_worker)


def default_malenia_capacity(M: int, n: int) -> int:
    """Default per-worker gradient capacity of a Malenia round: ``6 * M``.

    The rule needs ``b_i >= M / n^2`` from every worker and roughly ``h_slow / h_fast`` times
    more from the fastest one.  The hardest scenario of the paper, ``n = 2``,
    ``h = (1, 10)``, needs about ``2.75 M`` from the fast worker on average; ``6 M`` leaves
    room for noise (exponential noise overflowed ~1 round in 5 at ``4 M``).  A round that
    needs more sets ``overflow``; pass a larger ``capacity`` then.
    """
    del n
    return 6 * int(M)


def rennala(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Rennala round (docs/cluster_model.md): the first ``M`` gradients to finish, ``S = M`` slots.

    Args:
      tm: time model.
      key: PRNG key for this round's compute times (:func:`sample_rennala_times`).
      t0: ``[]`` round start.
      busy_until: ``[n]`` absolute time each worker is free to start (see
        :class:`RoundSchedule`).
      M: static batch size.
      inflight: ``"cancel"`` or ``"discard"``.
      allreduce: ``"all"`` or ``"contributors"`` (who takes part in the AllReduce).

    Example::

      tm = make_time_model(10, h="sqrt", noise="exponential")
      s = rennala(tm, key, 0.0, jnp.zeros(10), M=50)
    """
    M = check_static("M", M)
    check_modes(inflight, allreduce)
    t0 = jnp.asarray(t0, jnp.float32)
    first, rows, tau_rows = sample_rennala_times(tm, key, start_offsets(t0, busy_until), M=M)
    return rennala_round(
        tm.kappa,
        t0,
        busy_until,
        first,
        rows,
        tau_rows,
        M=M,
        inflight=inflight,
        allreduce=allreduce,
    )


def sample_rennala_times(
    tm: TimeModel, key: jax.Array, off: jax.Array, *, M: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The compute times one Rennala round needs, drawn lazily: ``O(n + M^2)`` draws.

    Every worker's first compute time is drawn (``first`` ``[n]``, from
    ``fold_in(key, 0)``); the ``m = min(n, M)`` workers whose first completion
    ``off + first`` is earliest (``rows``, increasing ids) are the only ones that can
    contribute, and only they get their next ``M`` compute times (from ``fold_in(key, 1)``).
    ``tau_rows`` ``[m, M + 1]`` is their full row.  In distribution this is the same as
    drawing all ``n * (M + 1)`` times; :func:`rennala_from_times` on any ``[n, M + 1]``
    matrix with column 0 ``first`` and rows ``rows`` equal to ``tau_rows`` (other entries
    arbitrary) gives the same round.
    """
    first = sample_compute_times(tm, jax.random.fold_in(key, 0), 1)[:, 0]
    rows = rennala_candidates(off + first, M)
    rest = tm.h[rows][:, None] * sample_noise(tm, jax.random.fold_in(key, 1), (rows.shape[0], M))
    return first, rows, jnp.concatenate([first[rows][:, None], rest], axis=1)


def malenia(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    capacity: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Malenia round (docs/cluster_model.md), ``S = n * capacity`` slots; see
    :func:`malenia_from_times`.

    ``capacity`` is the static maximum number of gradients per worker
    (:func:`default_malenia_capacity`); ``capacity + 1`` compute times are drawn per worker.
    """
    tau = sample_compute_times(tm, key, int(capacity) + 1)
    return malenia_from_times(
        tm.kappa,
        tau,
        t0,
        busy_until,
        M=M,
        capacity=capacity,
        inflight=inflight,
        allreduce=allreduce,
    )


def sync(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """Synchronous round (docs/cluster_model.md), ``S = n * per_worker`` slots
    (:func:`sync_batch`)."""
    tau = sample_compute_times(tm, key, int(per_worker))
    return sync_from_times(
        tm.kappa,
        tau,
        t0,
        busy_until,
        per_worker=per_worker,
        inflight=inflight,
        allreduce=allreduce,
    )


def msync(
    tm: TimeModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    m: int,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> RoundSchedule:
    """m-synchronous round, ``S = m`` slots (:func:`msync_from_times`): the compute times
    of :func:`sync` with one gradient per worker, so ``m = n`` is that round."""
    tau = sample_compute_times(tm, key, 1)
    return msync_from_times(
        tm.kappa, tau, t0, busy_until, m=m, inflight=inflight, allreduce=allreduce
    )


def default_msync_m(n: int) -> int:
    """``ceil(n / 2)``: the round waits for the faster half of the workers."""
    return -(-int(n) // 2)


def run_rounds(schedule: Callable, tm: TimeModel, key: jax.Array, rounds: int) -> RoundSchedule:
    """``rounds`` consecutive rounds of ``schedule`` (``(tm, key, t0, busy_until) ->
    RoundSchedule``) from time 0 with every worker free, round r keyed ``fold_in(key, r)``;
    the schedules stacked along a leading ``[rounds]`` axis (``rounds`` static)."""

    def one(carry, r):
        t0, busy = carry
        s = schedule(tm, jax.random.fold_in(key, r), t0, busy)
        return (s.t_end, s.busy_until), s

    init = (jnp.float32(0.0), jnp.zeros((tm.n,), jnp.float32))
    return jax.lax.scan(one, init, jnp.arange(rounds))[1]
