"""Tests for jaxnigt.cluster.events (the per-arrival engine) against hand-computed cases and
independent references (tests/reference_sim.py and tests/reference_natural.py; under
computation power, tests/reference_power.py on random traces)."""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_natural as natural
import reference_power
import reference_sim as ref

from jaxnigt.cluster import events, power
from jaxnigt.cluster.model import LINK, make_cluster_model, sample_compute_times, sample_noise

NUM = 80


def _on(tm, link):
    """The cluster model ``tm`` with the server link ``link``."""
    return dataclasses.replace(tm, link=link)


@functools.partial(jax.jit, static_argnames=("link",))
def _arrivals(tm, init_key, run_key, *, link):
    tm = _on(tm, link)
    state = events.async_init(tm, init_key, 0.5)
    final, arr = events.async_arrivals(tm, run_key, state, NUM)
    xi = jax.vmap(lambda j: sample_noise(tm, jax.random.fold_in(run_key, j), ()))(jnp.arange(NUM))
    return sample_compute_times(tm, init_key, 1)[:, 0], xi, final, arr


CONFIGS = [  # (n, h, noise, kappa)
    (1, "sqrt", "exponential", "linear"),
    (3, "sqrt", "deterministic", "linear"),  # ties among compute completions
    (10, "sqrt", "straggler:0.3:4", "linear"),
    (7, "decreasing", "lognormal:0.8", "sqrt"),
    (12, "linear", "uniform:0.5:1.5", 0.05),  # fast link: rarely a queue
    (5, "equal", "deterministic", "equal"),  # every worker ties at every event
]


@pytest.mark.parametrize("link", LINK.values)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"n{c[0]}-{c[2]}")
def test_matches_both_references(config, link):
    n, h, noise, kappa = config
    tm = make_cluster_model(n, h=h, noise=noise, kappa=kappa)
    init_key, run_key = jax.random.split(jax.random.key(11 + n))
    first, xi, final, arr = jax.tree.map(np.asarray, _arrivals(tm, init_key, run_key, link=link))
    h_, kappa_ = np.asarray(tm.h), np.asarray(tm.kappa)
    for source, expected in (
        ("reference_sim", ref.simulate_async(first, xi, h_, kappa_, 0.5, link=link)),
        ("reference_natural", natural.async_arrivals(first, xi, h_, kappa_, 0.5, link)),
    ):
        for j, e in enumerate(expected):
            where = f"{source} {link} arrival {j}"
            for name in ("worker", "dispatch_version", "staleness"):
                assert int(getattr(arr, name)[j]) == e[name], (where, name)
            np.testing.assert_allclose(arr.time[j], e["time"], rtol=1e-6, err_msg=where)
            np.testing.assert_allclose(
                arr.link_wait[j], e["link_wait"], rtol=1e-5, atol=1e-5, err_msg=where
            )
    assert int(final.version) == NUM and int(final.dispatch_count.sum()) == n + NUM
    assert np.all(np.diff(arr.time) >= 0)
    np.testing.assert_allclose(final.link_busy, kappa_[arr.worker].sum(), rtol=1e-5)
    if link == "shared":  # one exchange at a time: every arrival is >= its kappa after the last
        gaps = np.diff(np.concatenate([[0.5], arr.time.astype(np.float64)]))
        assert np.all(gaps >= kappa_[arr.worker] - 1e-6 * arr.time)  # float32 rounding
    else:
        np.testing.assert_array_equal(arr.link_wait, 0.0)


def _run(tm, link, num):
    tm = _on(tm, link)
    state = events.async_init(tm, jax.random.key(0), 0.0)
    return jax.tree.map(np.asarray, events.async_arrivals(tm, jax.random.key(1), state, num))


def test_shared_link_fast_worker_waits_for_slow_exchange():
    # h = (1, 1.5), kappa = (1, 3). w0 computes to 1, exchanges 1 -> 2. w1 computed at 1.5,
    # waits for the link until 2, exchanges 2 -> 5. w0 (redispatched at 2) computes to 3 and
    # waits until 5: 5 -> 6. w1 (redispatched at 5) computes to 6.5: 6.5 -> 9.5. w0
    # (redispatched at 6) computes to 7, waits until 9.5: 9.5 -> 10.5.
    tm = make_cluster_model(2, h=[1.0, 1.5], kappa=[1.0, 3.0])
    final, arr = _run(tm, "shared", 5)
    np.testing.assert_array_equal(arr.worker, [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(arr.time, [2.0, 5.0, 6.0, 9.5, 10.5])
    np.testing.assert_array_equal(arr.link_wait, [0.0, 0.5, 2.0, 0.0, 2.5])
    np.testing.assert_array_equal(arr.dispatch_time, [0.0, 0.0, 2.0, 5.0, 6.0])
    np.testing.assert_array_equal(arr.compute_end, [1.0, 1.5, 3.0, 6.5, 7.0])
    np.testing.assert_array_equal(arr.staleness, [0, 1, 1, 1, 1])
    assert float(final.link_busy) == 1 + 3 + 1 + 3 + 1
    # independent links overlap: w0 arrives every 2 units, w1 at 4.5, 9, ...
    _, ind = _run(tm, "independent", 5)
    np.testing.assert_array_equal(ind.worker, [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(ind.time, [2.0, 4.0, 4.5, 6.0, 8.0])
    np.testing.assert_array_equal(ind.staleness, [0, 0, 2, 1, 0])


def test_ties_lower_worker_first():
    tm = make_cluster_model(3)  # every gradient takes 1: all workers tie at every arrival
    _, arr = _run(tm, "independent", 6)
    np.testing.assert_array_equal(arr.worker, [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(arr.staleness, [0, 1, 2, 2, 2, 2])
    np.testing.assert_array_equal(arr.time, [1, 1, 1, 2, 2, 2])
    tm = make_cluster_model(3, kappa=0.5)  # the shared link serves the tied requests in id order
    _, arr = _run(tm, "shared", 6)
    np.testing.assert_array_equal(arr.worker, [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(arr.time, [1.5, 2.0, 2.5, 3.0, 3.5, 4.0])


def test_shared_link_rate_bound():
    """With one link every exchange occupies it for kappa_i >= min kappa."""
    tm = make_cluster_model(20, h="sqrt", noise="exponential", kappa="sqrt")
    final, arr = _run(tm, "shared", 300)
    rate = 300 / float(arr.time[-1])
    assert rate <= 1.0 / float(np.min(np.asarray(tm.kappa)))
    assert float(final.link_busy) <= float(arr.time[-1]) * (1 + 1e-6)


class EngineVariantsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_shapes_dtypes(self):
        tm = make_cluster_model(4, h="sqrt", noise="exponential", kappa="sqrt")
        step = self.variant(events.async_next)
        state = events.async_init(tm, jax.random.key(0), 0.0)
        state, arr = step(tm, jax.random.key(1), state)
        chex.assert_shape([state.compute_end, state.dispatch_version, state.dispatch_time], (4,))
        chex.assert_rank([arr.worker, arr.time, arr.link_wait, state.link_free], 0)
        chex.assert_type([arr.worker, arr.staleness, arr.grad_index, state.version], jnp.int32)
        chex.assert_type([arr.time, arr.link_wait, state.link_busy], jnp.float32)


def test_bad_link():
    with pytest.raises(ValueError, match="link: got 'x'"):
        make_cluster_model(2, link="x")


# --- the bounded-delay rule (Ringmaster) ------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("link", "stops"))
def _bounded(tm, init_key, run_key, R, *, link, stops):
    tm = _on(tm, link)
    state = events.bounded_init(events.async_init(tm, init_key, 0.5), R)
    final, ev = events.bounded_events(tm, run_key, state, NUM, stops=stops)
    xi = jax.vmap(lambda j: sample_noise(tm, jax.random.fold_in(run_key, j), ()))(jnp.arange(NUM))
    return sample_compute_times(tm, init_key, 1)[:, 0], xi, final, ev


@pytest.mark.parametrize("stops", [False, True], ids=["discard", "stops"])
@pytest.mark.parametrize("link", LINK.values)
@pytest.mark.parametrize("config", CONFIGS[1:4], ids=lambda c: f"n{c[0]}-{c[2]}")
def test_bounded_delay_matches_the_reference(config, link, stops):
    n, h, noise, kappa = config
    tm = make_cluster_model(n, h=h, noise=noise, kappa=kappa)
    init_key, run_key = jax.random.split(jax.random.key(5 + n))
    R = max(1, n // 2)
    first, xi, final, ev = jax.tree.map(
        np.asarray, _bounded(tm, init_key, run_key, R, link=link, stops=stops)
    )
    expected = ref.simulate_ringmaster(
        first, xi, np.asarray(tm.h), np.asarray(tm.kappa), 0.5, R=R, stops=stops, link=link
    )
    for j, e in enumerate(expected):
        where = f"{link} stops={stops} exchange {j}"
        assert int(ev.arrival.worker[j]) == e["worker"], where
        assert bool(ev.accepted[j]) == e["accepted"], where
        assert int(ev.arrival.staleness[j]) == e["staleness"], where
        np.testing.assert_allclose(ev.arrival.time[j], e["time"], rtol=1e-6, err_msg=where)
        np.testing.assert_allclose(ev.wasted[j], e["wasted"], rtol=1e-5, atol=1e-6, err_msg=where)
    accepted = ev.accepted.astype(bool)
    # the case exercises the rule: some gradients refused, every applied one under R
    assert 0 < accepted.sum() < NUM and ev.arrival.staleness[accepted].max() < R
    assert int(final.clock.version) == accepted.sum() and int(final.events) == NUM


def test_bounded_delay_above_every_delay_is_the_plain_engine():
    tm = make_cluster_model(6, h="sqrt", noise="exponential", kappa="sqrt")
    init_key, run_key = jax.random.split(jax.random.key(3))
    for link in LINK.values:
        _, _, plain_final, arr = _arrivals(tm, init_key, run_key, link=link)
        for stops in (False, True):
            _, _, final, ev = _bounded(tm, init_key, run_key, NUM + 1, link=link, stops=stops)
            chex.assert_trees_all_equal(ev.arrival, arr)
            chex.assert_trees_all_equal(final.clock, plain_final)
            assert bool(ev.accepted.all()) and float(ev.wasted.sum()) == 0.0


def test_stops_cancel_a_stale_gradient_at_once():
    """h = (1, 10), kappa 0, R = 2: worker 0 arrives at 1 and 2, and at 2 worker 1's delay
    reaches 2: with stops it is cut at t = 2 (20 % computed) and restarts from version 2
    (wasted 0.2), without them it finishes at 10 and is discarded (wasted 1)."""
    tm = make_cluster_model(2, h=[1.0, 10.0])
    state = events.bounded_init(events.async_init(tm, jax.random.key(0), 0.0), 2)
    for stops, (workers, times, wasted) in {
        True: ([0, 0, 1, 0], [1, 2, 2, 3], [0, 0, 0.2, 0]),
        False: ([0, 0, 0, 0], [1, 2, 3, 4], [0] * 4),
    }.items():
        _, ev = events.bounded_events(tm, jax.random.key(1), state, 4, stops=stops)
        np.testing.assert_array_equal(ev.arrival.worker, workers)
        np.testing.assert_allclose(ev.arrival.time, times)
        np.testing.assert_allclose(ev.wasted, wasted, rtol=1e-6)
        np.testing.assert_array_equal(ev.accepted, [True, True, not stops, True])
    _, ev = events.bounded_events(tm, jax.random.key(1), state, 11, stops=False)
    assert int(ev.arrival.worker[10]) == 1 and not bool(ev.accepted[10])  # at 10: discarded
    assert float(ev.wasted[10]) == 1.0 and float(ev.arrival.time[10]) == 10.0


# --- computation power: the engine on random traces against tests/reference_power.py -------

PN, PK, P_DRAWS, P_MIN, P_NUM = 4, 8, 26, 20, 40  # workers, stretches, draws, compared, arrivals
P_CLOSE = 5e-4  # a draw with a discrete choice this close to flipping is not compared
P_MODES = tuple((link, down) for link in LINK.values for down in ("wait", "free"))


def _power_draws(seed: int):
    """Random traces, exchange times (some or all 0) and deterministic compute times h."""
    rng = np.random.default_rng(seed)
    traces = [reference_power.random_trace(rng, PN, PK) for _ in range(P_DRAWS)]
    start = np.stack([t[0] for t in traces])
    speed = np.stack([t[1] for t in traces])
    kappa = np.stack([reference_power.random_kappa(rng, PN) for _ in range(P_DRAWS)])
    h = rng.uniform(0.3, 2.5, (P_DRAWS, PN)).astype(np.float32)
    return h, kappa, start, speed


def _power_model(h, kappa, start, speed, link, down):
    tm = make_cluster_model(PN)  # deterministic noise: every gradient of worker i takes h_i
    return dataclasses.replace(
        tm, h=h, kappa=kappa, power=power.make_trace(start, speed), link=link, down_exchange=down
    )


@jax.jit
def _power_arrivals(h, kappa, start, speed):
    """``{(link, down_exchange): Arrival [draws, P_NUM]}`` from t0 = 0.5."""

    def one(h, kappa, start, speed, link, down):
        tm = _power_model(h, kappa, start, speed, link, down)
        state = events.async_init(tm, jax.random.key(0), 0.5)
        return events.async_arrivals(tm, jax.random.key(1), state, P_NUM)[1]

    return {
        (link, down): jax.vmap(functools.partial(one, link=link, down=down))(h, kappa, start, speed)
        for link, down in P_MODES
    }


def _atol(times) -> float:
    """float32 precision of times as large as ``times``'s largest."""
    return 2e-5 * (1.0 + float(np.max(np.abs(times))))


def test_engine_under_power_matches_the_reference():
    """Both links, exchanges that wait for a down worker or not: arrival by arrival the
    worker, its staleness and gradient index exactly, its arrival, compute end, dispatch
    and link wait to float32 precision."""
    h, kappa, start, speed = _power_draws(2026)
    got = jax.tree.map(np.asarray, _power_arrivals(h, kappa, start, speed))
    fields = ("time", "compute_end", "dispatch_time", "link_wait")
    for (link, down), arr in got.items():
        chex.assert_shape([arr.worker, arr.time, arr.compute_end], (P_DRAWS, P_NUM))
        compared = 0
        for d in range(P_DRAWS):
            cl = reference_power.Cluster(start[d], speed[d], down_exchange=down)
            want = reference_power.simulate_async(
                cl, h[d], np.ones(P_NUM), h[d], kappa[d], 0.5, link
            )
            if cl.margin < P_CLOSE:
                continue
            compared += 1
            where = f"{link}/{down} draw {d}"
            for name in ("worker", "staleness", "grad_index"):
                np.testing.assert_array_equal(
                    getattr(arr, name)[d], [e[name] for e in want], err_msg=where
                )
            chex.assert_trees_all_close(
                {k: getattr(arr, k)[d].astype(np.float64) for k in fields},
                {k: np.array([e[k] for e in want]) for k in fields},
                rtol=1e-5,
                atol=_atol(arr.time[d]),
                custom_message=where,
            )
        assert compared >= P_MIN, (link, down, compared)


@functools.partial(jax.jit, static_argnames=("R",))
def _power_bounded(h, kappa, start, speed, *, R):
    """``{(link, down_exchange, stops): Event [draws, P_NUM]}`` of Ringmaster from t0 = 0.5."""

    def one(h, kappa, start, speed, link, down, stops):
        tm = _power_model(h, kappa, start, speed, link, down)
        state = events.bounded_init(events.async_init(tm, jax.random.key(0), 0.5), R)
        return events.bounded_events(tm, jax.random.key(1), state, P_NUM, stops=stops)[1]

    return {
        (link, down, stops): jax.vmap(functools.partial(one, link=link, down=down, stops=stops))(
            h, kappa, start, speed
        )
        for link, down in P_MODES
        for stops in (False, True)
    }


def test_bounded_delay_under_power_matches_the_reference():
    """Ringmaster (R = 2, with and without stops) on both links: which exchanges are
    updates, their delays, times and the work wasted (a cancelled gradient: the fraction of
    its work done on the work clock)."""
    h, kappa, start, speed = _power_draws(7)
    got = jax.tree.map(np.asarray, _power_bounded(h, kappa, start, speed, R=2))
    for (link, down, stops), ev in got.items():
        compared = 0
        for d in range(P_DRAWS):
            cl = reference_power.Cluster(start[d], speed[d], down_exchange=down)
            want = reference_power.simulate_ringmaster(
                cl, h[d], np.ones(P_NUM), h[d], kappa[d], 0.5, R=2, stops=stops, link=link
            )
            if cl.margin < P_CLOSE:
                continue
            compared += 1
            where = f"{link}/{down} stops={stops} draw {d}"
            np.testing.assert_array_equal(ev.arrival.worker[d], [e["worker"] for e in want], where)
            np.testing.assert_array_equal(ev.accepted[d], [e["accepted"] for e in want], where)
            np.testing.assert_array_equal(
                ev.arrival.staleness[d], [e["staleness"] for e in want], where
            )
            chex.assert_trees_all_close(
                (ev.arrival.time[d].astype(np.float64), ev.wasted[d].astype(np.float64)),
                (np.array([e["time"] for e in want]), np.array([e["wasted"] for e in want])),
                rtol=1e-5,
                atol=_atol(ev.arrival.time[d]),
                custom_message=where,
            )
        assert compared >= P_MIN, (link, down, stops, compared)
        accepted = ev.accepted.astype(bool)
        assert 0 < accepted.sum() < accepted.size  # the rule refuses some gradients
