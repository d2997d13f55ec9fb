"""Round schedules of the AllReduce methods: Rennala, Malenia, synchronous and m-synchronous
(docs/cluster_model.md).

A schedule is a pure function of sampled compute times: it decides *which* gradients count
and when the round ends, before any trajectory is rolled out, so only the trajectories that
count need to be simulated.  This module is the public face of the round rules:
:func:`rennala`, :func:`malenia`, :func:`sync` and :func:`msync` draw a round's compute times
from the cluster model (:class:`~jaxnigt.cluster.model.ClusterModel`, whose ``inflight`` and
``allreduce`` choices end the round) and return its :class:`RoundSchedule`;
:func:`run_rounds` chains rounds; :func:`sync_batch` and :func:`default_malenia_capacity` give
the rules' static sizes.  What a round is, and the conventions every rule shares (start, end,
AllReduce, in-flight work), live in :mod:`jaxnigt.cluster.rounds`; the rules on a given matrix
of compute times (``*_from_times``, the ties) in :mod:`jaxnigt.cluster.round_kernels`; the names
callers use from those two (``RoundSchedule``, the ``*_from_times`` rules, ...:
:data:`__all__`) are importable from here too.  Aggregator weights live in
:mod:`jaxnigt.cluster.aggregators`; the asynchronous per-arrival engine lives in
:mod:`jaxnigt.cluster.events`.

Compute times drawn per round: Malenia ``capacity + 1`` per worker and sync ``per_worker``
(``sample_compute_times(model, key, num)``; the extra column is the in-flight gradient).
Rennala draws every worker's first time and ``M`` more only for the ``min(n, M)`` workers
that can contribute (:func:`sample_rennala_times`), so its cost does not grow with ``n * M``.
The ``*_from_times`` functions take a full ``[n, K]`` matrix explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxnigt.cluster import padding
from jaxnigt.cluster.model import ClusterModel, realize, sample_compute_times, sample_noise
from jaxnigt.cluster.round_kernels import (
    MALENIA_RTOL,
    malenia_from_times,
    msync_from_times,
    rennala_candidates,
    rennala_from_times,
    rennala_round,
    rennala_take,
    sync_from_times,
)
from jaxnigt.cluster.rounds import (
    RoundSchedule,
    check_static,
    ends,
    sequential_cumsum,
    start_offsets,
)

__all__ = [
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
    "round_clock",
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
    """Per-worker batch b of the synchronous schedule (docs/cluster_model.md).

    Args:
      M: Rennala's batch.
      n: the number of workers.
      per_worker: gradients per worker (default 1: every worker one trajectory per round,
        the paper's Sync NIGT), or :data:`MATCH_M` for ``max(1, ceil(M / n))``, Rennala's
        batch M spread over the n workers.

    Returns:
      ``b``.

    Raises:
      ValueError: ``per_worker`` is neither an integer >= 1 nor :data:`MATCH_M`.
    """
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
    model: ClusterModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    run_M: jax.Array | None = None,
) -> RoundSchedule:
    """Rennala round (docs/cluster_model.md): the first ``M`` gradients to finish, ``S = M`` slots.

    Args:
      model: the cluster model (its times, ``inflight`` and ``allreduce``).
      key: PRNG key for this round's compute times (:func:`sample_rennala_times`).
      t0: ``[]`` round start.
      busy_until: ``[n]`` absolute time each worker is free to start (see
        :class:`RoundSchedule`).
      M: static batch size (with ``run_M``: the most slots).
      run_M: ``[]`` int the run's batch when it is a value of the run (a padded program,
        :mod:`jaxnigt.cluster.padding`); slots from ``run_M`` on are never valid.

    Returns:
      The round's :class:`RoundSchedule`.

    Raises:
      ValueError: ``M`` is not an integer >= 1.

    Example::

      model = make_cluster_model(10, h="sqrt", noise="exponential")
      s = rennala(model, key, 0.0, jnp.zeros(10), M=50)
    """
    M = check_static("M", M)
    t0 = jnp.asarray(t0, jnp.float32)
    off = start_offsets(t0, busy_until)
    first, rows, tau_rows = sample_rennala_times(model, key, off, M=M, t0=t0, run_M=run_M)
    return rennala_round(model, t0, busy_until, first, rows, tau_rows, M=M, run_M=run_M)


def sample_rennala_times(
    model: ClusterModel,
    key: jax.Array,
    off: jax.Array,
    *,
    M: int,
    t0: jax.typing.ArrayLike = 0.0,
    run_M: jax.Array | None = None,
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

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times.
      off: ``[n]`` each worker's start relative to the round's (:func:`start_offsets`).
      M: static batch size.
      t0: the round's start (where a power trace maps work to time).
      run_M: ``[]`` the run's batch in a padded program (None: ``M``).  A padded run
        (``run_M`` or :attr:`ClusterModel.workers`) draws the unpadded run's times for its
        first ``min(n, run_M)`` rows and ``run_M`` columns (:mod:`jaxnigt.cluster.padding`).

    Returns:
      ``(first, rows, tau_rows)``.
    """
    first = sample_compute_times(model, jax.random.fold_in(key, 0), 1)[:, 0]
    take = rennala_take(model, M, run_M)
    rows = rennala_candidates(ends(model, t0, off, first), M, take)
    h_rows = model.h[rows][:, None]
    shape, k_rest = (rows.shape[0], M), jax.random.fold_in(key, 1)
    if run_M is None:
        rest = h_rows * sample_noise(model, k_rest, shape)
    else:
        draw = lambda k, s: sample_noise(model, k, s)
        rest = h_rows * padding.flat_draws(draw, k_rest, shape, run_M)
    return first, rows, jnp.concatenate([first[rows][:, None], rest], axis=1)


def malenia(
    model: ClusterModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    capacity: int,
    run: tuple[jax.Array, jax.Array] | None = None,
) -> RoundSchedule:
    """Malenia round (docs/cluster_model.md), ``S = n * capacity`` slots; see
    :func:`malenia_from_times`.

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times (``capacity + 1`` per worker).
      t0: ``[]`` round start.
      busy_until: ``[n]`` when each worker is free to start.
      M: static batch size.
      capacity: static most gradients per worker (:func:`default_malenia_capacity`).
      run: a padded run's ``(capacity, threshold)`` (:func:`malenia_from_times`): its
        ``capacity + 1`` compute times per worker are drawn as its unpadded run draws them.

    Returns:
      The round's :class:`RoundSchedule`.
    """
    num = int(capacity) + 1
    if run is None:
        tau = sample_compute_times(model, key, num)
    else:
        draw = lambda k, s: sample_noise(model, k, s)
        tau = model.h[:, None] * padding.flat_draws(draw, key, (model.n, num), run[0] + 1)
        live = jnp.arange(num)[None, :] <= run[0]
        live = live if model.workers is None else live & model.active[:, None]
        tau = jnp.where(live, tau, jnp.inf)
    return malenia_from_times(model, tau, t0, busy_until, M=M, capacity=capacity, run=run)


def sync(
    model: ClusterModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    per_worker: int,
) -> RoundSchedule:
    """Synchronous round (docs/cluster_model.md), ``S = n * per_worker`` slots.

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times.
      t0: ``[]`` round start.
      busy_until: ``[n]`` when each worker is free to start.
      per_worker: static gradients per worker (:func:`sync_batch`).

    Returns:
      The round's :class:`RoundSchedule`.
    """
    tau = sample_compute_times(model, key, int(per_worker))
    return sync_from_times(model, tau, t0, busy_until, per_worker=per_worker)


def msync(
    model: ClusterModel,
    key: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    m: int,
    run_m: jax.Array | None = None,
) -> RoundSchedule:
    """m-synchronous round, ``S = m`` slots (:func:`msync_from_times`): the compute times
    of :func:`sync` with one gradient per worker, so ``m = n`` is that round.

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times.
      t0: ``[]`` round start.
      busy_until: ``[n]`` when each worker is free to start.
      m: static number of workers the round waits for (with ``run_m``: the most).
      run_m: ``[]`` the run's ``m`` in a padded program (None: ``m``).

    Returns:
      The round's :class:`RoundSchedule`.
    """
    tau = sample_compute_times(model, key, 1)
    return msync_from_times(model, tau, t0, busy_until, m=m, run_m=run_m)


def default_msync_m(n: int) -> int:
    """``ceil(n / 2)``: the round waits for the faster half of the workers."""
    return -(-int(n) // 2)


def run_rounds(
    schedule: Callable, model: ClusterModel, key: jax.Array, rounds: int
) -> RoundSchedule:
    """Consecutive rounds of a schedule from time 0 with every worker free.

    Args:
      schedule: ``(model, key, t0, busy_until) -> RoundSchedule``.
      model: the cluster model (outages drawn from ``key``: :func:`~jaxnigt.cluster.model.
        realize`).
      key: PRNG key; round r is keyed ``fold_in(key, r)``.
      rounds: static number of rounds.

    Returns:
      The schedules stacked along a leading ``[rounds]`` axis.
    """

    model = realize(model, key)[0]

    def one(carry, r):
        t0, busy = carry
        s = schedule(model, jax.random.fold_in(key, r), t0, busy)
        return (s.t_end, s.busy_until), s

    init = (jnp.float32(0.0), jnp.zeros((model.n,), jnp.float32))
    return jax.lax.scan(one, init, jnp.arange(rounds))[1]


def round_clock(
    schedule: Callable, model: ClusterModel, key: jax.Array, rounds: int
) -> tuple[jax.Array, jax.Array]:
    """The clock alone of a round method (``Algorithm.simulate_clock``): :func:`run_rounds`'
    trajectories per round and end times.

    Args:
      schedule: ``(model, key, t0, busy_until) -> RoundSchedule``.
      model: the cluster model.
      key: round r is keyed ``fold_in(key, r)``.
      rounds: static number of rounds.

    Returns:
      ``(trajectories, end_time)``, each ``[rounds]``.
    """
    s = run_rounds(schedule, model, key, rounds)
    return s.num_slots, s.t_end
