"""The time model's ingredients (docs/cluster_model.md): compute-time profiles and noise kinds.

Worker ``i`` needs ``tau_{i,k} = h_i * xi_{i,k}`` time units for its ``k``-th stochastic
gradient, where ``h_i`` is a per-worker scale and ``xi`` is noise with mean 1 (except for
``uniform`` and the literal ``straggler`` reading below, and the heavy tails' median 1 where
they have no mean).  Exchanging one ``d``-dimensional vector costs worker
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
* ``pareto:ALPHA``        -- Pareto I of tail index ``alpha > 0``: ``P(xi > x) = (s / x)^alpha``
  for ``x >= s``, drawn as ``xi = s v^(-1/alpha)``, ``v = 1 - u``, ``u ~ U[0, 1)``.  For
  ``alpha > 1`` ``s = (alpha - 1) / alpha`` (mean 1); for ``alpha <= 1`` the mean is
  infinite and ``s = 2^(-1/alpha)`` (median 1).
* ``loglogistic:BETA``    -- log-logistic (Fisk) of tail index ``beta > 0``:
  ``P(xi <= x) = 1 / (1 + (x / s)^(-beta))``, drawn as ``xi = s (u / (1 - u))^(1/beta)``.  For
  ``beta > 1`` ``s = sin(b) / b``, ``b = pi / beta`` (mean 1); for ``beta <= 1`` the mean is
  infinite and ``s = 1`` (median 1).

So ``h_i`` is worker ``i``'s mean time under every kind but ``uniform`` and ``straggler``
(whose means are as given) where that mean exists, and its median time under the two heavy
tails with a tail index <= 1, whose mean is infinite (:func:`noise_mean`).  Both
heavy tails are inverse-CDF transforms of one ``jax.random.uniform`` draw (exact up to
float32's grid of ``2^-23`` in ``u``, one key's draws always the same), with ``xi`` capped at
:data:`XI_MAX` (only a tail index below about 0.18 reaches past float32 at all).

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


#: The largest heavy-tailed factor drawn (``pareto``, ``loglogistic``): a time past any budget
#: that stays finite in float32 times any ``h_i`` below ``3e8`` (a larger draw would be ``inf``,
#: which the engines read as "never completes").
XI_MAX = 1e30
_LOG_XI_MAX = math.log(XI_MAX)
_TINY = float(np.finfo(np.float32).tiny)


def _capped(log_xi: jax.Array) -> jax.Array:
    return jnp.exp(jnp.minimum(log_xi, _LOG_XI_MAX))


def _pareto(p: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    # log xi = log s - log(v) / alpha; with alpha <= 1, s = 2^(-1/alpha): -log(2 v) / alpha,
    # one term, so no tail index (however small) makes inf - inf.
    alpha = jnp.maximum(p[0], _TINY)  # > 0 as parsed; never 0 (a flushed subnormal)
    v = 1.0 - jax.random.uniform(key, shape, jnp.float32)  # (0, 1]
    a = jnp.where(alpha > 1, alpha, 2.0)
    mean_one = jnp.log((a - 1) / a) - jnp.log(v) / a
    return _capped(jnp.where(alpha > 1, mean_one, -jnp.log(2.0 * v) / alpha))


def _loglogistic(p: jax.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    beta = jnp.maximum(p[0], _TINY)
    u = jax.random.uniform(key, shape, jnp.float32)  # [0, 1): u = 0 draws 0
    b = jnp.pi / jnp.where(beta > 1, beta, 2.0)
    log_s = jnp.where(beta > 1, jnp.log(jnp.sin(b) / b), 0.0)
    return _capped(log_s + (jnp.log(u) - jnp.log1p(-u)) / beta)


def _infinite_below_one(p: Sequence[float]) -> float:
    """The mean of a heavy tail scaled to mean 1 where it has one (tail index > 1)."""
    return 1.0 if p[0] > 1 else math.inf


class NoiseKind(NamedTuple):
    """One kind of noise.

    Attributes:
      params: the names of its parameters, in the order a spec gives them (``kind:P1:P2``).
      draw: ``(params [3], key, shape) -> xi`` (float32).
      valid: ``params -> bool``: whether the given values are allowed.
      need: what :attr:`valid` requires, in words (its error message).
      mean: ``params -> float``: the mean of ``xi`` (``math.inf`` where it has none).
    """

    params: tuple[str, ...]
    draw: Callable[[jax.Array, jax.Array, tuple[int, ...]], jax.Array]
    valid: Callable[[tuple[float, ...]], bool] = lambda p: True
    need: str = ""
    mean: Callable[[tuple[float, ...]], float] = lambda p: 1.0


NOISE_KINDS = {
    "deterministic": NoiseKind((), _deterministic),
    "exponential": NoiseKind((), _exponential),
    "lognormal": NoiseKind(("SIGMA",), _lognormal, lambda p: p[0] >= 0, "SIGMA must be >= 0"),
    "uniform": NoiseKind(
        ("LOW", "HIGH"),
        _uniform,
        lambda p: 0 <= p[0] <= p[1] and p[1] > 0,
        "need 0 <= LOW <= HIGH and HIGH > 0",
        lambda p: (p[0] + p[1]) / 2,
    ),
    "straggler": NoiseKind(
        ("P", "FACTOR"),
        _straggler,
        lambda p: 0 <= p[0] <= 1 and p[1] > 0,
        "need 0 <= P <= 1 and FACTOR > 0",
        lambda p: 1 + p[0] * (p[1] - 1),
    ),
    "pareto": NoiseKind(
        ("ALPHA",),
        _pareto,
        lambda p: p[0] > 0,
        "need the tail index ALPHA > 0 (ALPHA > 1: h is the mean time; ALPHA <= 1, "
        "infinite mean: h is the median time)",
        _infinite_below_one,
    ),
    "loglogistic": NoiseKind(
        ("BETA",),
        _loglogistic,
        lambda p: p[0] > 0,
        "need the tail index BETA > 0 (BETA > 1: h is the mean time; BETA <= 1, "
        "infinite mean: h is the median time)",
        _infinite_below_one,
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
        form = NOISE_FORMS[NOISES.index(kind)]
        raise ValueError(f"noise {spec!r} ({form}): {NOISE_KINDS[kind].need}; {allowed}")
    return kind, params


def noise_mean(spec: str) -> float:
    """The mean of a noise spec's ``xi`` (:func:`parse_noise`): 1 for every kind but
    ``uniform`` and ``straggler``; ``math.inf`` for ``pareto:ALPHA`` / ``loglogistic:BETA``
    with a tail index <= 1 (``h_i`` is then the median time).

    Args:
      spec: a noise spec (one of :data:`NOISE_FORMS` with numbers for its parameters).

    Returns:
      The mean of ``xi`` (a float; ``math.inf`` where it has none).

    Raises:
      ValueError: as :func:`parse_noise`.
    """
    kind, params = parse_noise(spec)
    return float(NOISE_KINDS[kind].mean(params))


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
