"""Tests for jaxnigt.cluster.padding: a run in a program padded to more workers (and, for
Rennala and m-sync, more slots) is the unpadded run.

The unpadded rules are checked against independent references in tests/test_schedules.py;
here each padded rule is held to its unpadded self: the same draws, the same gradients chosen
(workers, ranks, counts), the same round ends and readiness, exactly; sums over workers
(wasted time and trajectories) to float32 rounding, since a reduction's order may change
with its length.  At the engine level, a padded trainer's parameters and clock equal the
unpadded trainer's, and its training return (a mean over a longer slot axis) agrees to
float32 rounding."""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt import config as config_lib
from jaxnigt.algorithms import sizes
from jaxnigt.cluster import padding, power_sources, rules, schedules, timing
from jaxnigt.cluster.model import ALLREDUCE, INFLIGHT, make_cluster_model
from jaxnigt.cluster.rounds import RoundSize
from jaxnigt.run.trainer import make_trainer

N_MAX, ROUNDS = 13, 5
MODES = [(i, a) for i in INFLIGHT.values for a in ALLREDUCE.values]
NOISES = ("exponential", "straggler:0.1:10")


@pytest.mark.parametrize("kind", timing.NOISES)
def test_a_draw_is_its_flat_draw_so_a_trailing_axis_can_be_padded(kind):
    nk = timing.NOISE_KINDS[kind]
    params = jnp.asarray(timing.padded_params([0.3, 4.0][: len(nk.params)]))
    key = jax.random.key(5)
    draw = lambda k, shape: nk.draw(params, k, shape)
    chex.assert_trees_all_equal(draw(key, (35,)).reshape(7, 5), draw(key, (7, 5)))
    # A run with 4 columns inside a [9, 6] program draws the [7, 4] run's values.
    padded = padding.flat_draws(draw, key, (9, 6), jnp.int32(4))
    chex.assert_shape(padded, (9, 6))
    chex.assert_trees_all_equal(padded[:7, :4], draw(key, (7, 4)))


def _rounds(rule, model, **sizes):
    schedule = functools.partial(rule, **sizes)
    return _run(schedule, model)


def _padded(name, model, run, **bounds):
    """Rounds of the registered rule ``name`` with static ``bounds`` and a padded run's own
    ``run`` sizes (what a padded program gives a rule)."""
    size = RoundSize(**bounds, run={k: jnp.asarray(v) for k, v in run.items()})
    return _run(lambda m, k, t, b: rules.get_rule(name).round(m, k, t, b, size), model)


def _run(schedule, model):
    run = jax.jit(lambda m, k: schedules.run_rounds(schedule, m, k, ROUNDS))
    return run(model, jax.random.key(11))


def _assert_same_run(unpadded, padded, n: int, slots: int):
    """The padded rounds are the unpadded rounds (the first ``slots`` slots valid)."""
    valid = np.asarray(padded.slot_valid)
    np.testing.assert_array_equal(valid[:, :slots], True)
    np.testing.assert_array_equal(valid[:, slots:], False)
    for field in ("slot_worker", "slot_rank"):
        np.testing.assert_array_equal(getattr(padded, field)[:, :slots], getattr(unpadded, field))
    for field in ("counts", "busy_until"):
        np.testing.assert_array_equal(getattr(padded, field)[:, :n], getattr(unpadded, field))
        np.testing.assert_array_equal(getattr(padded, field)[:, n:] * 0, 0)  # finite
    np.testing.assert_array_equal(padded.counts[:, n:], 0)
    for field in ("t_start", "t_collect_end", "t_end", "comm_time", "num_slots"):
        np.testing.assert_array_equal(getattr(padded, field), getattr(unpadded, field))
    for field in ("time_wasted", "traj_wasted", "time_used"):
        chex.assert_trees_all_close(
            getattr(padded, field), getattr(unpadded, field), rtol=1e-6, atol=1e-6
        )


def _model(n, noise, inflight="cancel", allreduce="all"):
    return make_cluster_model(
        n, h="sqrt", noise=noise, kappa="sqrt", inflight=inflight, allreduce=allreduce
    )


@pytest.mark.parametrize(("inflight", "allreduce"), MODES)
@pytest.mark.parametrize(("n", "M"), [(3, 5), (10, 4)])
def test_a_padded_rennala_round_is_the_unpadded_round(n, M, inflight, allreduce):
    for noise in NOISES:
        model = _model(n, noise, inflight, allreduce)
        unpadded = _rounds(schedules.rennala, model, M=M)
        padded = padding.pad(model, N_MAX)
        _assert_same_run(unpadded, _rounds(schedules.rennala, padded, M=M), n, M)
        _assert_same_run(unpadded, _padded("rennala", padded, {"M": M}, M=9), n, M)
        _assert_same_run(unpadded, _padded("rennala", model, {"M": M}, M=11), n, M)


@pytest.mark.parametrize(("inflight", "allreduce"), MODES)
@pytest.mark.parametrize("n", [1, 10])
def test_padded_synchronous_and_m_synchronous_rounds_are_the_unpadded_rounds(
    n, inflight, allreduce
):
    for noise in NOISES:
        model = _model(n, noise, inflight, allreduce)
        padded = padding.pad(model, N_MAX)
        sync = functools.partial(_rounds, schedules.sync, per_worker=2)
        _assert_same_run(sync(model), sync(padded), n, 2 * n)
        m = max(1, (n + 1) // 2)
        unpadded = _rounds(schedules.msync, model, m=m)
        bound = min(N_MAX, m + 3)
        _assert_same_run(unpadded, _padded("msync", padded, {"m": m}, M=1, m=bound), n, m)


@pytest.mark.parametrize("inflight", INFLIGHT.values)
@pytest.mark.parametrize(("n", "M", "capacity"), [(3, 6, 12), (6, 4, 10)])
def test_a_padded_malenia_round_is_the_unpadded_round(n, M, capacity, inflight):
    """n padded to 13 and the capacity to 20: the run's own capacity and threshold, its
    draws; the rule counts its own workers only."""
    for noise in NOISES:
        model = _model(n, noise, inflight)
        unpadded = _rounds(schedules.malenia, model, M=M, capacity=capacity)
        run = {"capacity": capacity, "threshold": schedules.malenia_threshold(n, M)}
        padded = _padded("malenia", padding.pad(model, N_MAX), run, M=M, capacity=20)
        valid = np.asarray(unpadded.slot_valid)
        np.testing.assert_array_equal(padded.overflow, unpadded.overflow)
        np.testing.assert_array_equal(np.asarray(padded.slot_valid).sum(1), valid.sum(1))
        for r in range(ROUNDS):  # the valid slots, in completion order
            k = int(valid[r].sum())
            for field in ("slot_worker", "slot_rank"):
                got, want = getattr(padded, field)[r, :k], getattr(unpadded, field)[r, :k]
                np.testing.assert_array_equal(got, want, err_msg=field)
        np.testing.assert_array_equal(padded.counts[:, :n], unpadded.counts)
        for field in ("t_end", "busy_until"):
            np.testing.assert_array_equal(
                getattr(padded, field)[..., : n if field == "busy_until" else None],
                getattr(unpadded, field),
            )
        chex.assert_trees_all_close(padded.time_wasted, unpadded.time_wasted, rtol=1e-6)


def test_padding_refuses_what_it_cannot_pad():
    model = _model(4, "exponential")
    with pytest.raises(padding.PaddingError, match="cannot pad 4 workers to 3"):
        padding.pad(model, 3)
    with pytest.raises(padding.PaddingError, match="already padded"):
        padding.pad(padding.pad(model, 6), 8)
    traced = dataclasses.replace(model, power=power_sources.build("periodic:10:0.5", 4, 100.0))
    with pytest.raises(padding.PaddingError, match="computation-power trace"):
        padding.pad(traced, 8)
    with pytest.raises(padding.PaddingError, match="records of 4 and 6 rows"):
        padding.stack([model, _model(6, "exponential")])
    other = dataclasses.replace(padding.pad(model, 6), inflight="discard")
    with pytest.raises(padding.PaddingError, match="named choice"):
        padding.stack([padding.pad(model, 6), other])


def test_stacked_records_vmap_to_each_run():
    small, large = _model(3, "exponential"), _model(8, "exponential")
    stacked = padding.stack([padding.pad(small, 8), padding.pad(large, 8)])
    chex.assert_shape(stacked.h, (2, 8))
    run = jax.vmap(
        lambda m: schedules.run_rounds(
            functools.partial(schedules.sync, per_worker=1), m, jax.random.key(2), 3
        )
    )
    both = run(stacked)
    first = jax.tree.map(lambda x: x[0], both)
    np.testing.assert_array_equal(first.t_end, _rounds_keyed(small, 2).t_end)
    np.testing.assert_array_equal(both.counts[0, :, 3:], 0)


def _rounds_keyed(model, seed):
    schedule = functools.partial(schedules.sync, per_worker=1)
    return schedules.run_rounds(schedule, model, jax.random.key(seed), 3)


def _config(algorithm: str, n: int, M: int, **extra):
    raw = {
        "name": "padding",
        "algorithms": [algorithm],
        "env": {"name": "point_mass"},
        "cluster": {"n": n, "h": "sqrt", "kappa": "sqrt", "noise": "straggler:0.1:10"},
        "hparams": {"M": M, "M_init": M, "learning_rate": 0.03, "eta": 0.1, **extra},
    }
    return config_lib.from_dict(raw)


@pytest.mark.parametrize(
    ("algorithm", "n", "M", "n_max", "M_max", "sizes_"),
    [
        ("rennala_nigt", 4, 5, 9, 8, {"M": 5, "M_init": 5}),
        ("rennala_nigt", 12, 6, 20, 9, {"M": 6, "M_init": 6}),
        ("sync_nigt", 4, 5, 9, 5, {}),
        ("msync_nigt", 6, 5, 11, 5, {"msync_m": 3}),
        ("malenia_nigt", 3, 4, 7, 6, {"M": 4, "M_init": 4, "malenia_capacity": 24}),
        ("a2c", 4, 5, 9, 5, {}),
        ("afedpg", 4, 5, 9, 5, {"async_block": 4}),
        ("ringmaster_pg", 5, 5, 8, 5, {"async_block": 5}),
    ],
)
def test_a_padded_trainer_trains_as_the_unpadded_trainer(algorithm, n, M, n_max, M_max, sizes_):
    """Every rule (Rennala, Malenia, sync, m-sync) and engine (rounds, actor-critic rounds,
    arrivals, arrivals a rule may refuse) whose traits say it pads."""
    extra = {"msync_m": 3} if algorithm == "msync_nigt" else {}
    # Plain SGD diverges at the NIGT step size (rounding would then grow without bound): the
    # demo's 2^-14 for Ringmaster.
    extra |= {"ringmaster_R": 2, "learning_rate": 2.0**-14} if algorithm == "ringmaster_pg" else {}
    plain = make_trainer(_config(algorithm, n, M, **extra), algorithm)
    bound = make_trainer(_config(algorithm, n_max, M_max, **extra), algorithm)
    padded = bound.bind(padding.pad(plain.setup.cluster, n_max))
    if "malenia_capacity" in sizes_:
        sizes_ |= sizes.malenia_thresholds(n, sizes_["M"], sizes_["M_init"])

    def run(tr, hyper):
        state = tr.init(jax.random.key(3), hyper)
        return tr.run_chunk(state, 6)

    a_state, a_metrics = jax.jit(lambda: run(plain, plain.hyper()))()
    b_state, b_metrics = jax.jit(lambda: run(padded, padded.hyper(**sizes_)))()
    # The same gradients at the same points: the parameters agree to float32 rounding (bit
    # for bit on the CPUs we tried), the clock exactly.
    chex.assert_trees_all_close(b_state.params, a_state.params, rtol=1e-5, atol=1e-6)
    for field in ("sim_time", "round_time", "grads", "env_steps", "counts_min", "counts_max"):
        np.testing.assert_array_equal(b_metrics[field], a_metrics[field], err_msg=field)
    for field in ("staleness_mean", "link_util"):
        np.testing.assert_array_equal(b_metrics[field], a_metrics[field], err_msg=field)
    np.testing.assert_array_equal(b_metrics["worker_counts"][:, :n], a_metrics["worker_counts"])
    np.testing.assert_array_equal(b_metrics["worker_counts"][:, n:], 0)
    chex.assert_trees_all_close(b_metrics["counts_mean"], a_metrics["counts_mean"], rtol=1e-6)
    chex.assert_trees_all_close(b_metrics["train_return"], a_metrics["train_return"], rtol=1e-5)
    chex.assert_trees_all_close(
        b_metrics["env_steps_wasted"], a_metrics["env_steps_wasted"], rtol=1e-5, atol=1e-3
    )
