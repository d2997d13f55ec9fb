"""The library's round rules at static sizes, for code of one's own, tests and references.

Each rule reads in one module of :mod:`jaxnigt.cluster.rules` (its draws, its rule and its
weights), written for a :class:`~jaxnigt.cluster.rounds.RoundSize` so that one program serves
ordinary and padded runs.  Here are the same rules with their sizes as plain arguments
(:func:`rennala` with ``M=``, :func:`malenia` with ``M=, capacity=``, :func:`sync` with
``per_worker=``, :func:`msync` with ``m=``), the rules on given compute times
(``*_from_times``), Rennala's two halves (:func:`sample_rennala_times`,
:func:`rennala_round`), chaining rounds from time 0 (:func:`run_rounds`, :func:`round_clock`)
and the rules' default sizes (:func:`sync_batch`, :func:`default_malenia_capacity`,
:func:`default_msync_m`).

Compute times drawn per round: Malenia ``capacity + 1`` per worker and sync ``per_worker``
(the extra column is the in-flight gradient).  Rennala draws every worker's first time and
``M`` more only for the ``min(n, M)`` workers that can contribute, so its cost does not grow
with ``n * M``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax

from jaxnigt.cluster.model import ClusterModel
from jaxnigt.cluster.rounds import (
    RoundSchedule,
    RoundSize,
    check_static,
    run_rounds,
    sequential_cumsum,
    start_offsets,
)
from jaxnigt.cluster.rules import malenia as _malenia
from jaxnigt.cluster.rules import msync as _msync
from jaxnigt.cluster.rules import rennala as _rennala
from jaxnigt.cluster.rules import sync as _sync
from jaxnigt.cluster.rules.malenia import MALENIA_RTOL, malenia_from_times, malenia_threshold
from jaxnigt.cluster.rules.msync import msync_from_times
from jaxnigt.cluster.rules.rennala import rennala_candidates, rennala_from_times
from jaxnigt.cluster.rules.sync import sync_from_times

__all__ = [
    "MALENIA_RTOL",
    "MATCH_M",
    "RoundSchedule",
    "default_malenia_capacity",
    "default_msync_m",
    "malenia",
    "malenia_from_times",
    "malenia_threshold",
    "msync",
    "msync_from_times",
    "rennala",
    "rennala_candidates",
    "rennala_from_times",
    "rennala_round",
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

    Args:
      M: the batch.
      n: the number of workers (unused: the default does not depend on it).

    Returns:
      The capacity.
    """
    del n
    return 6 * int(M)


def default_msync_m(n: int) -> int:
    """``ceil(n / 2)``: the round waits for the faster half of the workers.

    Args:
      n: the number of workers.

    Returns:
      m.
    """
    return -(-int(n) // 2)


def rennala(model: ClusterModel, key: jax.Array, t0, busy_until: jax.Array, *, M: int):
    """Rennala round (:mod:`jaxnigt.cluster.rules.rennala`): the first ``M`` gradients.

    Args:
      model: the cluster model (its times, ``inflight`` and ``allreduce``).
      key: PRNG key for this round's compute times.
      t0: ``[]`` round start.
      busy_until: ``[n]`` absolute time each worker is free to start.
      M: static batch size.

    Returns:
      The round's :class:`RoundSchedule`.

    Raises:
      ValueError: ``M`` is not an integer >= 1.

    Example::

      model = make_cluster_model(10, h="sqrt", noise="exponential")
      s = rennala(model, key, 0.0, jnp.zeros(10), M=50)
    """
    return _rennala.rennala(model, key, t0, busy_until, RoundSize(M=check_static("M", M)))


def sample_rennala_times(model: ClusterModel, key: jax.Array, off: jax.Array, *, M: int, t0=0.0):
    """The compute times one Rennala round needs (:func:`jaxnigt.cluster.rules.rennala.
    sample_times`).

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times.
      off: ``[n]`` each worker's start relative to the round's (:func:`start_offsets`).
      M: static batch size.
      t0: the round's start (where a power trace maps work to time).

    Returns:
      ``(first, rows, tau_rows)``.
    """
    return _rennala.sample_times(model, key, off, RoundSize(M=check_static("M", M)), t0)


def rennala_round(model: ClusterModel, t0, busy_until, first, rows, tau_rows, *, M: int):
    """Which gradients land in a Rennala round, from its candidates' compute times
    (:func:`jaxnigt.cluster.rules.rennala.rennala_round`).

    Args:
      model: the cluster model.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      first: ``[n]`` every worker's first compute time.
      rows: ``[m]`` the candidate workers.
      tau_rows: ``[m, M + 1]`` their compute times.
      M: static batch size.

    Returns:
      The round's :class:`RoundSchedule`.
    """
    size = RoundSize(M=check_static("M", M))
    return _rennala.rennala_round(model, t0, busy_until, first, rows, tau_rows, size)


def malenia(model: ClusterModel, key, t0, busy_until, *, M: int, capacity: int):
    """Malenia round (:mod:`jaxnigt.cluster.rules.malenia`), ``S = n * capacity`` slots.

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times (``capacity + 1`` per worker).
      t0: ``[]`` round start.
      busy_until: ``[n]`` when each worker is free to start.
      M: static batch size.
      capacity: static most gradients per worker (:func:`default_malenia_capacity`).

    Returns:
      The round's :class:`RoundSchedule`.
    """
    size = RoundSize(M=check_static("M", M), capacity=check_static("capacity", capacity))
    return _malenia.malenia(model, key, t0, busy_until, size)


def sync(model: ClusterModel, key, t0, busy_until, *, per_worker: int):
    """Synchronous round (:mod:`jaxnigt.cluster.rules.sync`), ``S = n * per_worker`` slots.

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times.
      t0: ``[]`` round start.
      busy_until: ``[n]`` when each worker is free to start.
      per_worker: static gradients per worker (:func:`sync_batch`).

    Returns:
      The round's :class:`RoundSchedule`.
    """
    size = RoundSize(M=1, per_worker=check_static("per_worker", per_worker))
    return _sync.sync(model, key, t0, busy_until, size)


def msync(model: ClusterModel, key, t0, busy_until, *, m: int):
    """m-synchronous round (:mod:`jaxnigt.cluster.rules.msync`), ``S = m`` slots.

    Args:
      model: the cluster model.
      key: PRNG key of the round's compute times.
      t0: ``[]`` round start.
      busy_until: ``[n]`` when each worker is free to start.
      m: static number of workers the round waits for.

    Returns:
      The round's :class:`RoundSchedule`.
    """
    return _msync.msync(model, key, t0, busy_until, RoundSize(M=1, m=check_static("m", m)))


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
