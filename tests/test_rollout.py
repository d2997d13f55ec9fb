"""Tests for jaxnigt.rl.rollout: masking, non-finite guard, types, per-slot params, MJX smoke."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.envs.base import State

from jaxnigt.envs import PhysicsTypes, TaskEnv, make_env, make_heterogeneous, with_physics
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.policy import GaussianPolicy, make_policy
from jaxnigt.rl.rollout import Trajectories, evaluate, rollout

H = 8


@dataclasses.dataclass(frozen=True)
class CountdownEnv:
    """Deterministic: reward 1 + t each step; terminates on the step taken at t = stop - 1.

    ``nan_at`` makes the reward of step ``nan_at`` NaN (non-finite guard). After termination
    it keeps returning reward 100 so masking is visible.
    """

    stop: int = 3
    nan_at: int = -1

    def reset(self, rng):
        del rng
        zero = jnp.zeros((), jnp.float32)
        return State(jnp.zeros((1,), jnp.float32), jnp.zeros((2,), jnp.float32), zero, zero)

    def step(self, state, action):
        t = state.pipeline_state[0]
        done = t >= self.stop - 1
        reward = jnp.where(t >= self.stop, 100.0, 1.0 + t)
        reward = jnp.where(t == self.nan_at, jnp.nan, reward)
        nxt = state.pipeline_state + 1.0
        obs = jnp.stack([nxt[0], jnp.sum(action)])
        return state.replace(
            pipeline_state=nxt, obs=obs, reward=reward, done=done.astype(jnp.float32)
        )


def _countdown_task(stop, nan_at=-1):
    return TaskEnv("countdown", CountdownEnv(stop, nan_at), horizon=H, obs_size=2, action_size=1)


POLICY = GaussianPolicy(obs_size=2, action_size=1, hidden=(4,))


def test_termination_masking():
    params = POLICY.init(jax.random.key(0))
    stops = [3, 1, 8, 20]
    keys = jax.random.split(jax.random.key(1), 2)
    types = jnp.zeros(2, jnp.int32)
    out = [rollout(_countdown_task(stop), POLICY, params, keys, types) for stop in stops]
    for stop, traj in zip(stops, out, strict=True):
        n = min(stop, H)
        expected_mask = (np.arange(H) < n).astype(np.float32)
        np.testing.assert_array_equal(traj.mask, np.broadcast_to(expected_mask, (2, H)))
        np.testing.assert_array_equal(traj.rewards[0], expected_mask * (1 + np.arange(H)))
        np.testing.assert_array_equal(traj.lengths, [n, n])
        np.testing.assert_allclose(traj.returns, [n * (n + 1) / 2] * 2)
        # stored inputs of dead steps are zeroed
        assert np.all(np.asarray(traj.u)[:, n:] == 0)
        assert np.all(np.asarray(traj.obs)[:, n:] == 0)
    assert out[0].mask.dtype == jnp.float32 and out[0].lengths.dtype == jnp.int32


def test_non_finite_is_termination():
    params = POLICY.init(jax.random.key(0))
    traj = rollout(
        _countdown_task(stop=20, nan_at=4),
        POLICY,
        params,
        jax.random.split(jax.random.key(1), 3),
        jnp.zeros(3, jnp.int32),
    )
    chex.assert_tree_all_finite(traj)
    np.testing.assert_array_equal(traj.lengths, [5, 5, 5])  # the NaN step is the last alive one
    np.testing.assert_array_equal(traj.rewards[0], [1, 2, 3, 4, 0, 0, 0, 0])
    g, _ = policy_gradient(POLICY, params, traj, jnp.ones(3), 0.99)
    chex.assert_tree_all_finite(g)


@pytest.fixture(scope="module")
def het_point_mass():
    task = make_heterogeneous(make_env("point_mass", horizon=10), "sign_flip")
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    return task, policy, params


def test_heterogeneous_observations(het_point_mass):
    task, policy, params = het_point_mass
    key = jax.random.key(4)
    keys = jnp.stack([key, key, jax.random.key(5), jax.random.key(5)])
    types = jnp.array([0, 1, 1, 0], jnp.int32)
    traj = rollout(task, policy, params, keys, types)
    chex.assert_shape(traj.obs, (4, 10, 5))
    # same reset key -> same s0: type 0 sees (s0, 0), type 1 sees (-s0, 1)
    s0 = np.asarray(traj.obs[0, 0, :4])
    np.testing.assert_allclose(traj.obs[1, 0], np.concatenate([-s0, [1.0]]), rtol=1e-6)
    np.testing.assert_allclose(traj.obs[2, 0, :4], -np.asarray(traj.obs[3, 0, :4]), rtol=1e-6)
    alive = np.asarray(traj.mask) > 0
    flags = np.asarray(traj.obs[..., 4])
    assert np.all(flags[[0, 3]][alive[[0, 3]]] == 0) and np.all(flags[[1, 2]][alive[[1, 2]]] == 1)


def test_per_slot_params_and_evaluate(het_point_mass):
    task, policy, params = het_point_mass
    keys = jax.random.split(jax.random.key(8), 6)
    types = jnp.arange(6, dtype=jnp.int32) % 2
    shared = rollout(task, policy, params, keys, types)
    stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (6, *x.shape)), params)
    per_slot = rollout(task, policy, stacked, keys, types, per_slot_params=True)
    chex.assert_trees_all_close(shared, per_slot, rtol=1e-5, atol=1e-5)
    # a different point in one slot changes only that slot
    other = jax.tree.map(lambda x: x.at[2].add(0.5), stacked)
    moved = rollout(task, policy, other, keys, types, per_slot_params=True)
    np.testing.assert_allclose(moved.u[0], shared.u[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(moved.u[2], shared.u[2])

    r1 = evaluate(task, policy, params, jax.random.key(3), 6)
    r2 = evaluate(task, policy, params, jax.random.key(3), 6)
    chex.assert_shape(r1, (6,))
    np.testing.assert_array_equal(r1, r2)
    det = rollout(
        task, policy, params, jax.random.split(jax.random.key(3), 6), types, deterministic=True
    )
    np.testing.assert_allclose(det.returns, r1)
    mean, _ = policy.distribution(params, det.obs)
    np.testing.assert_allclose(det.u, jnp.where(det.mask[..., None] > 0, mean, 0.0), atol=1e-6)


def test_no_retrace_on_second_call(het_point_mass):
    task, policy, params = het_point_mass
    keys = jax.random.split(jax.random.key(0), 4)
    types = jnp.zeros(4, jnp.int32)
    traced = jax.jit(
        chex.assert_max_traces(lambda t, p, k: rollout(t, policy, p, k, types), n=1),
        static_argnums=0,
    )
    traced(task, params, keys)
    new_params = jax.tree.map(lambda x: x + 1.0, params)
    traced(task, new_params, jax.random.split(jax.random.key(1), 4))
    # An equal task built anew hashes equal: no second trace either.
    traced(make_heterogeneous(make_env("point_mass", horizon=10)), params, keys)


def _mjx_smoke(name, horizon, batch=4, physics=None, keys=None, **kwargs):
    task = make_env(name, horizon=horizon, **kwargs)
    if physics is not None:
        task = with_physics(task, physics)
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    traj = rollout(
        task,
        policy,
        params,
        jax.random.split(jax.random.key(1), batch) if keys is None else keys,
        jnp.arange(batch, dtype=jnp.int32) % task.num_types,
    )
    assert isinstance(traj, Trajectories)
    chex.assert_shape(traj.obs, (batch, horizon, task.obs_size))
    chex.assert_shape(traj.u, (batch, horizon, task.action_size))
    chex.assert_shape([traj.rewards, traj.mask], (batch, horizon))
    chex.assert_shape([traj.returns, traj.lengths], (batch,))
    chex.assert_tree_all_finite(traj)
    grads, stats = policy_gradient(policy, params, traj, jnp.full((batch,), 1.0 / batch), 0.99)
    chex.assert_trees_all_equal_shapes(grads, params)
    chex.assert_tree_all_finite(grads)
    assert np.isfinite(float(stats["mean_return"]))
    return traj


def test_mjx_reacher_smoke_with_physics_types():
    """Reacher with four physics types (type 2 three times as heavy, type 3's goal moved by
    (0.05, −0.05)), every slot on the same key and acting the same constant action (a policy
    whose mean is its bias, evaluated deterministically): the same action sequence. One
    rollout steps each slot with its type's model: types 0 and 1 (both unchanged) follow the
    same trajectory; the heavier arm moves differently; the moved goal leaves the arm's motion
    as it was and shifts the fingertip-to-goal vector by (−0.05, 0.05) at every step."""
    physics = PhysicsTypes.of(mass=[1, 1, 3, 1], goal=[[0, 0], [0, 0], [0, 0], [0.05, -0.05]])
    task = with_physics(make_env("reacher", horizon=10), physics)
    policy = make_policy(task)
    params = jax.tree.map(jnp.zeros_like, policy.init(jax.random.key(0)))
    params["params"]["mean"]["bias"] = jnp.array([0.8, -0.5])
    keys = jnp.stack([jax.random.key(1)] * 4)
    traj = rollout(task, policy, params, keys, jnp.arange(4, dtype=jnp.int32), deterministic=True)
    np.testing.assert_array_equal(traj.lengths, [10] * 4)  # reacher never terminates
    chex.assert_tree_all_finite(traj)
    chex.assert_trees_all_close(traj.u, jnp.broadcast_to(traj.u[0], traj.u.shape))
    chex.assert_trees_all_close(traj.obs[1], traj.obs[0])
    # the arm (angles' cos and sin, fingertip velocity) after 10 steps: identical models agree
    # to float32 rounding (~1e-6), the heavier arm is ~1e-3 behind
    assert float(jnp.max(jnp.abs(traj.obs[2, -1, :8] - traj.obs[0, -1, :8]))) > 5e-4
    chex.assert_trees_all_close(traj.obs[3, :, :8], traj.obs[0, :, :8], atol=1e-5)
    offset = traj.obs[3, :, 8:10] - traj.obs[0, :, 8:10]
    chex.assert_trees_all_close(offset, jnp.broadcast_to(jnp.array([-0.05, 0.05]), (10, 2)),
                                atol=1e-5)  # fmt: skip


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["hopper", "walker2d", "humanoid"])
def test_mjx_locomotion_smoke(name):
    traj = _mjx_smoke(name, horizon=100, solver_iterations=1, ls_iterations=4)
    assert np.all(np.asarray(traj.lengths) >= 1)


def test_early_exit_matches_full_horizon_scan():
    """A task that terminates: the blocked while loop (stops once every slot has ended) must
    record what one scan over all H steps records. The two are different XLA programs, so
    floats are compared to float32 rounding and everything discrete exactly; the episodes end
    at steps drawn at reset (RandomStopEnv), not at a float threshold of the state, so a
    last-bit difference cannot move an ending."""
    task = _random_stop_task()
    assert task.terminates
    params = POLICY.init(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), 6)
    types = jnp.zeros(6, jnp.int32)
    early = rollout(task, POLICY, params, keys, types)
    full = rollout(dataclasses.replace(task, terminates=False), POLICY, params, keys, types)
    assert np.asarray(early.lengths).min() < H  # some episodes end early: the loop exits
    _assert_same_trajectories(early, full)


def test_evaluate_of_non_finite_params_is_nan():
    """Non-finite params end every episode at its first step (return 0 by the rollout's
    rule); evaluate reports NaN instead, so a diverged policy never scores a return."""
    task = _random_stop_task()
    params = POLICY.init(jax.random.key(0))
    bad = jax.tree.map(lambda x: x.at[(0,) * x.ndim].set(jnp.nan), params)
    good = evaluate(task, POLICY, params, jax.random.key(2), 4)
    assert np.all(np.isfinite(good))
    assert np.all(np.isnan(evaluate(task, POLICY, bad, jax.random.key(2), 4)))


def _assert_same_trajectories(got, want):
    """Masks and lengths exactly; floats to float32 rounding (rtol 1e-5: a few ulps of each
    step, compounded over H = 8 steps of a linear policy)."""
    chex.assert_trees_all_equal((got.mask, got.lengths), (want.mask, want.lengths))
    chex.assert_trees_all_close(got, want, rtol=1e-5, atol=1e-6)


@dataclasses.dataclass(frozen=True)
class RandomStopEnv:
    """Episodes end after a random number of steps in [1, 2H] drawn at reset (so some reach
    the horizon); reward depends on the state and the action; optionally NaN on one step."""

    nan_stop: int = -1  # an episode whose stop is this gets a NaN reward at t = 1

    def reset(self, rng):
        k1, k2 = jax.random.split(rng)
        stop = jax.random.randint(k1, (), 1, 2 * H + 1).astype(jnp.float32)
        s = jax.random.normal(k2, (2,))
        z = jnp.zeros((), jnp.float32)
        return State(jnp.stack([z, stop]), s, z, z)

    def step(self, state, action):
        t, stop = state.pipeline_state
        obs = 0.9 * state.obs + jnp.sum(action)
        reward = -jnp.sum((obs - 0.5) ** 2) + t
        reward = jnp.where((stop == self.nan_stop) & (t == 1), jnp.nan, reward)
        done = (t + 1 >= stop).astype(jnp.float32)
        return state.replace(
            pipeline_state=jnp.stack([t + 1, stop]), obs=obs, reward=reward, done=done
        )


def _random_stop_task(lanes=1.0, types=1, nan_stop=-1):
    transforms = (lambda o: o, lambda o: -o)[:types]
    env = RandomStopEnv(nan_stop)
    return TaskEnv("stop", env, horizon=H, obs_size=2, action_size=1,
                   obs_transforms=transforms, lanes=lanes)  # fmt: skip


@pytest.mark.parametrize("per_slot", [False, True])
@pytest.mark.parametrize("lanes", [0.25, 0.5, 0.8])
def test_refill_lanes_give_the_same_trajectories(lanes, per_slot):
    """A batch of 12 trajectories on fewer lanes that take the next trajectory when theirs
    ends: the same buffers as one lane per trajectory (heterogeneous types, episodes ending
    at random times or at H, a non-finite reward).

    The policy's matrix products run as one [W, ·] (or batched, per-slot) GEMM whose XLA
    kernel depends on the batch size W, so values may differ in the last float32 bit (as
    seeds vmapped together differ from seeds run alone): everything discrete (masks, lengths,
    which steps exist) is equal, floats to rounding. Endings are drawn at reset, so rounding
    cannot move them.
    """
    S = 12
    params = POLICY.init(jax.random.key(0))
    if per_slot:
        params = jax.vmap(lambda k: POLICY.init(k))(jax.random.split(jax.random.key(5), S))
    keys = jax.random.split(jax.random.key(3), S)
    types = jnp.arange(S, dtype=jnp.int32) % 2
    run = lambda task: rollout(task, POLICY, params, keys, types, per_slot_params=per_slot)
    full = run(_random_stop_task(1.0, types=2, nan_stop=3))
    refill = run(_random_stop_task(lanes, types=2, nan_stop=3))
    lengths = np.asarray(full.lengths)
    assert lengths.min() < H and (lengths == H).any()  # both kinds of ending are exercised
    _assert_same_trajectories(refill, full)


@pytest.mark.parametrize("lanes", [1.0, 0.5])
def test_per_step_versions_act_with_each_steps_parameters(lanes):
    """Central inference: slot s acts at step t with ``params[versions[s, t]]``. Every alive
    step's (deterministic) action is the mode of its own version at the observation it saw,
    and a slot whose steps all use one version is the rollout at that version (with one
    lane per trajectory and with refilled lanes)."""
    S, R = 6, 3
    history = jax.vmap(POLICY.init)(jax.random.split(jax.random.key(7), R))
    keys = jax.random.split(jax.random.key(3), S)
    types = jnp.arange(S, dtype=jnp.int32) % 2
    task = _random_stop_task(lanes, types=2)
    versions = jax.random.randint(jax.random.key(4), (S, H), 0, R).at[0].set(1)
    traj = rollout(task, POLICY, history, keys, types, versions=versions, deterministic=True)
    chex.assert_shape(traj.u, (S, H, 1))
    alive = np.asarray(traj.mask) > 0
    assert len(np.unique(np.asarray(versions)[1:][alive[1:]])) == R  # every version acts
    for r in range(R):
        mode, _ = POLICY.distribution(jax.tree.map(lambda x: x[r], history), traj.obs)
        here = (np.asarray(versions) == r) & alive
        np.testing.assert_allclose(
            np.asarray(traj.u)[here], np.asarray(mode)[here], rtol=1e-5, atol=1e-6
        )
    at_one = rollout(task, POLICY, jax.tree.map(lambda x: x[1], history), keys, types,
                     deterministic=True)  # fmt: skip
    _assert_same_trajectories(
        jax.tree.map(lambda x: x[:1], traj), jax.tree.map(lambda x: x[:1], at_one)
    )
    with pytest.raises(ValueError, match=r"versions must have shape \(6, 8\)"):
        rollout(task, POLICY, history, keys, types, versions=versions[:, :2])


def test_refill_lanes_count_and_non_terminating_tasks_keep_one_lane_per_trajectory():
    from jaxnigt.rl.rollout import num_lanes

    assert num_lanes(_random_stop_task(0.25), 12) == 3
    assert num_lanes(_random_stop_task(0.01), 12) == 1
    assert num_lanes(_random_stop_task(1.0), 12) == 12
    task = dataclasses.replace(_random_stop_task(0.25), terminates=False)
    assert num_lanes(task, 12) == 12
    with pytest.raises(ValueError, match="lanes"):
        _random_stop_task(0.0)
