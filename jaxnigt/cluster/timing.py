"""The time model's ingredients (docs/cluster_model.md): compute-time profiles and noise kinds.

Worker ``i`` needs ``tau_{i,k} = h_i * xi_{i,k}`` time units for its ``k``-th stochastic
gradient, where ``h_i`` is a per-worker scale and ``xi`` is noise with mean 1 (except for the
literal ``straggler`` reading below).  Exchanging one ``d``-dimensional vector costs worker
``i`` the time ``kappa_i``.  The values live in the cluster model's record
(:class:`jaxnigt.cluster.model.ClusterModel`); this module reads and checks the specs they
come from and draws the noise.

Profiles (:data:`PROFILES`; ``i`` is 1-based):

* ``equal``      -- ``1``
* ``sqrt``       -- ``sqrt(i)``
* ``linear``     -- ``i``
* ``decreasing`` -- ``sqrt(n + 1 - i)``: the ``sqrt`` profile reversed, so worker 0 is the
  slowest.  (The paper leaves ``decreasing`` open; this is the project's choice.)

Noise kinds (:data:`NOISE_KINDS`, the one table of their forms, checks and draws):

* ``deterministic``       -- ``xi = 1``.
* ``exponential``         -- ``xi ~ Exp(1)`` (mean 1).
* ``lognormal:SIGMA``     -- ``xi = exp(sigma z - sigma^2 / 2)``, ``z ~ N(0, 1)`` (mean 1).
* ``uniform:LOW:HIGH``    -- ``xi ~ U(low, high)`` as given (mean ``(low + high) / 2``).
* ``straggler:P:FACTOR``  -- ``xi = factor`` with probability ``p``, else ``1``: the literal
  reading of "the gradient takes ``factor`` times longer", so the mean is
  ``1 + p (factor - 1)``, not 1.

Noise parameters are a traced ``[3]`` array (:func:`padded_params`), so sweeping over them
does not recompile; only the noise *kind* is static.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

PROFILES = ("equal", "sqrt", "linear", "decreasing")
#: What a profile may be, in words (the config's check and ``jaxnigt clock`` say it).
PROFILE_TEXT = f"a profile name ({', '.join(PROFILES)}), a number or a list of n numbers"


def _deterministic(p: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    return jnp.ones(shape, jnp.float32)


def _exponential(p: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    return jax.random.exponential(key, shape, jnp.float32)


def _lognormal(p: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    sigma = p[0]
    return jnp.exp(sigma * jax.random.normal(key, shape, jnp.float32) - 0.5 * sigma**2)


def _uniform(p: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    return jax.random.uniform(key, shape, jnp.float32, minval=p[0], maxval=p[1])


def _straggler(p: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    slow = jax.random.uniform(key, shape, jnp.float32) < p[0]
    return jnp.where(slow, p[1], jnp.float32(1.0))


class NoiseKind(NamedTuple):
    """One kind of noise.

    Attributes:
      params: the names of its parameters, in the order a spec gives them (``kind:P1:P2``).
      draw: ``(params [3], key, shape) -> xi`` (float32).
      valid: ``params -> bool``: whether the given values are allowed.
      need: what :attr:`valid` requires, in words (its error message).
    """

    params: tuple[str, ...]
    draw: Callable[[jax.Array, jax.Array, tuple[int, ...]], jax.Array]
    valid: Callable[[tuple[float, ...]], bool] = lambda p: True
    need: str = ""


NOISE_KINDS = {
    "deterministic": NoiseKind((), _deterministic),
    "exponential": NoiseKind((), _exponential),
    "lognormal": NoiseKind(("SIGMA",), _lognormal, lambda p: p[0] >= 0, "SIGMA must be >= 0"),
    "uniform": NoiseKind(
        ("LOW", "HIGH"),
        _uniform,
        lambda p: 0 <= p[0] <= p[1] and p[1] > 0,
        "need 0 <= LOW <= HIGH and HIGH > 0",
    ),
    "straggler": NoiseKind(
        ("P", "FACTOR"),
        _straggler,
        lambda p: 0 <= p[0] <= 1 and p[1] > 0,
        "need 0 <= P <= 1 and FACTOR > 0",
    ),
}
NOISES = tuple(NOISE_KINDS)
#: Each kind as a spec is written: ``lognormal:SIGMA``, ...
NOISE_FORMS = tuple(":".join((kind, *k.params)) for kind, k in NOISE_KINDS.items())
#: The forms in words (the config's check and its reference page say it).
NOISE_TEXT = f"{', '.join(NOISE_FORMS[:-1])} or {NOISE_FORMS[-1]}"


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


def _check_n(n: object) -> None:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")


def _parse_list(spec: str, name: str) -> np.ndarray:
    """The numbers of a comma-separated string (one or more)."""
    try:
        return np.array([float(v) for v in spec.split(",")], dtype=np.float64)
    except ValueError:
        raise ValueError(
            f"unknown {name} profile {spec!r}; allowed: {', '.join(PROFILES)}, "
            "a number, or a comma-separated list of n numbers"
        ) from None


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
    _check_n(n)
    if isinstance(spec, str):
        s = spec.strip()
        if s in PROFILES:
            values = _profile(s, n)
        else:
            values = _parse_list(s, name)
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
    when it is a profile name or a single number, also one written as text (so a huge n is
    not allocated to check it).

    Args:
      spec: as :func:`profile_values`.
      n: number of workers.
      name: what the values are (used in error messages).
      allow_zero: as :func:`profile_values`.

    Raises:
      ValueError: as :func:`profile_values`.
    """
    scalar = isinstance(spec, int | float | np.integer | np.floating) and not isinstance(spec, bool)
    if isinstance(spec, str):
        s = spec.strip()
        if s in PROFILES:
            scalar, spec = True, 1.0
        elif "," not in s:
            scalar, spec = True, float(_parse_list(s, name)[0])
    if not scalar:
        profile_values(spec, n, name=name, allow_zero=allow_zero)
        return
    _check_n(n)
    profile_values(spec, 1, name=name, allow_zero=allow_zero)


def parse_noise(spec: str) -> tuple[str, tuple[float, ...]]:
    """Parses a noise spec such as ``"lognormal:0.5"`` into ``(kind, params)``.

    Args:
      spec: one of :data:`NOISE_FORMS` with numbers for its parameters.

    Returns:
      ``(kind, params)``: a key of :data:`NOISE_KINDS` and its parameters as floats.

    Raises:
      ValueError: listing the allowed forms when the kind, arity, or values are bad.
    """
    allowed = f"allowed: {' | '.join(NOISE_FORMS)}"
    if not isinstance(spec, str):
        raise ValueError(f"noise must be a string, got {spec!r}; {allowed}")
    kind, *raw = spec.strip().split(":")
    if kind not in NOISE_KINDS:
        raise ValueError(f"unknown noise {spec!r}; {allowed}")
    arity = len(NOISE_KINDS[kind].params)
    if len(raw) != arity:
        raise ValueError(f"noise {spec!r} takes {arity} parameter(s); {allowed}")
    try:
        params = tuple(float(v) for v in raw)
    except ValueError:
        raise ValueError(f"noise {spec!r} has a non-numeric parameter; {allowed}") from None
    if not all(math.isfinite(p) for p in params):
        raise ValueError(f"noise {spec!r} has a non-finite parameter; {allowed}")
    if not NOISE_KINDS[kind].valid(params):
        raise ValueError(f"noise {spec!r}: {NOISE_KINDS[kind].need}")
    return kind, params


def padded_params(params: Sequence[float]) -> np.ndarray:
    """A kind's parameters as the ``[3]`` float32 array the draws read (zero-padded)."""
    padded = np.zeros(3, np.float32)
    padded[: len(params)] = params
    return padded


def draw_noise(kind: str, params: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """The multiplicative noise ``xi`` of one kind.

    Args:
      kind: a key of :data:`NOISE_KINDS` (static).
      params: ``[3]`` its parameters (:func:`padded_params`; may be traced).
      key: PRNG key; every draw comes from it.
      shape: the shape of the draw.

    Returns:
      ``xi`` of ``shape``, float32.

    Raises:
      ValueError: ``kind`` is not a noise kind.
    """
    if kind not in NOISE_KINDS:
        raise ValueError(f"unknown noise kind {kind!r}; allowed: {', '.join(NOISES)}")
    return NOISE_KINDS[kind].draw(params, key, shape)
