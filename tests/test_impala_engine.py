"""Tests for jaxnigt.algorithms.engines.impala_engine: learner batches, received versions and policy
lag against the arrivals of the reference simulator, with and without learner time."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_sim as ref
from tasks import match_setup

from jaxnigt import config as config_lib
from jaxnigt.algorithms.engines.impala_engine import HISTORY
from jaxnigt.cluster.model import sample_compute_times, sample_noise
from jaxnigt.run.trainer import build_trainer


def expected(arrivals, n, B, c, batches, history):
    """Walks the arrivals in order.  Per learner batch: the policy lags of its trajectories and
    whether an actor needed a version older than the ``history`` kept (it then gets the newest
    one kept); and the versions the actors hold at the end.  Update k completes at
    max(previous, last arrival of batch k) + c; an actor arriving at t receives the newest
    version completed by t and rolls its next trajectory out with it, also when that next
    trajectory belongs to the same batch."""
    done, version, lags, lost = [], [0] * n, [], []
    prev = -np.inf
    for k in range(batches):
        batch = arrivals[k * B : (k + 1) * B]
        prev = max(prev, batch[-1]["time"]) + c
        done.append(prev)  # after every arrival of the batch: no one receives it early
        lags.append([])
        lost.append(False)
        for i, a in enumerate(batch):
            lags[-1].append(k - version[a["worker"]])
            again = any(b["worker"] == a["worker"] for b in batch[i + 1 :])
            newest = k if again else k + 1  # kept: before / after this batch's update
            got = sum(t <= a["time"] for t in done)
            if got < newest + 1 - history:
                got, lost[-1] = newest, True
            version[a["worker"]] = got
    return lags, version, done, lost


CLUSTERS = {  # h, kappa, learner batch B, async_block
    "three": ([1.0, 1.5, 2.5], [1.0, 3.0, 0.5], 2, 4),
    # a slow actor: the fast ones arrive several times per batch of four (times chosen so
    # that no arrival ties with an update's completion, as in the other cluster)
    "repeats": ([1.0, 1.07, 0.93, 10.0], [0.23, 0.31, 0.17, 0.29], 4, 8),
}


# Each case is its own compiled program (the learner time and the cluster's times are
# constants of it): every learner time meets both clusters, every cluster both noises and
# every learner time, in 6 cases rather than all 12 combinations.
CASES = [
    (0.0, "deterministic", "three"),
    (0.0, "exponential", "repeats"),
    (2.0, "exponential", "three"),
    (2.0, "deterministic", "repeats"),
    (7.0, "deterministic", "three"),
    (7.0, "exponential", "repeats"),
]


@pytest.mark.parametrize("learner_time, noise, cluster", CASES)
def test_batches_versions_and_lag_match_the_reference_arrivals(learner_time, noise, cluster):
    h, kappa, B, block = CLUSTERS[cluster]
    n, steps = len(h), 3
    setup = match_setup(h=h, kappa=kappa, M=2, link="shared", noise=noise)
    hp = config_lib.HParams(
        learning_rate=0.01, M=2, async_block=block, impala_batch=B, impala_learner_time=learner_time
    )
    tr = build_trainer(setup, "impala", hp)
    state = tr.init(jax.random.key(0), tr.hyper())
    ex = state.extra
    first = np.asarray(sample_compute_times(setup.cluster, _first_key(state), 1)[:, 0])
    num = steps * block
    xi = np.asarray(
        jax.vmap(lambda j: sample_noise(setup.cluster, jax.random.fold_in(ex.time_key, j), ()))(
            jnp.arange(num)
        )
    )
    arrivals = ref.simulate_async(
        first, xi, np.asarray(setup.cluster.h), np.asarray(setup.cluster.kappa), 0.0
    )
    lags, versions, done, lost = expected(arrivals, n, B, learner_time, num // B, HISTORY)
    if cluster == "repeats":  # the case this cluster is for does occur
        assert any(len({a["worker"] for a in arrivals[i : i + B]}) < B for i in range(0, num, B))
    run = jax.jit(lambda s: tr.run_chunk(s, steps))
    final, m = run(state)
    K = block // B
    for s in range(steps):
        mine = np.concatenate(lags[s * K : (s + 1) * K])
        np.testing.assert_allclose(m["staleness_min"][s], mine.min())
        np.testing.assert_allclose(m["staleness_mean"][s], mine.mean(), rtol=1e-6)
        np.testing.assert_allclose(m["staleness_max"][s], mine.max())
        end = max(arrivals[(s + 1) * K * B - 1]["time"], done[(s + 1) * K - 1])
        np.testing.assert_allclose(m["sim_time"][s], end, rtol=1e-6)
        assert bool(m["overflow"][s]) == any(lost[s * K : (s + 1) * K])
        block_arrivals = arrivals[s * K * B : (s + 1) * K * B]
        start = arrivals[s * K * B - 1]["time"] if s else 0.0
        served = sum(float(setup.cluster.kappa[a["worker"]]) for a in block_arrivals)
        util = served / (block_arrivals[-1]["time"] - start)  # the shared link: at most 1
        np.testing.assert_allclose(m["link_util"][s], util, rtol=1e-5)
        assert m["link_util"][s] <= 1.0 + 1e-6
    np.testing.assert_array_equal(final.extra.worker_version, versions)
    assert int(final.extra.version) == num // B
    assert not np.any(m["nonfinite"])
    if learner_time == 0.0:
        assert not any(lost)  # an instant learner never falls behind its actors
    np.testing.assert_array_equal(m["grads"], block)


def _first_key(state):
    # impala_engine._init: k_init, k_time, k_roll, k_first = split(key, 4) with key = init key
    return jax.random.split(jax.random.key(0), 4)[3]


def test_learner_time_longer_than_the_history_is_reported():
    """An actor that needs a version older than the kept history raises the overflow flag."""
    setup = match_setup(h=[1.0, 1.0], kappa=[0.1, 0.1], M=2, link="independent")
    hp = config_lib.HParams(
        learning_rate=0.01, M=2, async_block=8, impala_batch=1, impala_learner_time=50.0
    )
    tr = build_trainer(setup, "impala", hp)
    _, m = jax.jit(tr.step)(tr.init(jax.random.key(0), tr.hyper()))
    assert bool(m.overflow)


def _arrivals(workers, times):
    from jaxnigt.cluster import events

    z = jnp.zeros(len(workers))
    return events.Arrival(
        worker=jnp.asarray(workers, jnp.int32),
        time=jnp.asarray(times, jnp.float32),
        dispatch_version=z,
        staleness=z,
        compute_time=z,
        grad_index=z,
        dispatch_time=z,
        compute_end=z,
        link_wait=z,
    )


def test_repeated_actor_rolls_out_what_it_received_and_is_handed_its_last():
    """One learner batch by hand.  Learner version 10; the history keeps versions 10, 9, 8, 7
    (params = the version number) completed at times 5, 4, 3, 2; actors hold sentinel params
    100, 101, 102 (versions 6, 7, 8).  Arrivals: actor 0 at 1.5, actor 1 at 3.5, actor 0 at
    4.5 and 6.0, actor 2 at 6.5."""
    from jaxnigt.algorithms.engines import impala_engine

    assert HISTORY == 4
    ex = impala_engine.ImpalaExtra(
        event_state=None,
        worker_params=jnp.array([100.0, 101.0, 102.0]),
        worker_version=jnp.array([6, 7, 8], jnp.int32),
        history=jnp.array([10.0, 9.0, 8.0, 7.0]),
        version=jnp.int32(10),
        done_at=jnp.array([5.0, 4.0, 3.0, 2.0]),
        time_key=None,
        roll_key=None,
    )
    arr = _arrivals([0, 1, 0, 0, 2], [1.5, 3.5, 4.5, 6.0, 6.5])
    params, lag, lost = impala_engine._behaviour(ex, arr)
    # first arrivals roll out what the actor held; actor 0's second one what it received at
    # 1.5 (no version finished by then: older than the history keeps, so lost); its third
    # what it received at 4.5 (version 9, finished at 4)
    np.testing.assert_array_equal(np.asarray(lost), [False, False, True, False, False])
    keep = ~np.asarray(lost)
    np.testing.assert_array_equal(np.asarray(params)[keep], [100.0, 101.0, 9.0, 102.0])
    np.testing.assert_array_equal(np.asarray(lag)[keep], [4.0, 3.0, 1.0, 2.0])
    # after this batch's update (version 11 at time 8) each actor gets the newest version
    # finished at its last arrival: actor 0 at 6.0 -> 10, actor 1 at 3.5 -> 8, actor 2 -> 10
    ex = ex._replace(
        history=jnp.array([11.0, 10.0, 9.0, 8.0]),
        version=jnp.int32(11),
        done_at=jnp.array([8.0, 5.0, 4.0, 3.0]),
    )
    new, lost = impala_engine._hand_out(ex, arr, 3)
    np.testing.assert_array_equal(np.asarray(new.worker_params), [10.0, 8.0, 10.0])
    np.testing.assert_array_equal(np.asarray(new.worker_version), [10, 8, 10])
    assert not np.asarray(lost).any()
    # a last arrival before anything the history keeps is lost; a repeat is not handed out
    _, lost = impala_engine._hand_out(ex, _arrivals([1, 1, 2], [9.0, 2.5, 9.5]), 3)
    np.testing.assert_array_equal(np.asarray(lost), [False, True, False])
