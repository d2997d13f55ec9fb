"""Tests for jaxnigt.algorithms.engines.async_engine against a hand computation.

Two workers with known deterministic times (h = (1, 1.5), κ = (1, 3)) on the one-step Match
task with a linear Gaussian policy, whose trajectory gradient has a closed form. The hand
computation pins which point every arrival's trajectory is rolled out at (its worker's
dispatch point, not the fresh server point), its key, and the order of the server updates.
"""

import chex
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from tasks import match_setup

from jaxnigt import config as config_lib
from jaxnigt.rl.rollout import rollout
from jaxnigt.run.trainer import build_trainer

# (worker, its k-th gradient) in arrival order, worked out in tests/test_events.py:
# shared link: w0 at 2, w1 at 5, w0 at 6, w1 at 9.5, w0 at 10.5;
# independent links: w0 at 2, 4, w1 at 4.5, w0 at 6, 8.
ORDER = {
    "shared": [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)],
    "independent": [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3)],
}
LR, ETA = 0.05, 0.4


def _setup(link: str):
    return match_setup(h=[1.0, 1.5], kappa=[1.0, 3.0], M=2, link=link)


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


ARRIVAL_TIMES = {"shared": [2.0, 5.0, 6.0, 9.5, 10.5], "independent": [2.0, 4.0, 4.5, 6.0, 8.0]}


@pytest.mark.parametrize("budget", [np.inf, 5.5])
@pytest.mark.parametrize("link", ["shared", "independent"])
@pytest.mark.parametrize("algorithm", ["asgd", "afedpg"])
def test_block_matches_hand_computation(algorithm, link, budget):
    """A whole block, and one that crosses the budget mid-way: it applies exactly the
    arrivals up to the first one past the budget (shared: 2, 5, 6; independent: 2, 4, 4.5,
    6), and the later ones change nothing and count nothing."""
    setup = _setup(link)
    hp = config_lib.HParams(learning_rate=LR, eta=ETA, M=2, gamma=1.0, async_block=5)
    tr = build_trainer(setup, algorithm, hp)
    state0 = tr.init(jax.random.key(4), tr.hyper())
    state, metrics = jax.jit(tr.step)(state0, budget)
    times = ARRIVAL_TIMES[link]
    applied = next((j + 1 for j, t in enumerate(times) if t >= budget), len(times))
    order = ORDER[link][:applied]

    flat0, unravel = jax.flatten_util.ravel_pytree(state0.params)
    theta = np.asarray(flat0, np.float64)  # the held point (AFedPG: the lookahead y)
    x, d = theta.copy(), None  # AFedPG's iterate and direction
    dispatched = {0: theta.copy(), 1: theta.copy()}
    roll_key = state0.extra.roll_key
    for w, k in order:
        point = unravel(jnp.asarray(dispatched[w], jnp.float32))
        key = jax.random.fold_in(jax.random.fold_in(roll_key, w), k)
        traj = rollout(setup.task, setup.policy, point, key[None], jnp.array([w], jnp.int32))
        g = _closed_form_gradient(setup.policy, point, traj)
        if algorithm == "asgd":
            theta = theta + LR * g
        else:  # NIGT on −g per arrival: d, x, then the lookahead y
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
    assert float(metrics.sim_time) == times[applied - 1] and float(metrics.grads) == applied
    assert float(metrics.comms) == applied and float(metrics.env_steps) == applied
    counts = np.bincount([w for w, _ in order], minlength=2)
    np.testing.assert_array_equal(metrics.worker_counts, counts)
    assert int(state.extra.event_state.version) == applied


def _point_mass_trainer(algorithm, link, wave, n=6):
    from jaxnigt.run.trainer import make_trainer

    raw = {  # endings drawn at reset: wave sizes change float rounding, never an ending
        "env": {"name": "timed_point_mass"},
        "cluster": {"n": n, "h": "sqrt", "kappa": 0.3, "noise": "lognormal:0.7", "link": link},
        "algorithms": [algorithm],
        "hparams": {"learning_rate": 0.02, "eta": 0.3, "async_block": 12, "async_wave": wave},
        "budget": 30.0,
    }
    return make_trainer(config_lib.from_dict(raw), algorithm)


_WAVE_CASES = [("asgd", "shared", 4), ("afedpg", "independent", 6)]


@pytest.mark.parametrize("algorithm, link, wave", _WAVE_CASES)
def test_waves_equal_one_arrival_at_a_time(algorithm, link, wave):
    """Rolling out the ready arrivals of a wave as one batch changes nothing: the same keys,
    arrival order and updates as W = 1 (seeds and a learning-rate grid vmapped, noisy times,
    blocks that cross the budget).

    Not bitwise: XLA computes a policy's matmuls for a batch of W slots with other kernels
    than for one slot, so float32 results differ by rounding (as seeds vmapped together
    differ from seeds run alone); over these 60 arrivals the largest difference is ~3e-6.
    Everything discrete (workers, order, counts, times) is equal exactly. Two cases, two
    compiled programs each, cover both links, both server updates (plain and NIGT) and both
    kinds of wave (4 of n = 6 workers: full and partial waves; 6: every ready arrival); the
    wave logic itself never looks at the update or the link, only at the dispatch versions.
    """
    out = {}
    for w in (1, wave):
        tr = _point_mass_trainer(algorithm, link, w)
        keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(3), s))(jnp.arange(4))
        lrs = [0.01, 0.02, 0.05, 0.02] if algorithm == "afedpg" else [1e-5, 3e-5, 1e-4, 3e-5]
        hyper = {**tr.hyper(batch=4), "learning_rate": jnp.asarray(lrs)}
        run = jax.jit(jax.vmap(lambda k, h: tr.run_chunk(tr.init(k, h), 5, budget=30.0)))
        state, metrics = run(keys, hyper)
        out[w] = (
            state._replace(key=(), extra=state.extra._replace(time_key=(), roll_key=())),
            metrics,
        )
    assert np.all(np.isfinite(np.asarray(out[1][1]["train_return"])))
    exact = ("round", "sim_time", "comms", "grads", "counts_min", "counts_max", "worker_counts")
    # Floats to rounding relative to each array's scale: a gradient is a sum over 30 steps
    # of a 4,740-parameter policy's log-probability gradients, and other matmul kernels sum
    # in another order; AFedPG's normalized momentum carries the difference into every later
    # step. (On jax 0.10.2 the largest difference is ~3e-6; on 0.11.2 one momentum entry
    # differed by 3.6e-5, 5e-4 of itself: an entry near zero, which a per-element rtol
    # cannot judge.)
    for got, want in zip(jax.tree.leaves(out[wave]), jax.tree.leaves(out[1]), strict=True):
        want = np.asarray(want)
        if np.issubdtype(want.dtype, np.floating):
            scale = float(np.nanmax(np.abs(want), initial=0.0))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale + 1e-6)
        else:
            np.testing.assert_array_equal(got, want)
    for k in exact:
        np.testing.assert_array_equal(out[wave][1][k], out[1][1][k], err_msg=k)
    chex.assert_trees_all_equal(out[wave][0].extra.event_state, out[1][0].extra.event_state)
