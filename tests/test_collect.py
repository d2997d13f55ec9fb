"""Tests for jaxnigt.rl.collect: chunked slot gradients equal one big batch; keys per slot."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import envs
from jaxnigt.cluster import aggregators, model, schedules
from jaxnigt.rl.collect import gradient_from_schedule, slot_keys
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.policy import make_policy
from jaxnigt.rl.rollout import rollout


def test_slot_keys_depend_only_on_worker_and_rank():
    k = jax.random.key(0)
    a = slot_keys(k, jnp.array([0, 1, 0]), jnp.array([0, 0, 1]))
    b = slot_keys(k, jnp.array([0, 0, 1]), jnp.array([1, 0, 0]))
    data = lambda x: np.asarray(jax.random.key_data(x))
    np.testing.assert_array_equal(data(a)[2], data(b)[0])
    np.testing.assert_array_equal(data(a)[0], data(b)[1])
    assert not np.array_equal(data(a)[0], data(a)[1])


def test_chunked_malenia_gradient_equals_single_batch():
    task = envs.make_heterogeneous(envs.make_env("point_mass"), "sign_flip")
    policy = make_policy(task)
    params = policy.init(jax.random.key(0))
    tm = model.make_cluster_model(2, h=[1.0, 3.0], noise="exponential")
    types = jnp.asarray(envs.worker_types(2, 2))
    sched = schedules.malenia(tm, jax.random.key(1), 0.0, jnp.zeros(2), M=6, capacity=12)
    w = aggregators.malenia_weights(sched)
    key = jax.random.key(2)
    num = int(sched.num_slots)
    assert num > 4  # several chunks of 4 below

    chunked, stats = jax.jit(
        lambda p: gradient_from_schedule(task, policy, p, sched, w, key, types, 0.99, chunk=4)
    )(params)
    # Reference: the valid slots as one batch.
    keys = slot_keys(key, sched.slot_worker[:num], sched.slot_rank[:num])
    traj = rollout(task, policy, params, keys, types[sched.slot_worker[:num]])
    ref, ref_stats = policy_gradient(policy, params, traj, w[:num], 0.99)
    chex.assert_trees_all_close(chunked, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats["count"], num)
    np.testing.assert_allclose(stats["sum_return"], ref_stats["sum_return"], rtol=1e-5)
