"""Tests for jaxnigt.envs: registry, toy envs, heterogeneous types, worker types."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.envs import (
    SignFlip,
    TaskEnv,
    default_horizon,
    identity,
    list_envs,
    make_env,
    make_heterogeneous,
    worker_types,
)
from jaxnigt.envs.toy import LinearGaussian1D


def test_list_envs_and_default_horizons():
    names = list_envs()
    for name in ("humanoid", "hopper", "walker2d", "reacher", "lqr1d", "point_mass"):
        assert name in names
    assert default_horizon("reacher") == 50
    for name in ("hopper", "walker2d", "humanoid", "ant", "halfcheetah"):
        assert default_horizon(name) == 1000
    assert default_horizon("lqr1d") == 5
    assert default_horizon("point_mass") == 30


def test_unknown_env_lists_available():
    with pytest.raises(ValueError, match="available") as err:
        make_env("no_such_env")
    assert "hopper" in str(err.value) and "point_mass" in str(err.value)
    with pytest.raises(ValueError, match="toy env"):
        make_env("lqr1d", solver_iterations=1)


def test_toy_task_fields_and_step_types():
    task = make_env("point_mass", horizon=12)
    assert (task.horizon, task.obs_size, task.action_size, task.num_types) == (12, 4, 2, 1)
    assert task.obs_transforms == (identity,)
    s0 = jax.jit(task.env.reset)(jax.random.key(0))
    s1 = jax.jit(task.env.step)(s0, jnp.ones(2))
    # reset and step produce the same pytree types, so a scan carry never retraces
    chex.assert_trees_all_equal_dtypes(s0, s1)
    chex.assert_trees_all_equal_shapes(s0, s1)
    # p' = p + 0.2 a, reward = -|g - p'|
    p, g = s0.pipeline_state[:2], s0.pipeline_state[2:]
    np.testing.assert_allclose(s1.pipeline_state[:2], p + 0.2, rtol=1e-6)
    np.testing.assert_allclose(s1.reward, -np.linalg.norm(g - (p + 0.2)), rtol=1e-5)
    # legacy uint32 keys are accepted too
    jax.jit(task.env.reset)(jax.random.PRNGKey(0))


def test_lqr_dynamics():
    env = LinearGaussian1D(noise_std=0.0)
    s0 = env.reset(jax.random.key(0))
    s1 = env.step(s0, jnp.array([0.4]))
    s = float(s0.obs[0])
    np.testing.assert_allclose(s1.obs[0], 0.9 * s + 0.5 * 0.4, rtol=1e-6)
    np.testing.assert_allclose(s1.reward, -(s**2 + 0.1 * 0.4**2), rtol=1e-6)


def test_sign_flip_transforms():
    task = make_heterogeneous(make_env("point_mass"), "sign_flip")
    assert task.num_types == 2 and task.obs_size == 5 and task.raw_obs_size == 4
    s = jnp.arange(4.0) + 1
    np.testing.assert_array_equal(task.obs_transforms[0](s), [1, 2, 3, 4, 0])
    np.testing.assert_array_equal(task.obs_transforms[1](s), [-1, -2, -3, -4, 1])
    batch = jnp.ones((3, 2, 4))
    chex.assert_shape(task.obs_transforms[1](batch), (3, 2, 5))
    # value-hashable: two constructions are equal, so jit caches are shared
    again = make_heterogeneous(make_env("point_mass"), "sign_flip")
    assert again == task and hash(again) == hash(task)
    assert SignFlip(-1.0, 1.0) == task.obs_transforms[1]


def test_general_transform_list_and_errors():
    base = make_env("point_mass")
    three = make_heterogeneous(base, [identity, lambda s: 2 * s, lambda s: s[::-1]])
    assert three.num_types == 3 and three.obs_size == 4
    with pytest.raises(ValueError, match="common"):
        make_heterogeneous(base, [identity, lambda s: s[:2]])
    with pytest.raises(ValueError):
        make_heterogeneous(base, "rotate")
    with pytest.raises(ValueError):
        make_heterogeneous(base, [])
    with pytest.raises(ValueError, match="already"):
        make_heterogeneous(three, "sign_flip")


def test_worker_types():
    np.testing.assert_array_equal(worker_types(5, 2), [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(worker_types(4, 1), [0, 0, 0, 0])
    out = worker_types(3, 3, [2, 2, 0])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [2, 2, 0])
    for bad in ([0, 1], [0, 1, 3], [0, -1, 1], [0.5, 1, 1]):
        with pytest.raises(ValueError):
            worker_types(3, 3, bad)
    with pytest.raises(ValueError):
        worker_types(0, 2)
    with pytest.raises(ValueError):
        worker_types(3, 0)


def test_task_env_validation():
    with pytest.raises(ValueError):
        TaskEnv("x", None, horizon=0, obs_size=1, action_size=1)
    with pytest.raises(ValueError):
        TaskEnv("x", None, horizon=3, obs_size=1, action_size=1, obs_transforms=())


def test_mjx_solver_settings_applied():
    task = make_env("reacher", solver_iterations=1, ls_iterations=4)
    assert task.env.sys.opt.iterations == 1
    assert task.env.sys.opt.ls_iterations == 4
    assert (task.obs_size, task.action_size, task.horizon) == (11, 2, 50)
    # cached: same args -> same env object (shared compilations)
    assert make_env("reacher", solver_iterations=1, ls_iterations=4).env is task.env


def test_an_environment_of_ones_own_is_one_registration(monkeypatch):
    """register_env: the name lists, its horizon is the default, make_env builds it with its
    interface checked, and a taken name or a bad horizon is refused."""
    import dataclasses

    from jaxnigt import envs

    monkeypatch.setattr(envs, "_USER_ENVS", {})

    @dataclasses.dataclass(frozen=True)
    class Still:
        observation_size: int = 3
        action_size: int = 1

        def reset(self, key):
            zero = jnp.zeros((), jnp.float32)
            return envs.State(pipeline_state=None, obs=jnp.zeros(3), reward=zero, done=zero)

        def step(self, state, action):
            return state.replace(reward=-jnp.sum(action**2))

    envs.register_env("still", Still, horizon=7, action_scale=2.0, terminates=False)
    assert "still" in envs.list_envs() and envs.default_horizon("still") == 7
    task = envs.make_env("still")
    assert (task.horizon, task.obs_size, task.action_size) == (7, 3, 1)
    assert task.action_scale == 2.0 and not task.terminates
    state = task.env.step(task.env.reset(jax.random.key(0)), jnp.ones(1))
    chex.assert_trees_all_close(state.reward, jnp.float32(-1.0))
    with pytest.raises(ValueError, match="one of the library's"):
        envs.register_env("point_mass", Still, horizon=5)
    with pytest.raises(ValueError, match="already registered"):
        envs.register_env("still", LinearGaussian1D, horizon=5)
    with pytest.raises(ValueError, match="horizon must be an integer >= 1"):
        envs.register_env("other", Still, horizon=0)
    envs.register_env("broken", lambda: object(), horizon=3)
    with pytest.raises(ValueError, match="has no reset, step, observation_size, action_size"):
        envs.make_env("broken")


def test_physics_types_scale_and_move_the_model_they_name():
    """Each type's model fields, against the base model: every body's mass and inertia times
    the type's mass scale, every geom's sliding friction (column 0 only) times its friction
    scale, the goal body ('target') moved by its offset and no other body; type 0 (scales 1,
    offset 0) is the base model itself."""
    from jaxnigt.envs import PhysicsTypes, physics, with_physics

    task = make_env("reacher")
    base = task.env.sys
    types = PhysicsTypes.of(mass=[1.0, 2.5], friction=[1.0, 0.25], goal=[[0, 0], [0.1, -0.2]])
    task2 = with_physics(task, types)
    assert task2.num_types == 2 and task.num_types == 1
    target = [base.mj_model.body(i).name for i in range(base.nbody)].index("target")
    for v, (m, f, g) in enumerate([(1.0, 1.0, (0, 0)), (2.5, 0.25, (0.1, -0.2))]):
        sys = physics.model_of(task2.env_of_type(jnp.int32(v)))
        chex.assert_trees_all_close(sys.body_mass, base.body_mass * m)
        chex.assert_trees_all_close(sys.body_inertia, base.body_inertia * m)
        friction = np.asarray(base.geom_friction).copy()
        friction[:, 0] *= f
        chex.assert_trees_all_close(sys.geom_friction, friction)
        pos = np.asarray(base.body_pos).copy()
        pos[target, :2] += g
        chex.assert_trees_all_close(sys.body_pos, pos)
    assert task2.env_of_type(jnp.int32(0)) is not task.env  # a copy: the task's own stays
    assert task.env_of_type(jnp.int32(0)) is task.env and task.env.sys is base


def test_physics_types_refuse_what_cannot_differ():
    from jaxnigt.envs import PhysicsTypes, with_physics

    with pytest.raises(ValueError, match="one entry per type"):
        PhysicsTypes(mass=(1.0, 2.0), friction=(1.0,))
    with pytest.raises(ValueError, match=r"physics\.mass: scales must be > 0"):
        PhysicsTypes.of(mass=[1.0, 0.0])
    with pytest.raises(ValueError, match="no MJX model"):
        with_physics(make_env("point_mass"), PhysicsTypes.of(mass=[1.0, 2.0]))
    with pytest.raises(ValueError, match="no body 'target'"):
        with_physics(make_env("hopper"), PhysicsTypes.of(goal=[[0, 0], [0.1, 0]]))
    with pytest.raises(ValueError, match="2 observation types but 3 physics types"):
        with_physics(make_heterogeneous(make_env("reacher")), PhysicsTypes.of(mass=[1, 2, 3]))
