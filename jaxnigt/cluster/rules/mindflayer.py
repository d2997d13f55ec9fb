"""MindFlayer (Maranjyan, Shaikh Omar & Richtárik, UAI 2025): attempts under a time limit
(docs/cluster_model.md, "MindFlayer: attempts under a time limit"), read in one place: its
options (:class:`Options`), its draws (:func:`sample_times`), the rule (:func:`mindflayer`,
registered as ``mindflayer``; :func:`round_with` for other options), on given times
(:func:`mindflayer_from_times`) and its weights (:data:`WEIGHTS`: the plain mean of the
round's successful gradients).

A round: worker ``i`` makes ``B_i`` attempts one after another from its start; attempt ``k``
needs ``tau_{i,k} = h_i xi_{i,k}`` of work and succeeds when ``tau_{i,k} <= t_i``; one that
does not is abandoned once ``t_i`` of work went into it, and the next attempt starts at once.
A worker that has made its ``B_i`` attempts waits.  The collection ends at ``T``, when the
last worker with ``B_i >= 1`` has made its last attempt (nothing is in flight then, so
``inflight`` makes no difference); the successful attempts count (slots in completion order,
ties: lower worker, then lower k), then one AllReduce (``allreduce``: all workers or those
with a success) ends the round.  Abandoned attempts are wasted work (``t_i`` each, the
fraction ``t_i / tau_{i,k}`` of a trajectory).  Under a power trace the time limit is on the
worker's work clock, like every rule's decisions (an outage pauses an attempt and its limit).

The options (config ``hparams.mindflayer_time_limit`` / ``mindflayer_attempts``; ``jaxnigt
clock``'s flags of the same meaning):

* the time limits ``t_i``: ``median`` (the default: ``t_i = h_i med(xi)``, about half of
  the attempts successful; the paper's theory leaves ``t_i`` free), ``quantile:U``
  (``t_i = h_i q_U(xi)``, ``q_U`` the smallest ``q`` with ``P(xi <= q) >= U``), a number
  ``c`` (``t_i = c h_i``) or a list of ``n`` times;
* the attempts ``B_i``: ``prescribed`` (the default, the library's reading of the paper's
  allocation, from the distributions below), an integer (every worker) or a list of ``n``.

(``hparams.mindflayer_empty``, what the update does after a round without a success, is the
algorithms' option: :mod:`jaxnigt.algorithms.mindflayer_nigt`.)

The prescription: with ``p_i = P(h_i xi <= t_i)`` the probability that an attempt of worker
``i`` succeeds (``P(xi <= q_U)`` for a quantile limit, ``P(xi <= c)`` for a multiple,
``P(xi <= t_i / h_i)`` for a list), ``T*`` is the least of the times ``k t_i`` (k = 1, 2, ...)
at which ``sum_i p_i floor(T / t_i) >= M (1 - RTOL)`` -- the shortest time in which the
workers' attempts, each taking at most ``t_i``, succeed ``M`` times in expectation -- and
``B_i = floor(T* / t_i)`` (the multiples ``k t_i <= T*``; 0 for a worker with ``p_i = 0``),
so no worker's attempts outlast ``T*`` whatever the draws.  Its static bound,
:func:`columns`, is ``ceil(M / p_min) + 1`` attempts per worker.  A padded program's run
prescribes for its own M and workers, with the draws of its unpadded run.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxnigt.cluster import aggregators
from jaxnigt.cluster.model import ClusterModel
from jaxnigt.cluster.noise_laws import cdf, host_cdf, known, quantile
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    RoundSize,
    WorkerTimes,
    check_static,
    ends,
    finish_round,
    keep,
    leading,
    live_rows,
    rounds_record,
    run_rounds,
    sequential_cumsum,
    start_offsets,
)
from jaxnigt.cluster.rules.blocks import padded_times
from jaxnigt.cluster.rules.registry import register_rule

#: The prescription's relative slack: ``sum_i p_i b_i >= M (1 - RTOL)`` keeps exact ties
#: (``p = 1/2``, ``M`` attempts' worth) on the "enough" side despite float32 rounding.
RTOL = 1e-5
#: The time-limit prescriptions by name (with ``quantile:U``, a number and a list).
MEDIAN, PRESCRIBED = "median", "prescribed"
#: What a round with no successful attempt does to the point (``hparams.mindflayer_empty``):
#: ``skip`` keeps the point and the optimizer's state (the clock goes on), ``zero`` applies
#: the update with a zero gradient (after round 0, NIGT's momentum still moves the point).
EMPTY = ("skip", "zero")
TIME_LIMIT_TEXT = "median, quantile:U (0 < U < 1), a number > 0 (times h_i) or n times > 0"
ATTEMPTS_TEXT = "prescribed, an integer >= 1 or n integers >= 0 (at least one >= 1)"


#: MindFlayer's aggregation: the plain mean of the round's successful gradients (all weights
#: 0 when none succeeded; ``hparams.mindflayer_empty`` says what the update does then).  A
#: deviation from the paper, which divides their sum by the expected number of successes
#: ``sum_i p_i B_i``: both are unbiased for a round with a success (the draws never depend on
#: the trajectories); the paper's scale varies with the number that succeeded.
WEIGHTS = aggregators.sync_weights


# ------------------------------------------------------------------------------ options


def _numbers(value: Any, what: str) -> tuple[float, ...] | None:
    """``value`` as numbers when it is a list (or comma-separated text of them), else None."""
    if isinstance(value, str) and "," in value:
        value = value.split(",")
    if not isinstance(value, list | tuple):
        return None
    try:
        out = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        raise ValueError(f"got {list(value)!r}; expected {what}") from None
    if not out:
        raise ValueError(f"got an empty list; expected {what}")
    return out


def parse_time_limit(value: Any) -> str | float | tuple[float, ...]:
    """A time-limit spec (module docstring), normalized.

    Args:
      value: ``median``, ``quantile:U``, a number, a list of numbers or their comma-separated
        text.

    Returns:
      ``median``, ``quantile:U`` (U as Python writes it), a float or a tuple of floats.

    Raises:
      ValueError: anything else (the message says what is allowed).
    """
    listed = _numbers(value, TIME_LIMIT_TEXT)
    if listed is not None:
        if not all(math.isfinite(x) and x > 0 for x in listed):
            raise ValueError(f"got {list(listed)!r}; expected times > 0")
        return listed
    if isinstance(value, str):
        text = value.strip()
        if text == MEDIAN:
            return MEDIAN
        if text.startswith("quantile:"):
            try:
                level = float(text.split(":", 1)[1])
            except ValueError:
                level = math.nan
            if not 0 < level < 1:
                raise ValueError(f"got {value!r}; expected quantile:U with 0 < U < 1")
            return f"quantile:{level!r}"
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"got {value!r}; expected {TIME_LIMIT_TEXT}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"got {value!r}; expected {TIME_LIMIT_TEXT}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"got {value!r}; expected a multiple of h_i > 0")
    return float(value)


def parse_attempts(value: Any) -> str | int | tuple[int, ...]:
    """An attempts spec (module docstring), normalized.

    Args:
      value: ``prescribed``, an integer, a list of integers or their comma-separated text.

    Returns:
      ``prescribed``, an int or a tuple of ints.

    Raises:
      ValueError: anything else (the message says what is allowed).
    """
    listed = _numbers(value, ATTEMPTS_TEXT)
    if listed is not None:
        if not all(x == int(x) and x >= 0 for x in listed) or max(listed) < 1:
            raise ValueError(f"got {list(listed)!r}; expected {ATTEMPTS_TEXT}")
        return tuple(int(x) for x in listed)
    if isinstance(value, str):
        if value.strip() == PRESCRIBED:
            return PRESCRIBED
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"got {value!r}; expected {ATTEMPTS_TEXT}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"got {value!r}; expected {ATTEMPTS_TEXT}")
    if value < 1:
        raise ValueError(f"got {value!r}; expected an integer >= 1")
    return int(value)


@dataclasses.dataclass(frozen=True)
class Options:
    """MindFlayer's options (static: part of a program's identity).

    Attributes:
      time_limit: the time limits (:func:`parse_time_limit`).
      attempts: the attempts per worker (:func:`parse_attempts`).
      floor: the least success probability ``min_i p_i`` the prescription's bound uses, for
        a numeric or listed time limit with prescribed attempts (:meth:`resolve` computes it
        from the cluster's noise); a quantile's level otherwise (None).
    """

    time_limit: Any = MEDIAN
    attempts: Any = PRESCRIBED
    floor: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "time_limit", parse_time_limit(self.time_limit))
        object.__setattr__(self, "attempts", parse_attempts(self.attempts))

    @property
    def level(self) -> float | None:
        """The quantile level of a quantile time limit (``median``: 0.5), else None."""
        if self.time_limit == MEDIAN:
            return 0.5
        if isinstance(self.time_limit, str):
            return float(self.time_limit.split(":", 1)[1])
        return None

    @property
    def prescribed(self) -> bool:
        """The attempts are the prescription's."""
        return self.attempts == PRESCRIBED

    def checked(self, n: int) -> Options:
        """These options, their lists checked against ``n`` workers.

        Raises:
          ValueError: a list's length is not ``n`` (the message names the option).
        """
        for name, value in (("time_limit", self.time_limit), ("attempts", self.attempts)):
            if isinstance(value, tuple) and len(value) != n:
                raise ValueError(
                    f"mindflayer_{name}: got {len(value)} values; expected one per worker (n = {n})"
                )
        return self

    def resolve(self, model: ClusterModel) -> Options:
        """These options with the prescription's :attr:`floor` from ``model``'s noise and h
        (host values; a no-op where it is not needed).

        Args:
          model: a cluster model with concrete arrays.

        Returns:
          The options.

        Raises:
          ValueError: an attempt can never succeed (success probability 0), a list's length
            is not ``model.n``, or the noise has no quantile or distribution function
            (:mod:`jaxnigt.cluster.noise_laws`) where the options need one.
        """
        self.checked(model.n)
        if (self.prescribed or self.level is not None) and not known(model.noise):
            raise ValueError(
                f"mindflayer: noise {model.noise!r} has no quantile or distribution function "
                "here; give mindflayer_time_limit as a number or a list and the attempts"
            )
        if not self.prescribed or self.level is not None or self.floor is not None:
            return self
        params = np.asarray(model.noise_params, np.float64)
        if isinstance(self.time_limit, tuple):
            ratio = np.asarray(self.time_limit, np.float64) / np.asarray(model.h, np.float64)
        else:
            ratio = np.asarray([self.time_limit])
        p = [host_cdf(model.noise, params, float(x)) for x in ratio]
        if max(p) <= 0:
            raise ValueError(
                f"mindflayer_time_limit {self.time_limit!r}: an attempt never succeeds under "
                f"noise {model.noise!r} (success probability 0); raise the time limit"
            )
        return dataclasses.replace(self, floor=float(min(x for x in p if x > 0)))

    @property
    def spec(self) -> str:
        """The options as one line (``time_limit=... attempts=...``)."""
        show = lambda v: ",".join(f"{x:g}" for x in v) if isinstance(v, tuple) else f"{v}"
        return f"time_limit={show(self.time_limit)} attempts={show(self.attempts)}"


#: The registered rule's options: median limits, prescribed attempts.
DEFAULT = Options()


# ----------------------------------------------------------------------- the pieces


def time_limits(model: ClusterModel, options: Options) -> jax.Array:
    """Each worker's time limit ``t_i`` (a padded row's: its ``h``'s).

    Args:
      model: the cluster model (its ``h`` and noise).
      options: the rule's options (a quantile level, a multiple of ``h_i``, or n values).

    Returns:
      ``[n]`` float32 time limits.

    Raises:
      ValueError: a list of time limits whose length is not the model's n.
    """
    h = jnp.asarray(model.h, jnp.float32)
    if options.level is not None:
        return h * quantile(model, options.level)
    if isinstance(options.time_limit, tuple):
        if len(options.time_limit) != model.n:
            raise ValueError(
                f"mindflayer_time_limit: got {len(options.time_limit)} values for {model.n} rows"
            )
        return jnp.asarray(options.time_limit, jnp.float32)
    return h * jnp.float32(options.time_limit)


def success_probabilities(model: ClusterModel, options: Options, t: jax.Array) -> jax.Array:
    """The probability ``p_i`` that an attempt of worker ``i`` succeeds (module docstring:
    read at ``q_U`` or ``c`` itself, so a jump of a discrete noise is not missed by the
    rounding of ``t_i / h_i``).

    Args:
      model: the cluster model (its noise's distribution function).
      options: the rule's options.
      t: ``[n]`` the time limits (:func:`time_limits`).

    Returns:
      ``[n]`` float32 success probabilities.
    """
    if options.level is not None:
        return jnp.broadcast_to(cdf(model, quantile(model, options.level)), t.shape)
    if isinstance(options.time_limit, tuple):
        return cdf(model, t / jnp.asarray(model.h, jnp.float32))
    return jnp.broadcast_to(cdf(model, jnp.float32(options.time_limit)), t.shape)


def _ratio(options: Options) -> np.float32:
    """``1 / p_min`` of the bound, float32."""
    floor = options.level if options.level is not None else options.floor
    if floor is None:
        raise ValueError(
            "mindflayer: prescribed attempts with a numeric or listed time limit need "
            "Options.resolve(model) first (the least success probability)"
        )
    return np.float32(1.0 / floor)


def columns(options: Options, M: Any) -> Any:
    """The most attempts a worker makes in a round of batch ``M``: the draws' columns.

    ``ceil(M / p_min) + 1`` for prescribed attempts (the fastest worker alone reaches
    ``M`` expected successes within ``ceil(M / p_min)`` attempts, so ``T*`` is at most that
    many of its limits and nobody fits more; one more for the rounding), else the largest
    ``B_i``.  Computed in float32 the same way for a static and a traced ``M``.

    Args:
      options: the options.
      M: the batch, a Python int (static) or a traced int.

    Returns:
      A Python int for a static ``M`` (or given attempts), else a traced int32.
    """
    if not options.prescribed:
        a = options.attempts
        return max(a) if isinstance(a, tuple) else int(a)
    r = _ratio(options)
    if isinstance(M, int):
        return int(np.ceil(np.float32(M) * r)) + 1
    return jnp.ceil(jnp.asarray(M, jnp.float32) * r).astype(jnp.int32) + 1


def prescribed_attempts(
    model: ClusterModel, t: jax.Array, p: jax.Array, M: Any, cols: Any, K: int
) -> jax.Array:
    """The paper's ``B_i`` (module docstring): the multiples ``k t_i`` (``k = 1 ... cols``)
    up to ``T*``, the least of them at which ``sum_i p_i floor(T / t_i) >= M (1 - RTOL)``.

    Args:
      model: the cluster model (the run's rows: :func:`~jaxnigt.cluster.rounds.live_rows`).
      t: ``[n]`` time limits.
      p: ``[n]`` success probabilities.
      M: the run's batch.
      cols: the run's bound (:func:`columns`).
      K: the static bound.

    Returns:
      ``[n]`` int32 (0 on a padded row and for a worker with ``p_i = 0``).
    """
    k = jnp.arange(1, K + 1, dtype=jnp.float32)
    cand = t[:, None] * k[None, :]
    cand = keep(keep(cand, leading(K, cols), jnp.inf, axis=1), live_rows(model), jnp.inf, axis=0)
    cand = jnp.where(p[:, None] > 0, cand, jnp.inf)  # a worker that never succeeds makes none
    events = jnp.sort(cand.reshape(-1))
    need = jnp.asarray(M, jnp.float32) * jnp.float32(1.0 - RTOL)
    size = events.shape[0]

    def holds(T):
        return jnp.sum(p * jnp.sum(cand <= T, axis=1).astype(jnp.float32)) >= need

    def search(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        ok = holds(events[jnp.minimum(mid, size - 1)])
        going = lo < hi
        return jnp.where(going & ~ok, mid + 1, lo), jnp.where(going & ok, mid, hi)

    top = jnp.sum(jnp.isfinite(events)).astype(jnp.int32) - 1  # the largest: it always holds
    _, hi = lax.fori_loop(0, size.bit_length() + 1, search, (jnp.int32(0), top))
    T = events[jnp.clip(hi, 0, size - 1)]
    return jnp.sum(cand <= T, axis=1).astype(jnp.int32)


def attempts(model: ClusterModel, options: Options, t: jax.Array, size: RoundSize):
    """Each worker's attempts ``B_i`` of a round, and the columns of its draw.

    Args:
      model: the cluster model.
      options: the rule's options (``prescribed``, one count, or n counts).
      t: ``[n]`` the time limits.
      size: the round's sizes (``M``: the expected successes the prescription aims at).

    Returns:
      ``([n] int32 B_i, the run's columns, the static columns)``.

    Raises:
      ValueError: a list of attempts whose length is not the model's n.
    """
    if options.prescribed:
        K, cols = columns(options, size.M), columns(options, size.value("M"))
        p = success_probabilities(model, options, t)
        return prescribed_attempts(model, t, p, size.value("M"), cols, K), cols, K
    a = options.attempts
    B = jnp.asarray(a if isinstance(a, tuple) else (a,) * model.n, jnp.int32)
    if B.shape[0] != model.n:
        raise ValueError(f"mindflayer_attempts: got {B.shape[0]} values for {model.n} rows")
    K = columns(options, size.M)
    return keep(B, live_rows(model), 0), K, K


def sample_times(
    model: ClusterModel, key: jax.Array, size: RoundSize, options: Options = DEFAULT
) -> jax.Array:
    """The round's compute times ``[n, K]`` (column k: each worker's (k+1)-th attempt):
    a padded run's are its unpadded run's draw (:func:`~jaxnigt.cluster.rules.blocks.
    padded_times`), its other entries ``inf``.

    Args:
      model: the cluster model.
      key: the round's PRNG key.
      size: the round's sizes (``M``).
      options: the options (their bound: :func:`columns`).

    Returns:
      ``[n, columns(options, size.M)]`` float32.
    """
    K, cols = columns(options, size.M), columns(options, size.value("M"))
    return padded_times(model, key, (model.n, K), cols)


# -------------------------------------------------------------------------- the rule


def round_with(options: Options):
    """The round rule of ``options`` (resolved: :meth:`Options.resolve`).

    Args:
      options: the options.

    Returns:
      ``rule(model, key, t0, busy_until, size) -> RoundSchedule``.
    """

    def rule(model, key, t0, busy_until, size: RoundSize) -> RoundSchedule:
        tau = sample_times(model, key, size, options)
        return _round(model, tau, t0, busy_until, size, options)

    return rule


@register_rule("mindflayer", pads=True, cluster_options=("allreduce", "down_exchange"))
def mindflayer(
    model: ClusterModel, key: jax.Array, t0: jax.typing.ArrayLike, busy_until, size: RoundSize
) -> RoundSchedule:
    """MindFlayer: B_i attempts per worker, each abandoned past its time limit t_i.

    The registered rule's options are :data:`DEFAULT` (median limits, prescribed attempts
    for the batch ``size.M``); :func:`round_with` makes the rule of others.

    Args:
      model: the cluster model.
      key: the round's PRNG key (:func:`sample_times`).
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      size: the round's sizes (``M``: the expected successes the attempts are prescribed for).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.
    """
    return round_with(DEFAULT)(model, key, t0, busy_until, size)


def mindflayer_from_times(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    *,
    M: int,
    options: Options = DEFAULT,
) -> RoundSchedule:
    """A round from given compute times ``tau`` ``[n, K >= columns(options, M)]``.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times, column k each worker's (k+1)-th attempt.
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      M: static batch (the prescription's).
      options: the options (resolved).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`.

    Raises:
      ValueError: ``M`` is no size or ``tau`` has too few columns.
    """
    size = RoundSize(M=check_static("M", M))
    K = columns(options, size.M)
    if tau.shape[1] < K:
        raise ValueError(f"mindflayer needs {K} compute times per worker, got {tau.shape[1]}")
    return _round(model, jnp.asarray(tau)[:, :K], t0, busy_until, size, options)


def _round(model: ClusterModel, tau, t0, busy_until, size: RoundSize, options: Options):
    t0 = jnp.asarray(t0, jnp.float32)
    tau = jnp.asarray(tau, jnp.float32)
    n = tau.shape[0]
    t = time_limits(model, options)
    B, _, K = attempts(model, options, t, size)
    tau = tau[:, :K]
    made = jnp.arange(K)[None, :] < B[:, None]  # the attempts worker i makes
    success = made & (tau <= t[:, None])
    work = jnp.where(made, jnp.minimum(tau, t[:, None]), 0.0)
    off = start_offsets(t0, busy_until)
    cum = sequential_cumsum(work)
    done = ends(model, t0, off, cum)  # each attempt's end (success or abandon), relative
    has = B >= 1
    last = jnp.take_along_axis(done, jnp.maximum(B - 1, 0)[:, None], axis=1)[:, 0]
    t_rel = jnp.max(jnp.where(has, last, -jnp.inf))
    t_rel = jnp.where(jnp.any(has), t_rel, 0.0)
    # the successful attempts first, in completion order (ties: lower worker, then lower k)
    flat_ok = success.reshape(-1)
    order = jnp.argsort(jnp.where(flat_ok, done.reshape(-1), jnp.inf), stable=True)
    order = order[jnp.argsort(~flat_ok[order], stable=True)]
    counts = jnp.sum(success, axis=1).astype(jnp.int32)
    total = jnp.take_along_axis(cum, jnp.maximum(B - 1, 0)[:, None], axis=1)[:, 0]
    total = jnp.where(has, total, 0.0)
    coll = Collection(
        t_rel=t_rel,
        counts=counts,
        slot_worker=order // K,
        slot_rank=order % K,
        slot_valid=flat_ok[order],
        overflow=jnp.bool_(False),
    )
    times = WorkerTimes(off, total, jnp.zeros((n,), jnp.float32), total)
    sched = finish_round(model, t0, busy_until, times, coll, has_inflight=False)
    abandoned = made & ~success
    safe = jnp.where(abandoned & (tau > 0), tau, 1.0)
    return sched._replace(
        time_used=jnp.sum(jnp.where(success, tau, 0.0)).astype(jnp.float32),
        time_wasted=jnp.sum(jnp.where(abandoned, work, 0.0)).astype(jnp.float32),
        traj_wasted=jnp.sum(jnp.where(abandoned, jnp.clip(work / safe, 0.0, 1.0), 0.0)),
    )


# ----------------------------------------------------------------------- the clock


@functools.partial(jax.jit, static_argnames=("M", "rounds", "options"))
def simulate_rounds(
    model: ClusterModel, key: jax.Array, *, M: int, rounds: int, options: Options = DEFAULT
) -> dict[str, jax.Array]:
    """``rounds`` rounds of the rule of ``options`` from time 0, round ``r`` keyed
    ``fold_in(key, r)``: :func:`jaxnigt.cluster.simulation.simulate_rule_rounds`'s arrays
    (``jaxnigt clock --rule mindflayer``).

    Args:
      model: the cluster model.
      key: the run's key.
      M: the batch (static).
      rounds: static.
      options: the options (resolved; static).

    Returns:
      dict of per-round arrays (``t_start``, ``t_collect_end``, ``t_end``, ``grads_used``,
      ``time_wasted``, ``traj_wasted``, ``time_used``, ``comms``, ``overflow``, ``counts``,
      ``busy_until``).
    """
    rule = round_with(options)
    size = RoundSize(M=M)
    s = run_rounds(lambda m, k, t0, busy: rule(m, k, t0, busy, size), model, key, rounds)
    return rounds_record(s)
