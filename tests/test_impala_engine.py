"""Tests for jaxnigt.algorithms.impala_engine: learner batches, received versions and policy
lag against the arrivals of the reference simulator, with and without learner time."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tasks import match_setup

from jaxnigt import config as config_lib
from jaxnigt.algorithms.impala_engine import HISTORY
from jaxnigt.timing import sample_compute_times, sample_noise
from jaxnigt.trainer import build_trainer

try:  # tests/ as a package or as a rootdir on sys.path (pytest's default import mode)
    from tests import reference_sim as ref
except ImportError:
    import reference_sim as ref


def expected(arrivals, n, B, c, batches, history):
    """Per learner batch: the policy lags of its trajectories and whether an actor needed a
    version older than the ``history`` kept (it then gets the newest); and the versions the
    actors hold at the end.  Update k completes at max(previous, last arrival of batch k) + c;
    an actor receives the newest version completed by its arrival."""
    done, version, lags, lost = [], [0] * n, [], []
    prev = -np.inf
    for k in range(batches):
        batch = arrivals[k * B : (k + 1) * B]
        lags.append([k - version[a["worker"]] for a in batch])
        prev = max(prev, batch[-1]["time"]) + c
        done.append(prev)
        lost.append(False)
        for a in batch:
            got = sum(t <= a["time"] for t in done)
            if got < k + 2 - history:  # older than the kept versions k+1, k, ...
                got, lost[-1] = k + 1, True
            version[a["worker"]] = got
    return lags, version, done, lost


@pytest.mark.parametrize("learner_time", [0.0, 2.0, 7.0])
@pytest.mark.parametrize("noise", ["deterministic", "exponential"])
def test_batches_versions_and_lag_match_the_reference_arrivals(learner_time, noise):
    n, B, steps = 3, 2, 3
    setup = match_setup(
        h=[1.0, 1.5, 2.5], kappa=[1.0, 3.0, 0.5], M=2, async_block=4, link="shared", noise=noise
    )
    hp = config_lib.HParams(
        learning_rate=0.01, M=2, impala_batch=B, impala_learner_time=learner_time
    )
    tr = build_trainer(setup, "impala", hp)
    state = tr.init(jax.random.key(0), tr.hyper())
    ex = state.extra
    first = np.asarray(sample_compute_times(setup.tm, _first_key(state), 1)[:, 0])
    num = steps * setup.async_block
    xi = np.asarray(
        jax.vmap(lambda j: sample_noise(setup.tm, jax.random.fold_in(ex.time_key, j), ()))(
            jnp.arange(num)
        )
    )
    arrivals = ref.simulate_async(
        first, xi, np.asarray(setup.tm.h), np.asarray(setup.tm.kappa), 0.0
    )
    lags, versions, done, lost = expected(arrivals, n, B, learner_time, num // B, HISTORY)
    run = jax.jit(lambda s: tr.run_chunk(s, steps))
    final, m = run(state)
    K = setup.async_block // B
    for s in range(steps):
        mine = np.concatenate(lags[s * K : (s + 1) * K])
        np.testing.assert_allclose(m["staleness_min"][s], mine.min())
        np.testing.assert_allclose(m["staleness_mean"][s], mine.mean(), rtol=1e-6)
        np.testing.assert_allclose(m["staleness_max"][s], mine.max())
        end = max(arrivals[(s + 1) * K * B - 1]["time"], done[(s + 1) * K - 1])
        np.testing.assert_allclose(m["sim_time"][s], end, rtol=1e-6)
        assert bool(m["overflow"][s]) == any(lost[s * K : (s + 1) * K])
    np.testing.assert_array_equal(final.extra.worker_version, versions)
    assert int(final.extra.version) == num // B
    assert not np.any(m["nonfinite"])
    if learner_time == 0.0:
        assert not any(lost)  # an instant learner never falls behind its actors
    np.testing.assert_array_equal(m["grads"], setup.async_block)


def _first_key(state):
    # impala_engine._init: k_init, k_time, k_roll, k_first = split(key, 4) with key = init key
    return jax.random.split(jax.random.key(0), 4)[3]


def test_learner_time_longer_than_the_history_is_reported():
    """An actor that needs a version older than the kept history raises the overflow flag."""
    setup = match_setup(h=[1.0, 1.0], kappa=[0.1, 0.1], M=2, async_block=8, link="independent")
    hp = config_lib.HParams(learning_rate=0.01, M=2, impala_batch=1, impala_learner_time=50.0)
    tr = build_trainer(setup, "impala", hp)
    _, m = jax.jit(tr.step)(tr.init(jax.random.key(0), tr.hyper()))
    assert bool(m.overflow)
