"""Tests for jaxnigt.cluster.reductions: closed forms in numpy, the library's slot weights on
the same gradients, shapes, jit and no jit, and the docstrings' examples."""

from __future__ import annotations

import doctest

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from jaxnigt import cluster
from jaxnigt.cluster import aggregators, reductions


def _rennala_np(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """g = sum_i s_i / sum_i b_i, in float64."""
    return sums.sum(0) / max(counts.sum(), 1)


def _malenia_np(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """g = (1/|A|) sum_{i in A} s_i / b_i over A = {i : b_i > 0}, in float64, one worker at a
    time."""
    means = [sums[i] / counts[i] for i in range(len(counts)) if counts[i] > 0]
    return np.mean(means, axis=0) if means else np.zeros(sums.shape[1:])


# Hand-computed: s = ((2, 4), (0, 0), (3, 3)), b = (2, 0, 3).
#   Rennala: (5, 7) / 5 = (1, 1.4).   Malenia: ((1, 2) + (1, 1)) / 2 = (1, 1.5).
_SUMS = np.array([[2.0, 4.0], [0.0, 0.0], [3.0, 3.0]])
_COUNTS = np.array([2, 0, 3])


class ReductionsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_hand_computed_case(self):
        sums = {"w": jnp.asarray(_SUMS, jnp.float32)}
        counts = jnp.asarray(_COUNTS, jnp.int32)
        ren = self.variant(cluster.rennala_reduce)(sums, counts)
        mal = self.variant(cluster.malenia_reduce)(sums, counts)
        chex.assert_trees_all_close(ren, {"w": jnp.array([1.0, 1.4])}, rtol=1e-6)
        chex.assert_trees_all_close(mal, {"w": jnp.array([1.0, 1.5])}, rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.parameters(0, 1, 2)
    def test_random_pytrees_match_the_closed_forms(self, seed):
        rng = np.random.default_rng(seed)
        n = 5
        counts = rng.integers(0, 4, n)
        counts[seed] = 0  # a worker that delivered nothing
        shapes = {"a": (n, 3), "b": {"c": (n, 2, 4), "d": (n,)}}
        sums = jax.tree.map(
            lambda s: rng.normal(size=s).astype(np.float32),
            shapes,
            is_leaf=lambda x: isinstance(x, tuple),
        )
        ren = self.variant(reductions.rennala_reduce)(sums, jnp.asarray(counts, jnp.int32))
        mal = self.variant(reductions.malenia_reduce)(sums, jnp.asarray(counts, jnp.int32))
        for got, reference in ((ren, _rennala_np), (mal, _malenia_np)):
            chex.assert_trees_all_equal_structs(got, jax.tree.map(lambda s: s[0], sums))
            chex.assert_shape(got["b"]["c"], (2, 4))
            chex.assert_type(got["a"], jnp.float32)
            expected = jax.tree.map(lambda s, c=counts, f=reference: f(s.astype(float), c), sums)
            chex.assert_trees_all_close(got, expected, rtol=1e-5, atol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_worker_sums_leave_invalid_slots_out_even_nan(self):
        x = {"g": jnp.array([[1.0, 1.0], [2.0, 0.0], [jnp.nan, 5.0], [0.0, 4.0]])}
        worker = jnp.array([1, 0, 1, 0])
        valid = jnp.array([True, True, False, True])
        sums, counts = self.variant(reductions.worker_sums, static_argnums=3)(x, worker, valid, 3)
        chex.assert_shape(sums["g"], (3, 2))
        chex.assert_trees_all_close(sums, {"g": jnp.array([[2.0, 4.0], [1.0, 1.0], [0.0, 0.0]])})
        np.testing.assert_array_equal(counts, [2, 1, 0])
        chex.assert_type(counts, jnp.int32)

    @chex.variants(with_jit=True, without_jit=True)
    def test_no_contribution_is_a_zero_direction(self):
        sums = jnp.zeros((3, 2))
        counts = jnp.zeros(3, jnp.int32)
        for fn in (reductions.rennala_reduce, reductions.malenia_reduce):
            chex.assert_trees_all_close(self.variant(fn)(sums, counts), jnp.zeros(2))

    def test_shapes_are_checked(self):
        with pytest.raises(AssertionError):
            reductions.rennala_reduce({"w": jnp.zeros((3, 2))}, jnp.zeros(4, jnp.int32))
        with pytest.raises(AssertionError):
            reductions.malenia_reduce(jnp.zeros((3, 2)), jnp.zeros((3, 1), jnp.int32))
        with pytest.raises(AssertionError):
            reductions.worker_sums(jnp.zeros((4, 2)), jnp.zeros(4, int), jnp.ones(3, bool), 2)


# --- against the library's own path: slot weights from aggregators, one weighted sum ------

N, M, CAP = 4, 12, 72


@jax.jit
def _rounds(key):
    model = cluster.make_cluster(N, h=[1.0, 2.0, 3.0, 7.0], noise="exponential")
    busy = jnp.zeros(N)
    return (
        cluster.rennala(model, key, 0.0, busy, M=M),
        cluster.malenia(model, key, 0.0, busy, M=M, capacity=CAP),
        cluster.sync(model, key, 0.0, busy, per_worker=2),
    )


def _per_slot_gradients(key, num_slots):
    k1, k2 = jax.random.split(key)
    return {
        "w": jax.random.normal(k1, (num_slots, 3, 2)),
        "b": jax.random.normal(k2, (num_slots, 2)),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reductions_equal_the_aggregator_weights_on_the_same_slots(seed):
    """The per-worker path (worker sums, then the reduction) and the library's (slot weights
    from :mod:`jaxnigt.cluster.aggregators`, then ``sum_j w_j g_j``) give one direction."""
    key = jax.random.key(seed)
    ren, mal, syn = _rounds(key)
    cases = (
        (ren, aggregators.rennala_weights, cluster.rennala_reduce),
        (mal, aggregators.malenia_weights, cluster.malenia_reduce),
        (syn, aggregators.sync_weights, cluster.rennala_reduce),
    )
    for sched, weights, reduce in cases:
        assert not bool(sched.overflow)
        g = _per_slot_gradients(jax.random.fold_in(key, 7), sched.slot_worker.shape[0])
        w = weights(sched)
        library = jax.tree.map(lambda x, w=w: jnp.tensordot(w, x, axes=1), g)
        sums, counts = cluster.worker_sums(g, sched.slot_worker, sched.slot_valid, N)
        np.testing.assert_array_equal(counts, sched.counts)
        chex.assert_trees_all_close(reduce(sums, counts), library, rtol=1e-5, atol=1e-6)


def test_malenia_differs_from_rennala_when_workers_differ():
    """Worker 0 delivers nine gradients equal to 1, worker 1 one gradient equal to 3: Malenia's
    direction is the workers' plain average (1 + 3) / 2 = 2, Rennala's leans to the worker that
    delivered more, (9 + 3) / 10 = 1.2."""
    sums, counts = jnp.array([[9.0], [3.0]]), jnp.array([9, 1])
    chex.assert_trees_all_close(cluster.malenia_reduce(sums, counts), jnp.array([2.0]))
    chex.assert_trees_all_close(cluster.rennala_reduce(sums, counts), jnp.array([1.2]))


def test_docstring_examples():
    result = doctest.testmod(reductions, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 3 and result.failed == 0, result
