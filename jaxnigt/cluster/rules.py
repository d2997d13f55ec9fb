"""Round rules by name: the open registry every round consumer reads.

A *round rule* decides, from the cluster model and the round's drawn compute times, which
gradients count and when the round ends.  It is one function

    rule(model, key, t0, busy_until, size) -> RoundSchedule

(``model`` the :class:`~jaxnigt.cluster.model.ClusterModel`, ``key`` the round's PRNG key,
``t0`` its start, ``busy_until`` ``[n]`` when each worker is free, ``size`` its
:class:`RoundSize`) registered under a name with :func:`register_rule`.  The round engine
(:mod:`jaxnigt.algorithms.engines.round_engine`), the clock alone
(:func:`jaxnigt.cluster.simulation.simulate_rule_rounds`), ``jaxnigt clock --rule`` and
padded programs (:mod:`jaxnigt.run.padded`) look rules up here, so a rule registered from a
user's own module (loaded as a plugin, :mod:`jaxnigt.plugins`) runs everywhere the library's
do.  The library's four (``rennala``, ``malenia``, ``sync``, ``msync``) are registered below
the same way.

**Sizes behind one seam.**  A rule reads every size from its :class:`RoundSize`: the static
bounds its arrays are shaped by (``M``, ``capacity``, ``per_worker``, ``m``; ``model.n`` rows)
and, through :meth:`RoundSize.value`, the run's own value of each, a traced int32 that equals
the bound in an ordinary program and may be smaller in a padded one (runs of several sizes
sharing one program).  The run's number of workers is :func:`worker_count` (``model.n`` is the
record's rows, which a padded program pads).  :func:`draw_times` draws a round's compute times
so that a padded run draws exactly what its unpadded run would, and :func:`collect_until`
turns any stopping time into the round's record with the end-of-round conventions every rule
shares (:mod:`jaxnigt.cluster.rounds`).  A rule registered with ``pads=True`` promises to read
its sizes this way; :func:`check_padding` holds it to that on a small cluster (padded programs
call it before they run a rule that is not the library's own).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.cluster import padding, schedules
from jaxnigt.cluster.model import ClusterModel, sample_compute_times, sample_noise
from jaxnigt.cluster.round_kernels import malenia_threshold
from jaxnigt.cluster.rounds import (
    Collection,
    RoundSchedule,
    ends,
    finish_round,
    sequential_cumsum,
    start_offsets,
    worker_times,
)

__all__ = [
    "RoundSize",
    "Rule",
    "check_padding",
    "collect_until",
    "draw_times",
    "get_rule",
    "kth_smallest",
    "register_rule",
    "rule_names",
    "worker_count",
]

#: The run sizes a padded program may carry as values (:meth:`RoundSize.value`).
RUN_SIZES = ("M", "capacity", "threshold", "m")


class RoundSize(NamedTuple):
    """A round's sizes: the static bounds its arrays are shaped by, and the run's values.

    Attributes:
      M: the round's batch (Rennala's M, or M_init for round 0); in a padded program the
        most any of its runs collects.
      capacity: Malenia's most gradients per worker.
      per_worker: the synchronous round's gradients per worker.
      m: the workers an m-synchronous round waits for.
      run: a padded run's own values (keys of :data:`RUN_SIZES`, traced), or None: the
        bounds are the run's.  Read them with :meth:`value`, never directly.
    """

    M: int
    capacity: int = 1
    per_worker: int = 1
    m: int = 1
    run: Mapping[str, jax.Array] | None = None

    def value(self, name: str) -> jax.Array:
        """The run's size ``name``: its own value in a padded program, else the static bound.

        Args:
          name: ``M``, ``capacity`` or ``m``.

        Returns:
          ``[]`` int32.

        Raises:
          ValueError: another name.
        """
        if name not in ("M", "capacity", "m"):
            raise ValueError(f"RoundSize.value: {name!r}; expected 'M', 'capacity' or 'm'")
        if self.run is not None and name in self.run:
            return jnp.asarray(self.run[name], jnp.int32)
        return jnp.int32(getattr(self, name))

    def padded(self, name: str) -> jax.Array | None:
        """The run's ``name`` where a padded program carries it (the library's kernels
        branch on it; a rule of one's own reads :meth:`value`).

        Args:
          name: one of :data:`RUN_SIZES`.

        Returns:
          ``[]`` int32 (``threshold``: float32), or None in an ordinary program.
        """
        if self.run is None or name not in self.run:
            return None
        value = self.run[name]
        return jnp.asarray(value, jnp.float32 if name == "threshold" else jnp.int32)


@dataclasses.dataclass(frozen=True)
class Rule:
    """A registered round rule.

    Attributes:
      name: the name configs, ``jaxnigt clock --rule`` and algorithms use.
      round: ``(model, key, t0, busy_until, size) -> RoundSchedule``.
      pads: it reads the run's sizes and worker count from :class:`RoundSize` and
        :func:`worker_count`, so its runs may share a padded program.
      cluster_options: the cluster model's named choices that change its rounds
        (``inflight``, ``allreduce``, ``down_exchange``, ``link``).
      overflow: what its ``overflow`` flag means, with the fix (None: never raised).
      doc: one line on what it is (listings show it).
    """

    name: str
    round: Callable[..., RoundSchedule]
    pads: bool = False
    cluster_options: tuple[str, ...] = ("inflight", "allreduce", "down_exchange")
    overflow: str | None = None
    doc: str = ""


_RULES: dict[str, Rule] = {}
_BUILTIN = ("rennala", "malenia", "sync", "msync")


def register_rule(
    name: str,
    *,
    pads: bool = False,
    cluster_options: tuple[str, ...] = ("inflight", "allreduce", "down_exchange"),
    overflow: str | None = None,
) -> Callable[[Callable[..., RoundSchedule]], Callable[..., RoundSchedule]]:
    """A decorator registering a round rule under ``name`` (module docstring).

    Args:
      name: an identifier not yet registered to another function.
      pads: the rule reads its sizes from its :class:`RoundSize` (and the worker count from
        :func:`worker_count`), so a padded program may run it (checked by
        :func:`check_padding` before the first padded run).
      cluster_options: the named cluster choices that change its rounds.
      overflow: what its ``overflow`` flag means (None: never raised).

    Returns:
      The decorator; it returns the function unchanged.

    Raises:
      ValueError: ``name`` is not an identifier or names another function's rule (raised
        by the decorator for the latter).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"rule name {name!r}: expected an identifier")

    def add(fn: Callable[..., RoundSchedule]) -> Callable[..., RoundSchedule]:
        known = _RULES.get(name)
        if known is not None and _key(known.round) != _key(fn):
            raise ValueError(f"rule {name!r} is already registered ({_key(known.round)})")
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _RULES[name] = Rule(name, fn, pads, tuple(cluster_options), overflow, doc)
        return fn

    return add


def _key(fn: Callable) -> str:
    """A function's identity across re-imports of its module (a plugin loaded twice)."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def get_rule(name: str) -> Rule:
    """The rule registered under ``name``.

    Args:
      name: a registered rule's name.

    Returns:
      Its :class:`Rule`.

    Raises:
      ValueError: no rule has that name (the message lists them).
    """
    if name not in _RULES:
        raise ValueError(f"unknown rule {name!r}; registered: {', '.join(_RULES)}")
    return _RULES[name]


def rule_names() -> tuple[str, ...]:
    """Every registered rule.

    Returns:
      The names: the library's own, then the others in registration order.
    """
    return tuple(_RULES)


def builtin(name: str) -> bool:
    """Whether ``name`` is one of the library's own rules."""
    return name in _BUILTIN


# ------------------------------------------------------------------ a rule's building blocks


def worker_count(model: ClusterModel) -> jax.Array:
    """The run's number of workers (a padded record's rows, ``model.n``, are more).

    Args:
      model: the cluster model.

    Returns:
      ``[]`` int32.
    """
    return jnp.int32(model.n) if model.workers is None else jnp.asarray(model.workers, jnp.int32)


def draw_times(model: ClusterModel, key: jax.Array, size: RoundSize, extra: int = 1):
    """A round's compute times, column k each worker's (k+1)-th gradient.

    A padded run draws its own ``M + extra`` columns as its unpadded run does (the columns
    past them and the padded rows never complete).

    Args:
      model: the cluster model.
      key: the round's PRNG key.
      size: the round's sizes (``size.M`` columns, and the run's own in a padded program).
      extra: times beyond the batch (the gradient in flight at the round's end).

    Returns:
      ``[n, size.M + extra]`` float32.
    """
    num = size.M + extra
    run_M = size.padded("M")
    if run_M is None:
        return sample_compute_times(model, key, num)
    draw = lambda k, s: sample_noise(model, k, s)
    tau = model.h[:, None] * padding.flat_draws(draw, key, (model.n, num), run_M + extra)
    live = jnp.arange(num)[None, :] < run_M + extra
    live = live if model.workers is None else live & model.active[:, None]
    return jnp.where(live, tau, jnp.inf)


def kth_smallest(values: jax.Array, k: jax.typing.ArrayLike) -> jax.Array:
    """The ``k``-th smallest of ``values``, flattened.

    Args:
      values: an array of times.
      k: 1-based, traced or static.

    Returns:
      ``[]``: ``inf`` when fewer than ``k`` are finite (``-inf`` for ``k < 1``).
    """
    flat = jnp.sort(jnp.ravel(values))
    k = jnp.asarray(k, jnp.int32)
    return jnp.where(k >= 1, flat[jnp.clip(k - 1, 0, flat.shape[0] - 1)], -jnp.inf)


def collect_until(
    model: ClusterModel,
    tau: jax.Array,
    t0: jax.typing.ArrayLike,
    busy_until: jax.Array,
    stop: Callable[[jax.Array], jax.Array],
    *,
    slots: int,
) -> RoundSchedule:
    """A round that collects every completion up to a stopping time.

    Args:
      model: the cluster model.
      tau: ``[n, K]`` compute times (:func:`draw_times`; ``K > slots`` keeps the gradient
        each worker has in flight at the end).
      t0: ``[]`` the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      stop: ``completions -> T``: given ``[n, slots]`` completion times relative to ``t0``
        (worker i's (k+1)-th gradient of the round in column k, in simulated time, power
        traces applied), the collection's end, relative to ``t0``.
      slots: static most gradients a round uses (columns of ``completions``).

    Returns:
      The round's :class:`~jaxnigt.cluster.rounds.RoundSchedule`: the completions at or
      before ``T`` count (ties: lower worker, then lower k), at most ``slots``; the work in
      flight at ``T`` is cancelled or discarded (``model.inflight``); the AllReduce follows.

    Raises:
      ValueError: ``tau`` has fewer than ``slots`` columns.
    """
    t0 = jnp.asarray(t0, jnp.float32)
    tau = jnp.asarray(tau, jnp.float32)
    if tau.shape[1] < slots:
        raise ValueError(f"collect_until needs {slots} compute times per worker")
    off = start_offsets(t0, busy_until)
    cum = sequential_cumsum(tau)
    comp = ends(model, t0, off, cum)[:, :slots]
    t_rel = jnp.asarray(stop(comp), jnp.float32)
    flat = comp.reshape(-1)
    order = jnp.argsort(flat, stable=True)[:slots]
    valid = flat[order] <= t_rel
    counts = jnp.zeros((tau.shape[0],), jnp.int32).at[order // slots].add(valid.astype(jnp.int32))
    coll = Collection(
        t_rel=t_rel,
        counts=counts,
        slot_worker=order // slots,
        slot_rank=order % slots,
        slot_valid=valid,
        overflow=jnp.bool_(False),
    )
    return finish_round(model, t0, busy_until, worker_times(off, tau, cum, counts), coll)


# ------------------------------------------------------------------ the library's own rules


@register_rule("rennala", pads=True)
def rennala(model, key, t0, busy_until, size: RoundSize) -> RoundSchedule:
    """Rennala: the first M gradients in total."""
    return schedules.rennala(model, key, t0, busy_until, M=size.M, run_M=size.padded("M"))


@register_rule(
    "malenia",
    pads=True,
    cluster_options=("inflight", "down_exchange"),
    overflow="Malenia capacity overflow (raise hparams.malenia_capacity)",
)
def malenia(model, key, t0, busy_until, size: RoundSize) -> RoundSchedule:
    """Malenia: every worker delivers, until the harmonic mean of the counts reaches M / n."""
    run = size.padded("capacity")
    if run is not None:
        run = (run, size.padded("threshold"))
    return schedules.malenia(model, key, t0, busy_until, M=size.M, capacity=size.capacity, run=run)


@register_rule("sync", pads=True, cluster_options=("down_exchange",))
def sync(model, key, t0, busy_until, size: RoundSize) -> RoundSchedule:
    """Synchronous: every worker's per_worker gradients."""
    return schedules.sync(model, key, t0, busy_until, per_worker=size.per_worker)


@register_rule("msync", pads=True)
def msync(model, key, t0, busy_until, size: RoundSize) -> RoundSchedule:
    """m-synchronous: one gradient per worker, the fastest m count."""
    return schedules.msync(model, key, t0, busy_until, m=size.m, run_m=size.padded("m"))


# ------------------------------------------------------------------ padding, checked


@functools.cache
def check_padding(name: str) -> None:
    """Holds a registered rule's padded rounds to its unpadded ones on a small cluster.

    Three rounds of ``name`` on 3 workers (h = 1, 2, 3, exponential noise, M = 3) are run
    as they are and padded to 5 rows: the round ends, the gradients each of the 3 workers
    delivers and their slots must agree.  A rule that counts ``model.n`` where it means
    the run's workers (:func:`worker_count`) fails here, not silently in a sweep.

    Args:
      name: a registered rule's name.

    Raises:
      ValueError: the padded rounds differ (the message says which field), or the rule
        was registered without ``pads``.
    """
    from jaxnigt.cluster.model import make_cluster_model

    rule = get_rule(name)
    if not rule.pads:
        raise ValueError(f"rule {name!r} was registered without pads=True: it runs unpadded")
    model = make_cluster_model(3, h=(1.0, 2.0, 3.0), noise="exponential")
    size = RoundSize(M=3, capacity=18, per_worker=1, m=2)
    # what a padded program gives every rule: the run's sizes as values (round_engine)
    run = {"M": 3, "capacity": 18, "m": 2, "threshold": malenia_threshold(3, 3)}
    run = {k: jnp.asarray(v) for k, v in run.items()}
    key = jax.random.key(0)
    fn = lambda sz: lambda m, k, t, b: rule.round(m, k, t, b, sz)
    plain = schedules.run_rounds(fn(size), model, key, 3)
    padded = schedules.run_rounds(fn(size._replace(run=run)), padding.pad(model, 5), key, 3)
    for field, a, b in (
        ("t_end", plain.t_end, padded.t_end),
        ("counts", plain.counts, padded.counts[:, :3]),
        ("num_slots", plain.num_slots, padded.num_slots),
    ):
        if not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5):
            raise ValueError(
                f"rule {name!r} pads wrongly: its {field} on 3 workers padded to 5 rows "
                f"({np.asarray(b).tolist()}) differs from 3 workers ({np.asarray(a).tolist()}); "
                "count the run's workers with jaxnigt.cluster.worker_count(model), not model.n, "
                "and read sizes with size.value(...)"
            )


def run_values(hyper: Mapping[str, Any] | None, size_key: str) -> dict[str, jax.Array] | None:
    """A padded run's sizes from its traced hyperparameters (None: an ordinary program).

    ``size_key`` names the entry of the round's M (``M``, or ``M_init`` for round 0)."""
    if hyper is None:
        return None
    found = {}
    names = {"M": size_key, "capacity": "malenia_capacity", "m": "msync_m"}
    for name, key in names.items():
        if key in hyper:
            found[name] = hyper[key]
    threshold = {"M": "malenia_threshold", "M_init": "malenia_threshold_init"}[size_key]
    if threshold in hyper:
        found["threshold"] = hyper[threshold]
    return found or None
