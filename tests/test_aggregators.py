"""Tests for jaxnigt.cluster.aggregators."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.cluster import aggregators, schedules
from jaxnigt.cluster.model import make_cluster_model

C = np.array([[1.0, -2.0], [5.0, 4.0]], np.float32)  # constant "gradient" of worker 0 and 1
M, CAP = 20, 120


@jax.jit
def _two_worker_round(key):
    tm = make_cluster_model(2, h=[1.0, 10.0])
    busy = jnp.zeros(2)
    return (
        schedules.rennala(tm, key, 0.0, busy, M=M),
        schedules.malenia(tm, key, 0.0, busy, M=M, capacity=CAP),
        schedules.sync(tm, key, 0.0, busy, per_worker=3),
    )


def _weighted(w, sched):
    return np.einsum("s,sd->d", np.asarray(w), C[np.asarray(sched.slot_worker)])


def test_bias_two_heterogeneous_workers():
    ren, mal, syn = _two_worker_round(jax.random.key(0))
    # deterministic h = (1, 10): Rennala's first 20 completions are 19 from worker 0 and one
    # from worker 1 (the tie at t = 10 goes to worker 0 first).  Malenia waits until
    # 1/b_0 + 1/b_1 <= n^2/M = 0.2: first at t = 60 with b = (60, 6).
    np.testing.assert_array_equal(ren.counts, [19, 1])
    np.testing.assert_array_equal(mal.counts, [60, 6])
    assert float(mal.t_collect_end) == 60.0
    np.testing.assert_allclose(
        _weighted(aggregators.malenia_weights(mal), mal), C.mean(0), rtol=1e-6
    )
    b = np.asarray(ren.counts, np.float32)
    count_mean = (b[:, None] * C).sum(0) / b.sum()
    np.testing.assert_allclose(
        _weighted(aggregators.rennala_weights(ren), ren), count_mean, rtol=1e-6
    )
    assert not np.allclose(count_mean, C.mean(0))  # Rennala is biased toward the fast worker
    np.testing.assert_allclose(_weighted(aggregators.sync_weights(syn), syn), C.mean(0), rtol=1e-6)


def test_weights_sum_to_one_and_vanish_on_invalid_slots():
    for sched, fn in zip(
        _two_worker_round(jax.random.key(1)),
        (aggregators.rennala_weights, aggregators.malenia_weights, aggregators.sync_weights),
        strict=True,
    ):
        w = fn(sched)
        chex.assert_shape(w, sched.slot_worker.shape)
        chex.assert_type(w, jnp.float32)
        np.testing.assert_allclose(jnp.sum(w), 1.0, rtol=1e-6)
        assert bool(jnp.all(jnp.where(sched.slot_valid, w > 0, w == 0)))
    _, mal, _ = _two_worker_round(jax.random.key(1))
    w = np.asarray(aggregators.malenia_weights(mal))
    for i in range(2):
        on_i = np.asarray(mal.slot_valid) & (np.asarray(mal.slot_worker) == i)
        np.testing.assert_allclose(w[on_i], 1.0 / (2 * int(mal.counts[i])), rtol=1e-6)


def test_low_level_weights():
    worker = jnp.array([1, 0, 1, 0, 0])
    valid = jnp.array([True, True, True, False, False])
    counts = jnp.array([1, 2])
    np.testing.assert_allclose(
        aggregators.mean_weights(valid), [1 / 3, 1 / 3, 1 / 3, 0, 0], rtol=1e-6
    )
    np.testing.assert_allclose(
        aggregators.per_worker_mean_weights(worker, valid, counts),
        [0.25, 0.5, 0.25, 0, 0],
        rtol=1e-6,
    )
