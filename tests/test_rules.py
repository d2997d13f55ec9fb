"""The open registry of round rules (jaxnigt.cluster.rules): registration, the building
blocks a user's rule is written with, and the padding check."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.cluster import model as model_lib
from jaxnigt.cluster import rules, schedules, simulation


def test_the_librarys_rules_are_registered_and_unknown_names_list_them():
    assert rules.rule_names()[:4] == ("rennala", "malenia", "sync", "msync")
    assert all(rules.builtin(r) for r in simulation.ROUND_RULES)
    with pytest.raises(ValueError, match="unknown rule 'nosuch'; registered: rennala, malenia"):
        rules.get_rule("nosuch")
    with pytest.raises(ValueError, match="expected an identifier"):
        rules.register_rule("not a name")
    with pytest.raises(ValueError, match="'rennala' is already registered"):
        rules.register_rule("rennala")(lambda *a: None)


def test_a_rule_by_name_is_the_schedule_it_names():
    """simulate_rule_rounds through the registry gives what the schedule function gives."""
    m = model_lib.make_cluster_model(5, h="sqrt", noise="exponential", kappa=0.5)
    key = jax.random.key(4)
    got = simulation.simulate_rule_rounds(m, key, rule="rennala", M=4, rounds=4)
    fn = lambda mm, k, t, b: schedules.rennala(mm, k, t, b, M=4)
    want = schedules.run_rounds(fn, m, key, 4)
    chex.assert_trees_all_close(got["t_end"], want.t_end)
    chex.assert_trees_all_close(got["counts"], want.counts)


def _half_reference(tau: np.ndarray, M: int):
    """The half-of-the-workers rule by hand, from its description: every worker starts at 0
    and computes its gradients back to back; the round ends at the M-th completion overall
    or when ceil(n/2) workers have each delivered one, whichever is first; the completions
    up to then count (ties: lower worker, then lower k; at most M)."""
    n = tau.shape[0]
    done = np.cumsum(tau.astype(np.float64), axis=1)[:, :M]
    events = sorted((done[i, k], i, k) for i in range(n) for k in range(M))
    m_th = events[M - 1][0]
    half = sorted(done[:, 0])[(n + 1) // 2 - 1]
    end = min(m_th, half)
    counts = np.zeros(n, int)
    for t, i, _ in events[:M]:
        if t <= end:
            counts[i] += 1
    return end, counts


@pytest.mark.parametrize("case", range(6))
def test_collect_until_ends_a_round_where_its_stop_says(case):
    rng = np.random.default_rng(case)
    n, M = int(rng.integers(2, 7)), int(rng.integers(1, 6))
    tau = rng.exponential(1.0, (n, M + 1)).astype(np.float32) * rng.uniform(0.5, 3, (n, 1))
    m = model_lib.make_cluster_model(n, h=1.0, noise="deterministic")
    size = rules.RoundSize(M=M)

    def stop(done):
        half = (rules.worker_count(m) + 1) // 2
        return jnp.minimum(
            rules.kth_smallest(done, size.value("M")), rules.kth_smallest(done[:, 0], half)
        )

    s = rules.collect_until(m, jnp.asarray(tau), 0.0, jnp.zeros(n), stop, slots=M)
    end, counts = _half_reference(tau, M)
    np.testing.assert_allclose(float(s.t_collect_end), end, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(s.counts), counts)
    chex.assert_shape(s.slot_worker, (M,))
    assert int(s.num_slots) == counts.sum() == int(np.sum(np.asarray(s.slot_valid)))


def test_round_size_values_are_the_bounds_unless_a_padded_run_carries_its_own():
    size = rules.RoundSize(M=8, capacity=3, m=2)
    assert int(size.value("M")) == 8 and int(size.value("capacity")) == 3
    run = size._replace(run={"M": jnp.int32(5), "threshold": 1.5})
    assert int(run.value("M")) == 5 and int(run.value("m")) == 2
    assert float(run.value("threshold", 9.0)) == 1.5 and float(size.value("threshold", 9.0)) == 9
    with pytest.raises(ValueError, match="expected M, capacity, m or threshold"):
        size.value("n")
    with pytest.raises(ValueError, match="needs the rule's default"):
        size.value("threshold")


@pytest.fixture
def own_rules(monkeypatch):
    """Rules a test registers are gone after it (other tests list the registered rules)."""
    from jaxnigt.cluster.rules import registry

    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))


def test_a_rule_that_counts_the_padded_rows_is_caught(own_rules):
    @rules.register_rule("test_wrong_half", pads=True)
    def wrong(model, key, t0, busy_until, size):
        tau = rules.draw_times(model, key, size)
        stop = lambda done: rules.kth_smallest(done[:, 0], (model.n + 1) // 2)  # model.n!
        return rules.collect_until(model, tau, t0, busy_until, stop, slots=size.M)

    @rules.register_rule("test_right_half", pads=True)
    def right(model, key, t0, busy_until, size):
        tau = rules.draw_times(model, key, size)
        stop = lambda done: rules.kth_smallest(done[:, 0], (rules.worker_count(model) + 1) // 2)
        return rules.collect_until(model, tau, t0, busy_until, stop, slots=size.M)

    with pytest.raises(ValueError, match=r"pads wrongly.*worker_count"):
        rules.check_padding("test_wrong_half")
    rules.check_padding("test_right_half")  # no error
    for name in ("rennala", "malenia", "sync", "msync"):
        rules.check_padding(name)
