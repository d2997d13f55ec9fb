"""Tests for jaxnigt.algorithms.async_engine against a hand computation.

Two workers with known deterministic times (h = (1, 1.5), κ = (1, 3)) on the one-step Match
task with a linear Gaussian policy, whose trajectory gradient has a closed form. The hand
computation pins which point every arrival's trajectory is rolled out at (its worker's
dispatch point, not the fresh server point), its key, and the order of the server updates.
"""

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from tasks import match_setup

from jaxnigt import config as config_lib
from jaxnigt.rollout import rollout
from jaxnigt.trainer import build_trainer

# (worker, its k-th gradient) in arrival order, worked out in tests/test_events.py:
# shared link: w0 at 2, w1 at 5, w0 at 6, w1 at 9.5, w0 at 10.5;
# independent links: w0 at 2, 4, w1 at 4.5, w0 at 6, 8.
ORDER = {
    "shared": [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)],
    "independent": [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3)],
}
TIMES = {"shared": 10.5, "independent": 8.0}
LR, ETA = 0.05, 0.4


def _setup(link: str):
    return match_setup(h=[1.0, 1.5], kappa=[1.0, 3.0], M=2, async_block=5, link=link)


def _closed_form_gradient(policy, params, traj) -> np.ndarray:
    """g_H of one Match trajectory: r · ∇ log N(u; k·s' + b, σ²) for (kernel, bias, std_bias)."""
    flat, _ = jax.flatten_util.ravel_pytree(params)
    names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)]
    value = dict(zip(names, np.asarray(flat, np.float64), strict=True))
    k, b, z = _kbz(value)
    s, u, r = (float(np.asarray(x).reshape(-1)[0]) for x in (traj.obs, traj.u, traj.rewards))
    c = policy._std_offset
    sigma = np.log1p(np.exp(z + c)) + policy.std_floor
    dev = u - (k * s + b)
    grad = {
        "kernel": r * dev * s / sigma**2,
        "bias": r * dev / sigma**2,
        "std_bias": r * (dev**2 / sigma**3 - 1.0 / sigma) / (1.0 + np.exp(-(z + c))),
    }
    return np.array([grad[_kind(n)] for n in names])


def _kind(name: str) -> str:
    return next(k for k in ("kernel", "bias", "std_bias") if name.endswith(f"'{k}']"))


def _kbz(value: dict) -> tuple[float, float, float]:
    by_kind = {_kind(n): v for n, v in value.items()}
    return by_kind["kernel"], by_kind["bias"], by_kind["std_bias"]


@pytest.mark.parametrize("link", ["shared", "independent"])
@pytest.mark.parametrize("algorithm", ["asgd", "afedpg"])
def test_block_matches_hand_computation(algorithm, link):
    setup = _setup(link)
    hp = config_lib.HParams(learning_rate=LR, eta=ETA, M=2, gamma=1.0)
    tr = build_trainer(setup, algorithm, hp)
    state0 = tr.init(jax.random.key(4), tr.hyper())
    state, metrics = jax.jit(tr.step)(state0)

    flat0, unravel = jax.flatten_util.ravel_pytree(state0.params)
    theta = np.asarray(flat0, np.float64)  # the held point (AFedPG: the lookahead y)
    x, d = theta.copy(), None  # AFedPG's iterate and direction
    dispatched = {0: theta.copy(), 1: theta.copy()}
    roll_key = state0.extra.roll_key
    for w, k in ORDER[link]:
        point = unravel(jnp.asarray(dispatched[w], jnp.float32))
        key = jax.random.fold_in(jax.random.fold_in(roll_key, w), k)
        traj = rollout(setup.task, setup.policy, point, key[None], jnp.array([w], jnp.int32))
        g = _closed_form_gradient(setup.policy, point, traj)
        if algorithm == "asgd":
            theta = theta + LR * g
        else:  # NIGT on −g per arrival (SPEC §5): d, x, then the lookahead y
            d = g if d is None else (1 - ETA) * d + ETA * g
            x_new = x + LR * d / np.linalg.norm(d)
            theta = x_new + (1 - ETA) / ETA * (x_new - x)
            x = x_new
        dispatched[w] = theta.copy()

    got = np.asarray(jax.flatten_util.ravel_pytree(state.params)[0])
    np.testing.assert_allclose(got, theta, rtol=1e-4, atol=1e-5)
    worker_points = state.extra.worker_params
    for w in (0, 1):
        got_w = jax.flatten_util.ravel_pytree(jax.tree.map(lambda p, w=w: p[w], worker_points))[0]
        np.testing.assert_allclose(np.asarray(got_w), dispatched[w], rtol=1e-4, atol=1e-5)
    if algorithm == "afedpg":
        deploy = jax.flatten_util.ravel_pytree(tr.deploy_params(state))[0]
        np.testing.assert_allclose(np.asarray(deploy), x, rtol=1e-4, atol=1e-5)
    assert float(metrics.sim_time) == TIMES[link] and float(metrics.grads) == 5.0
    assert float(metrics.comms) == 5.0 and float(metrics.env_steps) == 5.0
    counts = np.bincount([w for w, _ in ORDER[link]], minlength=2)
    assert (float(metrics.counts_min), float(metrics.counts_max)) == (counts.min(), counts.max())
