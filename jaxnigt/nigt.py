"""NIGT: normalized momentum with an extrapolated evaluation point, as optax transformations.

NIGT (normalized implicit gradient transport) keeps three sequences. With learning rate
``α_t`` and momentum weight ``η ∈ (0, 1]``, starting from ``y_0 = x_0``:

.. math::

  d_0 &= g_0, \\qquad d_t = (1 - η)\\, d_{t-1} + η\\, g_t \\quad (t \\ge 1) \\\\
  x_{t+1} &= x_t - α_t\\, d_t / \\max(\\lVert d_t \\rVert, ε) \\\\
  y_{t+1} &= x_{t+1} + \\tfrac{1 - η}{η} (x_{t+1} - x_t)

where ``g_t`` is a (stochastic) gradient taken at the *extrapolated point* ``y_t`` and the norm
is the global norm over the whole pytree. The params a user holds are ``y_t``: that is where
gradients (and, in RL, rollouts) are computed. ``x_t`` is the iterate to evaluate and deploy;
:func:`nigt_eval_params` returns it.

References:
  Cutkosky & Mehta, "Momentum Improves Normalized SGD", ICML 2020.
  Fatkhullin, Barakat, Kireeva & He, "Stochastic Policy Gradient Methods: Improved Sample
  Complexity for Fisher-non-degenerate Policies", ICML 2023 (normalized-IGT policy gradient).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

Params = Any


class NigtState(NamedTuple):
    """State of :func:`nigt`.

    Attributes:
      iterate: ``x_t``, same structure and dtype as the params; the point to evaluate/deploy.
      direction: ``d_{t-1}``, the momentum direction (zeros before the first update).
      count: int32 number of updates applied so far.
    """

    iterate: Params
    direction: Params
    count: jax.Array


class ScaleByNigtState(NamedTuple):
    """State of :func:`scale_by_nigt` (learning-rate free, so it composes under ``chain``).

    Attributes:
      direction: ``d_{t-1}``, the momentum direction.
      normalized: ``d_{t-1} / max(‖d_{t-1}‖, ε)``, needed for the extrapolation term.
      count: int32 number of updates applied so far.
    """

    direction: Params
    normalized: Params
    count: jax.Array


def _validate_eta(eta: Any) -> None:
    """Checks ``eta ∈ (0, 1]`` when its value is known (not a tracer inside ``jit``)."""
    if isinstance(eta, jax.core.Tracer):
        return
    try:
        value = float(eta)
    except TypeError:
        return
    if not 0.0 < value <= 1.0:
        raise ValueError(f"nigt: eta must be in (0, 1], got {value!r}.")


def _safe_global_norm(tree: Params, eps: float) -> jax.Array:
    """``max(‖tree‖, eps)`` whose value *and gradient* are finite at ``tree = 0``.

    The double-``where`` keeps ``sqrt`` away from zero: the derivative of ``sqrt`` at 0 is
    infinite and would turn into NaN when multiplied by a zero cotangent.
    """
    sq = sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree))
    big = sq > eps * eps
    return jnp.where(big, jnp.sqrt(jnp.where(big, sq, 1.0)), eps)


def _momentum_step(
    grads: Params, direction: Params, count: jax.Array, eta: ArrayLike, eps: float
) -> tuple[Params, Params]:
    """Returns ``(d_t, d_t / max(‖d_t‖, ε))`` with ``d_0 = g_0``."""
    first = count == 0
    new_direction = jax.tree.map(
        lambda g, d: jnp.where(first, g, (1.0 - eta) * d + eta * g).astype(d.dtype),
        grads,
        direction,
    )
    norm = _safe_global_norm(new_direction, eps)
    normalized = jax.tree.map(lambda d: (d / norm).astype(d.dtype), new_direction)
    return new_direction, normalized


def scale_by_nigt(eta: ArrayLike, *, eps: float = 1e-8) -> optax.GradientTransformationExtraArgs:
    """NIGT's normalized, extrapolated direction, to be scaled by a learning rate.

    Emits ``w_t = n_t / η − ((1 − η)/η) n_{t−1}`` with ``n_t = d_t / max(‖d_t‖, ε)`` and
    ``n_{−1} = 0``. For a *constant* learning rate ``α``,
    ``optax.chain(scale_by_nigt(eta), optax.scale_by_learning_rate(α))`` applies exactly
    ``y_{t+1} − y_t`` of the NIGT recurrence (see the module docstring). With a schedule use
    :func:`nigt`, which stores the iterate and is exact for any ``α_t``.

    Args:
      eta: momentum weight ``η ∈ (0, 1]``; ``η = 1`` is normalized gradient descent.
      eps: floor of the direction norm (guards the normalization at zero).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state :class:`ScaleByNigtState`:
      ``update(updates, state, params=None, **extra_args)`` accepts and ignores extra
      arguments (e.g. ``value=loss``), as optax's own transformations do, so it composes with
      transforms that need them.
    """
    _validate_eta(eta)

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        direction, normalized = _momentum_step(updates, state.direction, state.count, eta, eps)
        out = jax.tree.map(
            lambda n, n_prev: (n / eta - (1.0 - eta) / eta * n_prev).astype(n.dtype),
            normalized,
            state.normalized,
        )
        return out, ScaleByNigtState(direction, normalized, optax.safe_increment(state.count))

    return optax.GradientTransformationExtraArgs(_init_scale_state, update_fn)


def scale_by_normalized_momentum(
    eta: ArrayLike, *, eps: float = 1e-8
) -> optax.GradientTransformationExtraArgs:
    """Normalized momentum without NIGT's extrapolation (Cutkosky & Mehta, 2020): emits
    ``n_t = d_t / max(‖d_t‖, ε)`` with ``d_0 = g_0``, ``d_t = (1 − η) d_{t−1} + η g_t``, to be
    scaled by a learning rate; gradients are taken at the iterate itself.  ``η = 1`` is
    normalized gradient descent.  (AFedPG without its lookahead point, ``afedpg_vanilla``.)

    Args:
      eta: momentum weight η ∈ (0, 1] (a traced value: changing it does not recompile).
      eps: the floor ε of the norm.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state :class:`ScaleByNigtState`
      (``normalized`` holds ``n_t``).
    """
    _validate_eta(eta)

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        direction, normalized = _momentum_step(updates, state.direction, state.count, eta, eps)
        return normalized, ScaleByNigtState(
            direction, normalized, optax.safe_increment(state.count)
        )

    return optax.GradientTransformationExtraArgs(_init_scale_state, update_fn)


def _init_scale_state(params: Params) -> ScaleByNigtState:
    zeros = optax.tree.zeros_like(params)
    return ScaleByNigtState(zeros, zeros, jnp.zeros([], jnp.int32))


def nigt(
    learning_rate: optax.ScalarOrSchedule, eta: ArrayLike, *, eps: float = 1e-8
) -> optax.GradientTransformationExtraArgs:
    """NIGT optimizer: normalized momentum evaluated at an extrapolated point.

    The params passed to ``update`` (and held by the user) are the extrapolated point
    ``y_t``; gradients must be taken there. ``update`` returns ``y_{t+1} − y_t`` so that
    ``optax.apply_updates`` moves the params to ``y_{t+1}``; :func:`nigt_eval_params` returns
    the iterate ``x_t`` to evaluate and deploy. The recurrences are (descent convention)::

      d_0 = g_0;  d_t = (1 − η) d_{t−1} + η g_t
      x_{t+1} = x_t − α_t d_t / max(‖d_t‖, ε)
      y_{t+1} = x_{t+1} + ((1 − η)/η) (x_{t+1} − x_t)

    Hyperparameters may be traced arrays (e.g. under ``optax.inject_hyperparams``), so sweeps
    over ``learning_rate`` and ``eta`` do not recompile.

    Args:
      learning_rate: a scalar or an optax schedule ``α_t`` (called with the update count).
      eta: momentum weight ``η ∈ (0, 1]``; ``η = 1`` gives normalized gradient descent.
      eps: floor of the direction norm; a zero gradient gives a zero step, never NaN.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state :class:`NigtState`.
      ``update(updates, state, params, **extra_args)`` requires ``params`` and accepts and
      ignores extra arguments (e.g. ``value=loss``), as optax's own transformations do.

    Example:
      >>> import jax.numpy as jnp, optax, jaxnigt
      >>> params = {"w": jnp.array([1.0, -2.0])}
      >>> opt = jaxnigt.nigt(learning_rate=0.1, eta=0.5)
      >>> state = opt.init(params)
      >>> grads = {"w": 2 * params["w"]}
      >>> updates, state = opt.update(grads, state, params)
      >>> params = optax.apply_updates(params, updates)
      >>> x = jaxnigt.nigt_eval_params(state)  # deploy this, not ``params``
    """
    _validate_eta(eta)

    def init_fn(params: Params) -> NigtState:
        return NigtState(
            iterate=jax.tree.map(jnp.asarray, params),
            direction=optax.tree.zeros_like(params),
            count=jnp.zeros([], jnp.int32),
        )

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise ValueError("nigt: update() needs params (the extrapolated point y_t).")
        lr = learning_rate(state.count) if callable(learning_rate) else learning_rate
        direction, normalized = _momentum_step(updates, state.direction, state.count, eta, eps)
        new_x = jax.tree.map(lambda x, n: (x - lr * n).astype(x.dtype), state.iterate, normalized)
        new_y = jax.tree.map(lambda xn, x: xn + (1.0 - eta) / eta * (xn - x), new_x, state.iterate)
        out = jax.tree.map(lambda y, p: (y - p).astype(p.dtype), new_y, params)
        return out, NigtState(new_x, direction, optax.safe_increment(state.count))

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def nigt_eval_params(state: Any) -> Params:
    """Returns the NIGT iterate ``x_t`` (the params to evaluate and deploy).

    Args:
      state: a :class:`NigtState`, or any optimizer state that contains exactly one (e.g. the
        state of ``optax.chain(..., nigt(...))`` or of ``optax.inject_hyperparams(nigt)``).
        Leading batch axes (from ``vmap`` over seeds) are preserved.

    Returns:
      The iterate ``x_t``: a pytree of the params' structure and dtypes.

    Raises:
      ValueError: if the state holds no :class:`NigtState` or more than one.
    """
    if isinstance(state, NigtState):
        return state.iterate
    found = [
        leaf
        for leaf in jax.tree.leaves(state, is_leaf=lambda x: isinstance(x, NigtState))
        if isinstance(leaf, NigtState)
    ]
    if len(found) != 1:
        raise ValueError(
            f"nigt_eval_params: expected exactly one NigtState inside the optimizer state, "
            f"found {len(found)}. (scale_by_nigt's state holds no iterate; use nigt.)"
        )
    return found[0].iterate
