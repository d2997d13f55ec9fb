"""Tests for jaxnigt.cluster.step_clock: central inference's per-step clock against the plain-Python
event simulation of tests/reference_sim.py (random small clusters, both links) and, under
computation power, of tests/reference_power.py (random traces), and a hand-computed case
where the learner updates while an actor is mid-trajectory."""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_power
import reference_sim as ref

from jaxnigt.cluster import events, model, power, step_clock


def compute_times(tm, key, trajectories: int) -> np.ndarray:
    """``[n, K]`` the compute time of each (worker, trajectory), keyed as the clock keys it
    (``fold_in(fold_in(key, worker), trajectory)``)."""

    def one(w, k):
        k_wk = jax.random.fold_in(jax.random.fold_in(key, w), k)
        return model.sample_worker_compute_time(tm, k_wk, w)

    ks = jnp.arange(trajectories)
    return np.asarray(jax.vmap(lambda w: jax.vmap(lambda k: one(w, k))(ks))(jnp.arange(tm.n)))


@functools.partial(jax.jit, static_argnames=("horizon", "batch", "updates", "history", "link"))
def simulate(tm, message, inference, key, learner_time, *, link, **kw):
    tm = dataclasses.replace(tm, link=link)
    return step_clock.simulate(tm, message, inference, key, learner_time=learner_time, **kw)


# (n, horizon, batch, updates): one compiled program per shape and link; the times are traced
SHAPES = [(1, 3, 1, 4), (2, 1, 2, 5), (3, 4, 2, 6), (4, 2, 5, 3)]


@pytest.mark.parametrize("link", ["shared", "independent"])
@pytest.mark.parametrize("n, horizon, batch, updates", SHAPES)
def test_matches_the_reference_event_simulation(n, horizon, batch, updates, link):
    rng = np.random.default_rng(n * 100 + horizon * 10 + batch)
    for draw in range(3):
        h = rng.uniform(0.5, 3.0, n)
        tm = model.make_cluster_model(n, h=h.tolist(), noise="exponential")
        message = rng.uniform(0.0, 0.4, n).astype(np.float32)
        inference = np.float32(rng.uniform(0.0, 0.1) * (draw > 0))
        learner_time = np.float32(rng.uniform(0.0, 2.0) * (draw != 1))
        key = jax.random.key(draw)
        state, batches, done = simulate(
            tm,
            jnp.asarray(message),
            inference,
            key,
            learner_time,
            horizon=horizon,
            batch=batch,
            updates=updates,
            history=updates + 1,
            link=link,
        )
        chex.assert_shape(batches.versions, (updates, batch, horizon))
        K = 2 + updates * batch  # enough trajectories for any worker
        times = compute_times(tm, key, K)
        want, want_done, totals = ref.simulate_steps(
            times, message, inference, horizon, batch, updates, learner_time, link
        )
        msg = f"draw {draw}"
        np.testing.assert_array_equal(
            np.asarray(batches.worker), [[c["worker"] for c in b] for b in want], msg
        )
        np.testing.assert_array_equal(
            np.asarray(batches.traj), [[c["traj"] for c in b] for b in want], msg
        )
        np.testing.assert_array_equal(
            np.asarray(batches.versions), [[c["versions"] for c in b] for b in want], msg
        )
        np.testing.assert_allclose(
            np.asarray(batches.time), [[c["time"] for c in b] for b in want], rtol=1e-6
        )
        np.testing.assert_allclose(np.asarray(done), want_done, rtol=1e-6)
        assert float(state.messages) == totals["messages"]
        np.testing.assert_allclose(float(state.link_busy), totals["link_busy"], rtol=1e-5)
        np.testing.assert_allclose(float(state.time), totals["time"], rtol=1e-6)


def hand_cluster():
    """Two actors, H = 4, no exchange or inference time, B = 1, learner time 0. Actor 0's
    steps take 1/4 (its trajectories end at 1, 2, 3, ...), actor 1's 0.55 (its first ends at
    2.2): updates complete at 1 and 2, while actor 1 is mid-trajectory."""
    tm = model.make_cluster_model(2, h=[1.0, 2.2])
    return tm, jnp.zeros((2,), jnp.float32)


@pytest.mark.parametrize("link", ["shared", "independent"])
def test_updates_mid_trajectory_give_each_step_its_version(link):
    tm, message = hand_cluster()
    key = jax.random.key(0)
    state, b, done = simulate(
        tm, message, 0.0, key, 0.0, horizon=4, batch=1, updates=4, history=4, link=link
    )
    np.testing.assert_array_equal(np.asarray(b.worker)[:, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(np.asarray(b.traj)[:, 0], [0, 1, 0, 2])
    np.testing.assert_allclose(np.asarray(b.time)[:, 0], [1.0, 2.0, 2.2, 3.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(done), [1.0, 2.0, 2.2, 3.0], rtol=1e-6)
    # actor 1 was served at 0.55 (no update yet), 1.1 and 1.65 (after the update done at 1)
    # and 2.2 (after the one done at 2); actor 0's third trajectory starts after 2.2
    np.testing.assert_array_equal(
        np.asarray(b.versions)[:, 0], [[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 2], [3, 3, 3, 3]]
    )
    # four trajectories of 4 steps, and actor 1's second trajectory's first (at 2.75)
    assert float(state.messages) == 4 * 4 + 1


def test_shared_link_serializes_the_step_exchanges():
    """Two identical actors whose exchanges take as long as their steps' compute: on one
    shared link each step waits for the other's exchange; with independent links they
    overlap."""
    tm = model.make_cluster_model(2, h=[1.0, 1.0])  # H = 2: each step computes 0.5
    message = jnp.full((2,), 0.5, jnp.float32)
    ends, worker_time = {}, {}
    for link in ("shared", "independent"):
        key = jax.random.key(0)
        state, b, _ = simulate(
            tm, message, 0.0, key, 0.0, horizon=2, batch=2, updates=1, history=1, link=link
        )
        ends[link] = np.asarray(b.time)[0]
        chex.assert_trees_all_close(float(state.link_busy), 2.0)
        ahead = events.computing_ahead(tm, state.request, state.time)
        worker_time[link] = float(state.computing - ahead)
    # independent: 0.5 + 0.5, then 0.5 + 0.5 -> both end at 2.0
    np.testing.assert_allclose(ends["independent"], [2.0, 2.0])
    # shared: actor 0 served [0.5, 1.0], actor 1 [1.0, 1.5]; actor 0's second step asks at
    # 1.5 and is served [1.5, 2.0]; actor 1's asks at 2.0: [2.0, 2.5]
    np.testing.assert_allclose(ends["shared"], [2.0, 2.5])
    # the total worker time by the clock's time, computing only: independent, by 2.0 each
    # actor computed [0, 0.5], [1, 1.5] and its next trajectory's first step from 2.0 (its
    # 0.5 still ahead); shared, by 2.5: actor 0 [0, 0.5], [1, 1.5], [2, 2.5] and actor 1
    # [0, 0.5], [1.5, 2] (its next step, begun at 2.5, all ahead)
    np.testing.assert_allclose([worker_time["independent"], worker_time["shared"]], [2.0, 2.5])


def test_served_version_counts_updates_done_by_then():
    done_at = jnp.array([3.0, 2.0, 1.0, -jnp.inf], jnp.float32)  # versions 7, 6, 5 done
    times = (0.5, 1.0, 2.5, 3.0, 9.0)
    got = [int(step_clock.served_version(jnp.float32(t), jnp.int32(7), done_at)) for t in times]
    assert got == [4, 5, 6, 7, 7]


def test_unknown_link_is_refused():
    tm, _ = hand_cluster()
    allowed = r"link: got 'fast'; expected one of \['shared', 'independent'\]"
    with pytest.raises(ValueError, match=allowed):
        dataclasses.replace(tm, link="fast")


# --- computation power: the clock on random traces against tests/reference_power.py --------

PN, PK, P_DRAWS, P_MIN = 3, 8, 28, 20  # actors, stretches, draws, compared
P_H, P_B, P_U = 3, 2, 5  # horizon, batch, updates
P_CLOSE = 5e-4  # a draw with a discrete choice this close to flipping is not compared
P_MODES = tuple((link, down) for link in ("shared", "independent") for down in ("wait", "free"))


@jax.jit
def _power_steps(h, message, start, speed, inference, learner_time):
    """``{(link, down_exchange): (state, batches, done)}`` over the draws."""

    def one(h, message, start, speed, inference, learner_time, link, down):
        tm = dataclasses.replace(
            model.make_cluster_model(PN), h=h, power=power.make_trace(start, speed), link=link,
            down_exchange=down,
        )  # fmt: skip
        return step_clock.simulate(
            tm, message, inference, jax.random.key(0), horizon=P_H, batch=P_B, updates=P_U,
            learner_time=learner_time, history=P_U + 1,
        )  # fmt: skip

    return {
        (link, down): jax.vmap(functools.partial(one, link=link, down=down))(
            h, message, start, speed, inference, learner_time
        )
        for link, down in P_MODES
    }


def test_steps_under_power_match_the_reference():
    """Each step's compute share on the work clock, its exchange waiting while the actor is
    down (or not: free), both links: the batches' actors, trajectories and per-step versions
    exactly, their completion times, the updates' and the totals to float32 precision."""
    rng = np.random.default_rng(31)
    traces = [reference_power.random_trace(rng, PN, PK) for _ in range(P_DRAWS)]
    start = np.stack([t[0] for t in traces])
    speed = np.stack([t[1] for t in traces])
    message = np.stack([0.3 * reference_power.random_kappa(rng, PN) for _ in range(P_DRAWS)])
    message = message.astype(np.float32)
    h = rng.uniform(0.3, 2.5, (P_DRAWS, PN)).astype(np.float32)  # deterministic noise
    inference = (rng.uniform(0, 0.1, P_DRAWS) * (rng.random(P_DRAWS) < 0.7)).astype(np.float32)
    learner = (rng.uniform(0, 1.0, P_DRAWS) * (rng.random(P_DRAWS) < 0.7)).astype(np.float32)
    got = jax.tree.map(np.asarray, _power_steps(h, message, start, speed, inference, learner))
    for (link, down), (state, batches, done) in got.items():
        chex.assert_shape(batches.versions, (P_DRAWS, P_U, P_B, P_H))
        compared = 0
        for d in range(P_DRAWS):
            cl = reference_power.Cluster(start[d], speed[d], down_exchange=down)
            tau = np.repeat(h[d].astype(np.float64)[:, None], 2 + P_U * P_B, axis=1)
            want, want_done, totals = reference_power.simulate_steps(
                cl, tau, message[d], inference[d], P_H, P_B, P_U, learner[d], link
            )
            if cl.margin < P_CLOSE:
                continue
            compared += 1
            where = f"{link}/{down} draw {d}"
            for name in ("worker", "traj", "versions"):
                np.testing.assert_array_equal(
                    getattr(batches, name)[d], [[c[name] for c in b] for b in want], where
                )
            assert float(state.messages[d]) == totals["messages"], where
            atol = 2e-5 * (1.0 + float(np.max(done[d])))
            chex.assert_trees_all_close(
                (batches.time[d], done[d], state.time[d], state.link_busy[d]),
                (
                    np.array([[c["time"] for c in b] for b in want]),
                    np.array(want_done),
                    totals["time"],
                    totals["link_busy"],
                ),
                rtol=1e-5,
                atol=atol,
                custom_message=where,
            )
        assert compared >= P_MIN, (link, down, compared)
