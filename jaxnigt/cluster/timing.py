"""Time model of the simulated cluster (docs/cluster_model.md).

Worker ``i`` needs ``tau_{i,k} = h_i * xi_{i,k}`` time units for its ``k``-th stochastic
gradient, where ``h_i`` is a per-worker scale and ``xi`` is noise with mean 1 (except for the
literal ``straggler`` reading below).  Exchanging one ``d``-dimensional vector costs worker
``i`` the time ``kappa_i``.

Profiles (``i`` is 1-based):

* ``equal``      -- ``1``
* ``sqrt``       -- ``sqrt(i)``
* ``linear``     -- ``i``
* ``decreasing`` -- ``sqrt(n + 1 - i)``: the ``sqrt`` profile reversed, so worker 0 is the
  slowest.  (The paper leaves ``decreasing`` open; this is the project's choice.)

Noise kinds (``xi``):

* ``deterministic``       -- ``xi = 1``.
* ``exponential``         -- ``xi ~ Exp(1)`` (mean 1).
* ``lognormal:SIGMA``     -- ``xi = exp(sigma z - sigma^2 / 2)``, ``z ~ N(0, 1)`` (mean 1).
* ``uniform:LOW:HIGH``    -- ``xi ~ U(low, high)`` as given (mean ``(low + high) / 2``).
* ``straggler:P:FACTOR``  -- ``xi = factor`` with probability ``p``, else ``1``: the literal
  reading of "the gradient takes ``factor`` times longer", so the mean is
  ``1 + p (factor - 1)``, not 1.

Noise parameters are stored as a traced ``[3]`` array, so sweeping over them does not
recompile; only the noise *kind* is static.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

PROFILES = ("equal", "sqrt", "linear", "decreasing")
NOISES = ("deterministic", "exponential", "lognormal", "uniform", "straggler")
NOISE_FORMS = (
    "deterministic",
    "exponential",
    "lognormal:SIGMA",
    "uniform:LOW:HIGH",
    "straggler:P:FACTOR",
)
_NOISE_ARITY = {"deterministic": 0, "exponential": 0, "lognormal": 1, "uniform": 2, "straggler": 2}


def _profile(name: str, n: int) -> np.ndarray:
    i = np.arange(1, n + 1, dtype=np.float64)
    if name == "equal":
        return np.ones(n)
    if name == "sqrt":
        return np.sqrt(i)
    if name == "linear":
        return i
    if name == "decreasing":
        return np.sqrt(n + 1 - i)
    raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(PROFILES)} or a list")


def profile_values(
    spec: str | float | Sequence[float] | np.ndarray,
    n: int,
    *,
    name: str = "h",
    allow_zero: bool = False,
) -> np.ndarray:
    """Per-worker values ``[n]`` (float64) from a profile name, a number, or a list.

    Args:
      spec: a profile name (``equal|sqrt|linear|decreasing``), a number (same value for every
        worker), a comma-separated string of ``n`` numbers, or a sequence of ``n`` numbers.
      n: number of workers (``>= 1``).
      name: what the values are (used in error messages), e.g. ``"h"`` or ``"kappa"``.
      allow_zero: if True values must be ``>= 0`` (communication times), else ``> 0``.

    Returns:
      ``np.ndarray`` of shape ``[n]``.

    Raises:
      ValueError: naming the problem (unknown profile, wrong length, bad value).
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(spec, str):
        s = spec.strip()
        if s in PROFILES:
            values = _profile(s, n)
        else:
            try:
                values = np.array([float(v) for v in s.split(",")], dtype=np.float64)
            except ValueError:
                raise ValueError(
                    f"unknown {name} profile {spec!r}; allowed: {', '.join(PROFILES)}, "
                    "a number, or a comma-separated list of n numbers"
                ) from None
            if values.size == 1:
                values = np.full(n, values[0])
    elif isinstance(spec, int | float | np.integer | np.floating) and not isinstance(spec, bool):
        values = np.full(n, float(spec))
    else:
        values = np.asarray(spec, dtype=np.float64).reshape(-1)
    if values.shape != (n,):
        raise ValueError(f"{name} has {values.size} values, expected n = {n}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} values must be finite, got {values.tolist()}")
    if allow_zero and np.any(values < 0):
        raise ValueError(f"{name} values must be >= 0, got {values.tolist()}")
    if not allow_zero and np.any(values <= 0):
        raise ValueError(f"{name} values must be > 0, got {values.tolist()}")
    return values


def check_profile(
    spec: str | float | Sequence[float] | np.ndarray,
    n: int,
    *,
    name: str = "h",
    allow_zero: bool = False,
) -> None:
    """Validates a profile as :func:`profile_values` does, without building its ``n`` values
    when it is a profile name or a single number (so a huge n is not allocated to check it).

    Raises:
      ValueError: as :func:`profile_values`.
    """
    scalar = isinstance(spec, int | float | np.integer | np.floating) and not isinstance(spec, bool)
    if isinstance(spec, str) and spec.strip() in PROFILES:
        scalar, spec = True, 1.0
    if not scalar:
        profile_values(spec, n, name=name, allow_zero=allow_zero)
        return
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    profile_values(spec, 1, name=name, allow_zero=allow_zero)


def parse_noise(spec: str) -> tuple[str, tuple[float, ...]]:
    """Parses a noise spec such as ``"lognormal:0.5"`` into ``(kind, params)``.

    Raises:
      ValueError: listing the allowed forms when the kind, arity, or values are bad.
    """
    allowed = f"allowed: {' | '.join(NOISE_FORMS)}"
    if not isinstance(spec, str):
        raise ValueError(f"noise must be a string, got {spec!r}; {allowed}")
    kind, *raw = spec.strip().split(":")
    if kind not in _NOISE_ARITY:
        raise ValueError(f"unknown noise {spec!r}; {allowed}")
    if len(raw) != _NOISE_ARITY[kind]:
        raise ValueError(f"noise {spec!r} takes {_NOISE_ARITY[kind]} parameter(s); {allowed}")
    try:
        params = tuple(float(v) for v in raw)
    except ValueError:
        raise ValueError(f"noise {spec!r} has a non-numeric parameter; {allowed}") from None
    if not all(math.isfinite(p) for p in params):
        raise ValueError(f"noise {spec!r} has a non-finite parameter; {allowed}")
    if kind == "lognormal" and params[0] < 0:
        raise ValueError(f"noise {spec!r}: SIGMA must be >= 0")
    if kind == "uniform" and not (0 <= params[0] <= params[1] and params[1] > 0):
        raise ValueError(f"noise {spec!r}: need 0 <= LOW <= HIGH and HIGH > 0")
    if kind == "straggler" and not (0 <= params[0] <= 1 and params[1] > 0):
        raise ValueError(f"noise {spec!r}: need 0 <= P <= 1 and FACTOR > 0")
    return kind, params


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["h", "kappa", "noise_params"],
    meta_fields=["noise"],
)
@dataclasses.dataclass(frozen=True)
class TimeModel:
    """Sampled-time model of ``n`` simulated workers.

    Attributes:
      h: ``[n]`` float32 compute time per stochastic gradient (already ``H * h`` when the
        model was built with ``per_step=True``).
      kappa: ``[n]`` float32 time of one vector exchange for worker ``i`` (already times
        ``d**0.25`` when built with ``scale_by_dim=True``).
      noise_params: ``[3]`` float32 noise parameters (zero-padded), traced.
      noise: static noise kind, one of :data:`NOISES`.
    """

    h: jax.Array
    kappa: jax.Array
    noise_params: jax.Array
    noise: str = "deterministic"

    @property
    def n(self) -> int:
        return self.h.shape[-1]


def make_time_model(
    n: int,
    *,
    h: str | float | Sequence[float] = "equal",
    noise: str = "deterministic",
    kappa: str | float | Sequence[float] = 0.0,
    scale_by_dim: bool = False,
    dim: int | None = None,
    per_step: bool = False,
    horizon: int | None = None,
) -> TimeModel:
    """Builds a validated :class:`TimeModel`.

    Args:
      n: number of workers.
      h: compute-time profile (see :func:`profile_values`), values ``> 0``.
      noise: noise spec (see :func:`parse_noise`).
      kappa: communication-time profile, values ``>= 0``; default all zero.
      scale_by_dim: multiply ``kappa`` by ``dim ** 0.25`` (docs/cluster_model.md).
      dim: number of policy parameters ``d`` (required with ``scale_by_dim``).
      per_step: ``h`` is a per-environment-step time; a trajectory costs ``horizon * h``.
      horizon: trajectory length ``H`` (required with ``per_step``).
    """
    h_v = profile_values(h, n, name="h")
    k_v = profile_values(kappa, n, name="kappa", allow_zero=True)
    kind, params = parse_noise(noise)
    if scale_by_dim:
        if dim is None or int(dim) < 1:
            raise ValueError(f"scale_by_dim needs dim >= 1, got {dim!r}")
        k_v = k_v * float(dim) ** 0.25
    if per_step:
        if horizon is None or int(horizon) < 1:
            raise ValueError(f"per_step needs horizon >= 1, got {horizon!r}")
        h_v = h_v * int(horizon)
    padded = np.zeros(3, np.float32)
    padded[: len(params)] = params
    return TimeModel(
        h=jnp.asarray(h_v, jnp.float32),
        kappa=jnp.asarray(k_v, jnp.float32),
        noise_params=jnp.asarray(padded),
        noise=kind,
    )


def sample_noise(tm: TimeModel, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Draws the multiplicative noise ``xi`` of shape ``shape`` (float32) from ``key``."""
    p = tm.noise_params
    if tm.noise == "deterministic":
        return jnp.ones(shape, jnp.float32)
    if tm.noise == "exponential":
        return jax.random.exponential(key, shape, jnp.float32)
    if tm.noise == "lognormal":
        sigma = p[0]
        return jnp.exp(sigma * jax.random.normal(key, shape, jnp.float32) - 0.5 * sigma**2)
    if tm.noise == "uniform":
        return jax.random.uniform(key, shape, jnp.float32, minval=p[0], maxval=p[1])
    if tm.noise == "straggler":
        slow = jax.random.uniform(key, shape, jnp.float32) < p[0]
        return jnp.where(slow, p[1], jnp.float32(1.0))
    raise ValueError(f"unknown noise kind {tm.noise!r}; allowed: {', '.join(NOISES)}")


def sample_compute_times(tm: TimeModel, key: jax.Array, num: int) -> jax.Array:
    """Samples ``tau_{i,k} = h_i * xi_{i,k}`` for ``num`` consecutive gradients per worker.

    Args:
      tm: the time model.
      key: PRNG key; every draw comes from it.
      num: static number of gradients per worker.

    Returns:
      ``[n, num]`` float32 compute times; row ``i`` is worker ``i``'s gradients in order.
    """
    return tm.h[:, None] * sample_noise(tm, key, (tm.n, num))


def sample_worker_compute_time(tm: TimeModel, key: jax.Array, worker: jax.Array) -> jax.Array:
    """Samples one compute time ``h_worker * xi`` (scalar float32) for a single worker."""
    return tm.h[worker] * sample_noise(tm, key, ())
