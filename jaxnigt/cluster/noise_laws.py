"""The noise kinds' distribution functions and quantiles (docs/cluster_model.md, "Workers and
their times"; the kinds and their draws: :data:`jaxnigt.cluster.timing.NOISE_KINDS`).

``P(xi <= x)`` (:func:`cdf`) and ``q_U``, the smallest ``q`` with ``P(xi <= q) >= U``
(:func:`quantile`), of the compute-time noise ``xi`` of a cluster model, in float32 with the
noise's parameters traced (a sweep over them does not recompile), and :func:`host_cdf` in
float64 on the host.  MindFlayer's time limits and its prescription of the attempts read them
(:mod:`jaxnigt.cluster.rules.mindflayer`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from jaxnigt.cluster.model import ClusterModel

__all__ = ["cdf", "host_cdf", "known", "quantile"]


def known(kind: str) -> bool:
    """Whether the noise kind ``kind`` has its quantile and distribution function here.

    Args:
      kind: a noise kind.

    Returns:
      True for every kind of :data:`jaxnigt.cluster.timing.NOISE_KINDS` written here.
    """
    return kind in _QUANTILES and kind in _CDFS


def _noise_law(kind: str):
    if not known(kind):
        raise ValueError(f"no quantile or distribution function for the noise kind {kind!r}")


def _straggler_parts(p):
    """``(lo, hi, P(xi = lo))`` of ``straggler:P:FACTOR`` (``xi`` is 1 or FACTOR)."""
    prob, factor = p[0], p[1]
    lo, hi = jnp.minimum(1.0, factor), jnp.maximum(1.0, factor)
    return lo, hi, jnp.where(factor >= 1.0, 1.0 - prob, prob)


def _pareto_log_scale(p):
    """``log s`` of ``pareto:ALPHA``: ``s = (alpha - 1) / alpha`` (mean 1) for alpha > 1, else
    ``2^(-1/alpha)`` (median 1)."""
    alpha = jnp.maximum(p[0], 1e-30)
    a = jnp.where(alpha > 1, alpha, 2.0)
    return jnp.where(alpha > 1, jnp.log((a - 1) / a), -jnp.log(2.0) / alpha), alpha


def _loglogistic_log_scale(p):
    """``log s`` of ``loglogistic:BETA``: ``s = sin(b) / b``, ``b = pi / beta`` (mean 1) for
    beta > 1, else 1 (median 1)."""
    beta = jnp.maximum(p[0], 1e-30)
    b = jnp.pi / jnp.where(beta > 1, beta, 2.0)
    return jnp.where(beta > 1, jnp.log(jnp.sin(b) / b), 0.0), beta


def _pareto_quantile(p, u):
    log_s, alpha = _pareto_log_scale(p)
    return jnp.exp(log_s - math.log1p(-u) / alpha)


def _loglogistic_quantile(p, u):
    log_s, beta = _loglogistic_log_scale(p)
    return jnp.exp(log_s + (math.log(u) - math.log1p(-u)) / beta)


_QUANTILES = {
    "deterministic": lambda p, u: jnp.float32(1.0),
    "exponential": lambda p, u: jnp.float32(-math.log1p(-u)),
    "lognormal": lambda p, u: jnp.exp(p[0] * statistics.NormalDist().inv_cdf(u) - 0.5 * p[0] ** 2),
    "uniform": lambda p, u: p[0] + u * (p[1] - p[0]),
    "straggler": lambda p, u: (lambda lo, hi, w: jnp.where(u <= w, lo, hi))(*_straggler_parts(p)),
    "pareto": _pareto_quantile,
    "loglogistic": _loglogistic_quantile,
}


def quantile(model: ClusterModel, level: float) -> jax.Array:
    """``q_U``: the smallest ``q`` with ``P(xi <= q) >= U`` for the model's noise (its
    parameters may be traced).

    Args:
      model: the cluster model.
      level: ``U`` in (0, 1), static.

    Returns:
      ``[]`` float32.

    Raises:
      ValueError: a noise kind without a quantile here.
    """
    _noise_law(model.noise)
    p = jnp.asarray(model.noise_params, jnp.float32)
    return jnp.asarray(_QUANTILES[model.noise](p, float(level)), jnp.float32)


def _lognormal_cdf(p, x):
    sigma = jnp.maximum(p[0], 1e-30)
    safe = jnp.where(x > 0, x, 1.0)
    inside = ndtr((jnp.log(safe) + 0.5 * p[0] ** 2) / sigma)
    return jnp.where(x > 0, jnp.where(p[0] > 0, inside, (x >= 1.0).astype(jnp.float32)), 0.0)


def _uniform_cdf(p, x):
    width = p[1] - p[0]
    inside = jnp.clip((x - p[0]) / jnp.where(width > 0, width, 1.0), 0.0, 1.0)
    return jnp.where(width > 0, inside, (x >= p[0]).astype(jnp.float32))


def _pareto_cdf(p, x):
    log_s, alpha = _pareto_log_scale(p)
    safe = jnp.log(jnp.where(x > 0, x, 1.0))
    return jnp.where((x > 0) & (safe >= log_s), -jnp.expm1(alpha * (log_s - safe)), 0.0)


def _loglogistic_cdf(p, x):
    log_s, beta = _loglogistic_log_scale(p)
    safe = jnp.log(jnp.where(x > 0, x, 1.0))
    return jnp.where(x > 0, jax.nn.sigmoid(beta * (safe - log_s)), 0.0)


_CDFS = {
    "deterministic": lambda p, x: (x >= 1.0).astype(jnp.float32),
    "exponential": lambda p, x: jnp.where(x > 0, -jnp.expm1(-jnp.maximum(x, 0.0)), 0.0),
    "lognormal": _lognormal_cdf,
    "uniform": _uniform_cdf,
    "straggler": lambda p, x: (
        (1.0 - p[0]) * (x >= 1.0).astype(jnp.float32) + p[0] * (x >= p[1]).astype(jnp.float32)
    ),
    "pareto": _pareto_cdf,
    "loglogistic": _loglogistic_cdf,
}


def cdf(model: ClusterModel, x: jax.Array) -> jax.Array:
    """``P(xi <= x)`` elementwise for the model's noise (its parameters may be traced).

    Args:
      model: the cluster model.
      x: values.

    Returns:
      ``x``'s shape, float32.
    """
    _noise_law(model.noise)
    p = jnp.asarray(model.noise_params, jnp.float32)
    return jnp.asarray(_CDFS[model.noise](p, jnp.asarray(x, jnp.float32)), jnp.float32)


def host_cdf(kind: str, params: Sequence[float], x: float) -> float:
    """:func:`cdf` on the host, in float64 (the prescription's bound).

    Args:
      kind: the noise kind.
      params: its parameters.
      x: a value.

    Returns:
      ``P(xi <= x)``.
    """
    _noise_law(kind)
    p = [float(v) for v in params] + [0.0, 0.0, 0.0]
    if kind == "deterministic":
        return float(x >= 1)
    if kind == "exponential":
        return -math.expm1(-x) if x > 0 else 0.0
    if kind == "lognormal":
        if x <= 0:
            return 0.0
        if p[0] <= 0:
            return float(x >= 1)
        return statistics.NormalDist().cdf((math.log(x) + 0.5 * p[0] ** 2) / p[0])
    if kind == "uniform":
        if p[1] <= p[0]:
            return float(x >= p[0])
        return min(max((x - p[0]) / (p[1] - p[0]), 0.0), 1.0)
    if kind == "pareto":
        a = p[0]
        s = (a - 1) / a if a > 1 else 2.0 ** (-1.0 / a)
        return 0.0 if x < s else -math.expm1(a * (math.log(s) - math.log(x)))
    if kind == "loglogistic":
        beta = p[0]
        b = math.pi / beta
        s = math.sin(b) / b if beta > 1 else 1.0
        return 0.0 if x <= 0 else 1.0 / (1.0 + (x / s) ** (-beta))
    return (1 - p[0]) * float(x >= 1) + p[0] * float(x >= p[1])  # straggler
