"""The cluster model as one value: a :class:`ClusterModel` record, built once and passed whole.

A run's simulated cluster is this record (docs/cluster_model.md).  Its per-worker arrays are
data: the compute and communication times (``h``, ``kappa``), the time of a per-step message
(``message``) and each worker's environment type (``worker_types``), with the noise's
parameters.  A jitted program takes the record as an argument, so none of them is a constant
of the program (compile time does not grow with n).  The named choices are static fields:
the noise kind and :data:`CHOICES`:

* ``inflight``: what happens to a gradient still being computed when a round ends.
* ``link``: the server link of the exchanges of the per-arrival and per-step methods.
* ``allreduce``: who takes part in a round's AllReduce.
* ``down_exchange``: whether a worker that is down (power 0) waits to exchange.

The record's ``power`` is the workers' computation power over time (:mod:`jaxnigt.cluster.power`):
None for constant power (the constant model, exactly), a :class:`~jaxnigt.cluster.power.
PowerTrace`, or :class:`~jaxnigt.cluster.power.Outages` that each run draws from its key
(:func:`realize`).

Each :class:`Choice` is the one definition of a choice: its name, its allowed values (the
default first) and its help text.  The config's ``cluster:`` keys, their checks and reference
entries (:mod:`jaxnigt.config.schema`), ``jaxnigt clock``'s flags and the record's
construction from a config (:func:`from_config`) are made from :data:`CHOICES`.  So a new named
option is a :class:`Choice` in :data:`CHOICES` and a static field of the same name here, the
code that reads it (``model.<name>``), the ``Traits.cluster_options`` of the algorithms it
changes and its docs (docs/development.md, "Adding a cluster option", names the files).

The draws of the compute times are here too (:func:`sample_compute_times`): they read the
record's ``h`` and noise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.cluster import power as power_lib
from jaxnigt.cluster import power_sources, timing


class Choice(NamedTuple):
    """A named choice of the cluster model.

    Attributes:
      name: the record's field, the config's ``cluster.<name>`` and ``jaxnigt clock``'s flag.
      values: the allowed values; the first is the default.
      help: what it chooses, in words (the config's reference and the flag's help).
    """

    name: str
    values: tuple[str, ...]
    help: str

    @property
    def default(self) -> str:
        """The first allowed value."""
        return self.values[0]


INFLIGHT = Choice(
    "inflight",
    ("cancel", "discard"),
    "what happens to a gradient still being computed when a round ends: cancel stops it "
    "(the worker starts on the new point at once), discard lets it finish and throws it away "
    "(the worker is busy until then)",
)
LINK = Choice(
    "link",
    ("shared", "independent"),
    "the server link of the per-arrival and per-step methods: shared (one link, exchanges "
    "served one at a time, first come first served) or independent (exchanges overlap)",
)
ALLREDUCE = Choice(
    "allreduce",
    ("all", "contributors"),
    "who takes part in a round's AllReduce: all workers (cost max_i κ_i) or the contributors "
    "(b_i ≥ 1; the others receive the new point over their own link)",
)
DOWN_EXCHANGE = Choice(
    "down_exchange",
    ("wait", "free"),
    "what a worker that is down (computation power 0, cluster.power) does with its exchanges: "
    "wait (it neither computes nor exchanges: an exchange pauses while it is down, an "
    "AllReduce waits until every participant is up) or free (exchanges ignore the power; only "
    "computing stops)",
)
#: The named choices, in the order of the config's keys.
CHOICES = (INFLIGHT, LINK, ALLREDUCE, DOWN_EXCHANGE)


def check_choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``.

    Args:
      name: the option, the config field or the flag (named in the error).
      value: the value given.
      allowed: the allowed values.

    Returns:
      ``value``.

    Raises:
      ValueError: ``NAME: got VALUE; expected one of [...]``.
    """
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name}: got {value!r}; expected one of {list(allowed)}")
    return value


def _static(default: str) -> Any:
    """A static field of the record (part of a program's identity, not an argument)."""
    return dataclasses.field(default=default, metadata={"static": True})


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ClusterModel:
    """The simulated cluster of ``n`` workers: per-worker arrays (data) and named choices
    (static).

    Attributes:
      h: ``[n]`` float32 compute time per stochastic gradient (already ``H * h`` with
        ``per_step``).
      kappa: ``[n]`` float32 time of one vector exchange of each worker (already times
        ``d**0.25`` with ``scale_by_dim``).
      message: ``[n]`` float32 time of one small exchange of each worker (an observation up,
        an action down: central inference's per-step message).
      noise_params: ``[3]`` float32 the noise's parameters (zero-padded), traced.
      worker_types: ``[n]`` int32 environment type of each worker.
      noise: the noise kind, one of :data:`jaxnigt.cluster.timing.NOISES`.
      inflight: one of :data:`INFLIGHT`'s values.
      link: one of :data:`LINK`'s values.
      allreduce: one of :data:`ALLREDUCE`'s values.
      down_exchange: one of :data:`DOWN_EXCHANGE`'s values.
      power: the computation power over time: None (constant: speed 1), a
        :class:`~jaxnigt.cluster.power.PowerTrace` (``[n, K]``) or
        :class:`~jaxnigt.cluster.power.Outages` to draw per run (:func:`realize`).
      workers: ``[]`` int32 the run's number of workers when the arrays are padded to
        ``n`` rows (:mod:`jaxnigt.cluster.padding`: the first ``workers`` rows are the run's,
        the others never complete); None: all ``n``.
    """

    h: jax.Array
    kappa: jax.Array
    message: jax.Array
    noise_params: jax.Array
    worker_types: jax.Array
    noise: str = _static("deterministic")
    inflight: str = _static(INFLIGHT.default)
    link: str = _static(LINK.default)
    allreduce: str = _static(ALLREDUCE.default)
    down_exchange: str = _static(DOWN_EXCHANGE.default)
    power: Any = None
    workers: Any = None

    def __post_init__(self):
        check_choice("noise", self.noise, timing.NOISES)
        for choice in CHOICES:
            check_choice(choice.name, getattr(self, choice.name), choice.values)

    @property
    def n(self) -> int:
        """The number of workers (static: the arrays' length; a padded record's rows, of which
        :attr:`workers` are the run's)."""
        return self.h.shape[-1]

    @property
    def active(self) -> jax.Array | None:
        """``[n]`` bool: the rows that are the run's workers (padded records,
        :mod:`jaxnigt.cluster.padding`); None when every row is."""
        if self.workers is None:
            return None
        return jnp.arange(self.n) < self.workers

    @property
    def trace(self) -> power_lib.PowerTrace | None:
        """The drawn power trace (None: constant power).

        Raises:
          ValueError: the record's outages were not drawn yet (:func:`realize`).
        """
        if isinstance(self.power, power_lib.Outages):
            raise ValueError("the cluster model's outages are drawn per run: realize(model, key)")
        return self.power

    @property
    def exchanges_wait(self) -> bool:
        """Exchanges follow the power: a trace is set and ``down_exchange`` is ``wait``."""
        return self.trace is not None and self.down_exchange == "wait"


def realize(model: ClusterModel, key: jax.Array) -> tuple[ClusterModel, Any]:
    """The record of one run, its outages drawn (other records are returned as they are).

    Args:
      model: the cluster model.
      key: the run's key; the outages are drawn from ``fold_in(key, power.OUTAGE_TAG)``.

    Returns:
      ``(model, drawn)``: the record with a :class:`~jaxnigt.cluster.power.PowerTrace`, and
      the drawn trace (None when nothing was drawn: the run keeps no copy).
    """
    if not isinstance(model.power, power_lib.Outages):
        return model, None
    trace = power_lib.draw_outages(model.power, jax.random.fold_in(key, power_lib.OUTAGE_TAG))
    return dataclasses.replace(model, power=trace), trace


def run_draws(model: ClusterModel, run: ClusterModel) -> Any:
    """What a run's record (``realize(model, key)[0]``) drew per run: its trace when
    ``model``'s outages are drawn per run, else None (the run keeps no copy).

    Args:
      model: the cluster model.
      run: one run's record of it.

    Returns:
      The drawn :class:`~jaxnigt.cluster.power.PowerTrace`, or None.
    """
    return run.power if isinstance(model.power, power_lib.Outages) else None


def with_trace(model: ClusterModel, drawn: Any) -> ClusterModel:
    """``model`` with a run's drawn trace (:func:`realize`); ``model`` when none was drawn."""
    return model if drawn is None else dataclasses.replace(model, power=drawn)


def _float32(values: Any) -> jax.Array:
    return jnp.asarray(np.asarray(values, np.float64), jnp.float32)


def _at_least_one(what: str, value: Any) -> int:
    if value is None or int(value) < 1:
        raise ValueError(f"{what} >= 1, got {value!r}")
    return int(value)


def _sized(kappa32: jax.Array, ratio: float) -> jax.Array:
    """The time of a message ``ratio`` times a vector's size: ``kappa * ratio ** (1/4)``,
    from κ as the record holds it (float32)."""
    if ratio == 1:
        return kappa32
    return _float32(np.asarray(kappa32, np.float64) * ratio**0.25)


def make_cluster_model(
    n: int,
    *,
    h: Any = "equal",
    noise: str = "deterministic",
    kappa: Any = 0.0,
    scale_by_dim: bool = False,
    dim: int | None = None,
    per_step: bool = False,
    horizon: int | None = None,
    worker_types: Any = None,
    message: Any = None,
    message_size: int | None = None,
    power: str = "constant",
    power_horizon: float | None = None,
    **choices: str,
) -> ClusterModel:
    """Builds a validated :class:`ClusterModel`.

    Args:
      n: number of workers.
      h: compute-time profile (:func:`~jaxnigt.cluster.timing.profile_values`), values ``> 0``.
      noise: noise spec (:func:`~jaxnigt.cluster.timing.parse_noise`).
      kappa: communication-time profile, values ``>= 0``; default all zero.
      scale_by_dim: multiply ``kappa`` by ``dim ** 0.25`` (docs/cluster_model.md).
      dim: number of policy parameters ``d`` (required with ``scale_by_dim``).
      per_step: ``h`` is a per-environment-step time; a trajectory costs ``horizon * h``.
      horizon: trajectory length ``H`` (required with ``per_step``).
      worker_types: ``[n]`` environment type of each worker (default all 0).
      message: each worker's per-step message time (a profile, ``>= 0``); default ``kappa``,
        with ``scale_by_dim`` times ``(message_size / dim) ** 0.25`` (the message's size).
      message_size: the size of a per-step message.
      power: the computation power (:data:`jaxnigt.cluster.power_sources.SOURCES`) and
        ``power_horizon`` the time a drawn or periodic trace covers (the budget).
      **choices: the named choices (:data:`CHOICES`) by name; default their defaults.

    Returns:
      The record, its arrays on the default device.

    Raises:
      ValueError: naming the bad argument (TypeError: an argument that is no choice).
    """
    h_v = timing.profile_values(h, n, name="h")
    k_v = timing.profile_values(kappa, n, name="kappa", allow_zero=True)
    kind, params = timing.parse_noise(noise)
    if scale_by_dim:
        k_v = k_v * float(_at_least_one("scale_by_dim needs dim", dim)) ** 0.25
    if per_step:
        h_v = h_v * _at_least_one("per_step needs horizon", horizon)
    kappa32 = _float32(k_v)
    if message is not None:
        message32 = _float32(timing.profile_values(message, n, name="message", allow_zero=True))
    else:
        message32 = _sized(kappa32, message_size / dim if scale_by_dim and message_size else 1)
    types = jnp.asarray(np.zeros(n) if worker_types is None else worker_types, jnp.int32)
    noise_params = jnp.asarray(timing.padded_params(params))
    trace = power_sources.build(power, n, power_horizon)
    return ClusterModel(
        _float32(h_v), kappa32, message32, noise_params, types, kind, **choices, power=trace
    )


def from_config(
    cluster: Any,
    *,
    worker_types: Any = None,
    dim: int | None = None,
    horizon: int | None = None,
    message: Any = None,
    message_size: int | None = None,
    budget: float | None = None,
) -> ClusterModel:
    """The record of a config's ``cluster:`` section.

    Args:
      cluster: the section (``jaxnigt.config.ClusterConfig``: ``n``, ``h``, ``noise``,
        ``kappa``, ``scale_by_dim``, ``per_step`` and every choice of :data:`CHOICES`).
      worker_types: ``[n]`` environment type of each worker (default all 0).
      dim: the number of policy parameters (``scale_by_dim``).
      horizon: the trajectory length (``per_step``).
      message: each worker's per-step message time (see :func:`make_cluster_model`).
      message_size: the size of a per-step message (see :func:`make_cluster_model`).
      budget: the run's simulated-time budget: what a drawn power trace covers unless the
        section's ``power_horizon`` says.

    Returns:
      The :class:`ClusterModel`.

    Raises:
      ValueError: as :func:`make_cluster_model`.
    """
    return make_cluster_model(
        cluster.n,
        h=cluster.h,
        noise=cluster.noise,
        kappa=cluster.kappa,
        scale_by_dim=cluster.scale_by_dim,
        dim=dim,
        per_step=cluster.per_step,
        horizon=horizon,
        worker_types=worker_types,
        message=message,
        message_size=message_size,
        power=cluster.power,
        power_horizon=cluster.power_horizon if cluster.power_horizon is not None else budget,
        **{choice.name: getattr(cluster, choice.name) for choice in CHOICES},
    )


def sample_noise(model: ClusterModel, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Draws the multiplicative noise ``xi`` of the model's kind.

    Args:
      model: the cluster model (its noise kind and parameters).
      key: PRNG key; every draw comes from it.
      shape: the shape of the draw (static).

    Returns:
      ``xi`` of ``shape``, float32.
    """
    return timing.draw_noise(model.noise, model.noise_params, key, shape)


def sample_compute_times(model: ClusterModel, key: jax.Array, num: int) -> jax.Array:
    """Samples ``tau_{i,k} = h_i * xi_{i,k}`` for ``num`` consecutive gradients per worker.

    Args:
      model: the cluster model.
      key: PRNG key; every draw comes from it.
      num: static number of gradients per worker.

    Returns:
      ``[n, num]`` float32 compute times; row ``i`` is worker ``i``'s gradients in order
      (``inf`` in a padded row: it never completes).
    """
    tau = model.h[:, None] * sample_noise(model, key, (model.n, num))
    if model.workers is None:
        return tau
    return jnp.where(model.active[:, None], tau, jnp.inf)  # a padded row never completes


def sample_worker_compute_time(model: ClusterModel, key: jax.Array, worker: jax.Array) -> jax.Array:
    """Samples one compute time ``h_worker * xi`` for a single worker.

    Args:
      model: the cluster model.
      key: PRNG key of the draw.
      worker: ``[]`` int32 the worker.

    Returns:
      ``[]`` float32.
    """
    return model.h[worker] * sample_noise(model, key, ())
