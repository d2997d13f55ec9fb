"""Tests for jaxnigt.cluster.schedules against hand-computed cases and independent references:
tests/reference_sim.py (round by round), tests/reference_natural.py (Tyurin's event form) and,
under computation power, tests/reference_power.py (float64 events on random traces)."""

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

from jaxnigt.cluster import events, power, schedules, simulation
from jaxnigt.cluster.model import ALLREDUCE, INFLIGHT, make_cluster_model, sample_compute_times

ROUNDS, SEEDS = 3, 4


RULES = ("rennala", "malenia", "sync", "msync")
MODES = [(inflight, allreduce) for inflight in INFLIGHT.values for allreduce in ALLREDUCE.values]


def _on(tm, **choices):
    """The cluster model ``tm`` with other named choices (a record's static fields)."""
    return dataclasses.replace(tm, **choices)


def _from_times(rule, tm, tau, t0, busy, *, M, capacity, per_worker, m=1, **modes):
    tm = _on(tm, **modes)
    if rule == "msync":
        return schedules.msync_from_times(tm, tau, t0, busy, m=m)
    if rule == "rennala":
        return schedules.rennala_from_times(tm, tau, t0, busy, M=M)
    if rule == "malenia":
        return schedules.malenia_from_times(tm, tau, t0, busy, M=M, capacity=capacity)
    return schedules.sync_from_times(tm, tau, t0, busy, per_worker=per_worker)


@functools.partial(jax.jit, static_argnames=("M", "capacity", "per_worker", "m"))
def _run_all_rules(tm, keys, *, M, capacity, per_worker, m=1):
    """Every (rule, inflight, allreduce) over [seeds, rounds] from one shared tau matrix per
    round.  The ``*_from_times`` functions accept more columns than they need, so one draw of
    ``capacity + 1`` columns serves every rule (and one compile serves the whole config).
    """
    sizes = {"M": M, "capacity": capacity, "per_worker": per_worker, "m": m}
    combos = [(rule, *mode) for rule in RULES for mode in MODES]

    def one_seed(key):
        def step(carry, r):
            tau = sample_compute_times(tm, jax.random.fold_in(key, r), capacity + 1)
            new_carry, out = {}, {}
            for rule, inflight, allreduce in combos:
                t0, busy = carry[rule, inflight, allreduce]
                s = _from_times(
                    rule, tm, tau, t0, busy, inflight=inflight, allreduce=allreduce, **sizes
                )
                new_carry[rule, inflight, allreduce] = (s.t_end, s.busy_until)
                out[rule, inflight, allreduce] = s
            return new_carry, (tau, out)

        zero = (jnp.float32(0.0), jnp.zeros((tm.n,), jnp.float32))
        init = {combo: zero for combo in combos}
        return jax.lax.scan(step, init, jnp.arange(ROUNDS))[1]

    return jax.vmap(one_seed)(keys)


CONFIGS = [  # (n, M, h, noise, kappa)
    (1, 4, "equal", "exponential", 0.0),
    (2, 5, [1.0, 10.0], "straggler:0.2:5", 0.5),
    (3, 7, "equal", "deterministic", "sqrt"),  # every completion ties across workers
    (10, 20, "sqrt", "lognormal:0.5", "sqrt"),
    (100, 30, "decreasing", "uniform:0.5:1.5", "linear"),
    (12, 4, "equal", "straggler:0.5:2", "sqrt"),  # n > M, ties across workers and rounds
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"n{c[0]}-{c[3]}")
def test_matches_reference_simulator(config):
    n, M, h, noise, kappa = config
    tm = make_cluster_model(n, h=h, noise=noise, kappa=kappa)
    capacity = schedules.default_malenia_capacity(M, n)
    per_worker = schedules.sync_batch(M, n)
    m = schedules.default_msync_m(n)
    keys = jax.random.split(jax.random.key(100 + n + M), SEEDS)
    taus, results = _run_all_rules(tm, keys, M=M, capacity=capacity, per_worker=per_worker, m=m)
    taus, results = jax.tree.map(np.asarray, (taus, results))
    kappa = np.asarray(tm.kappa)
    for (rule, inflight, allreduce), sched in results.items():
        for seed in range(SEEDS):
            expected = ref.simulate_rounds(
                rule,
                [taus[seed, r] for r in range(ROUNDS)],
                kappa,
                M=M,
                capacity=capacity,
                per_worker=per_worker,
                m=m,
                inflight=inflight,
                allreduce=allreduce,
            )
            for r, e in enumerate(expected):
                got = jax.tree.map(lambda x, seed=seed, r=r: x[seed, r], sched)
                where = f"{rule}/{inflight}/{allreduce} n={n} M={M} {noise} seed={seed} r={r}"
                np.testing.assert_array_equal(got.counts, e["counts"], err_msg=where)
                k = int(got.num_slots)
                assert k == len(e["slots"]), where
                assert not got.slot_valid[k:].any() and got.slot_valid[:k].all(), where
                slots = list(
                    zip(got.slot_worker[:k].tolist(), got.slot_rank[:k].tolist(), strict=True)
                )
                assert slots == e["slots"], where
                assert bool(got.overflow) == e["overflow"], where
                names = ("t_collect_end", "t_end", "comm_time", "time_wasted", "traj_wasted")
                for name in (*names, "time_used"):
                    np.testing.assert_allclose(
                        getattr(got, name), e[name], rtol=1e-5, atol=1e-4, err_msg=where + name
                    )
                np.testing.assert_allclose(
                    got.busy_until, e["busy_until"], rtol=1e-6, atol=1e-5, err_msg=where
                )


_rennala = jax.jit(schedules.rennala, static_argnames=("M",))
_malenia = jax.jit(schedules.malenia, static_argnames=("M", "capacity"))
_sync = jax.jit(schedules.sync, static_argnames=("per_worker",))


def test_rennala_hand_computed_cancel_and_discard():
    tm = make_cluster_model(3, h="linear", kappa=0.5)
    key, busy = jax.random.key(0), jnp.zeros(3)
    s = _rennala(tm, key, 0.0, busy, M=5)
    # completions: w0 at 1, 2, 3; w1 at 2; w2 at 3 -> T = 3; w1 is halfway through its 2nd.
    np.testing.assert_array_equal(s.counts, [3, 1, 1])
    np.testing.assert_array_equal(s.slot_worker, [0, 0, 1, 0, 2])
    np.testing.assert_array_equal(s.slot_rank, [0, 1, 0, 2, 0])
    assert float(s.t_collect_end) == 3.0 and float(s.t_end) == 3.5
    assert float(s.time_wasted) == 1.0 and float(s.traj_wasted) == 0.5
    np.testing.assert_array_equal(s.busy_until, [3.5, 3.5, 3.5])
    # worker time: each computes on [0, 3] (w1's cancelled half included) = used 8 + wasted 1
    assert float(s.worker_time) == 9.0 and float(s.time_used) == 8.0
    np.testing.assert_array_equal(s.compute_end, [3.0, 3.0, 3.0])
    d = _rennala(_on(tm, inflight="discard"), key, 0.0, busy, M=5)
    # w0 and w2 complete exactly at T = 3: nothing of theirs is in flight, they are free at
    # once (and take the new point at 3.5); only w1's 2nd gradient (2 -> 4) is discarded.
    np.testing.assert_array_equal(d.busy_until, [3.5, 4.0, 3.5])
    assert float(d.time_wasted) == 2.0 and float(d.traj_wasted) == 1.0
    # w1 computes its discarded gradient to 4 (past the round's end 3.5): 3 + 4 + 3
    assert float(d.worker_time) == 10.0
    np.testing.assert_array_equal(d.compute_end, [3.0, 4.0, 3.0])
    # next round from 3.5: w0 at 4.5, 5.5, 6.5, ...; w1 (free at 4) at 6, 8; w2 at 6.5:
    # T = 6.5, the tie at 6.5 going to w0 first, then w2 (both used); w1 is in flight to 8.
    d2 = _rennala(_on(tm, inflight="discard"), key, d.t_end, d.busy_until, M=5)
    assert float(d2.t_collect_end) == 6.5
    np.testing.assert_array_equal(d2.counts, [3, 1, 1])
    np.testing.assert_array_equal(d2.busy_until, [7.0, 8.0, 7.0])
    assert float(d2.time_wasted) == 2.0
    # w0 on [3.5, 6.5], w1 on [4, 8] (6 used, 6 -> 8 discarded), w2 on [3.5, 6.5]
    assert float(d2.worker_time) == 10.0
    np.testing.assert_array_equal(d2.compute_end, [6.5, 8.0, 6.5])
    # a worker still busy past T (9.5 > 6.5) never starts: no waste, busy_until unchanged.
    d3 = _rennala(_on(tm, inflight="discard"), key, d.t_end, jnp.array([3.5, 4.0, 9.5]), M=5)
    np.testing.assert_array_equal(d3.counts, [4, 1, 0])  # w0: 4.5 .. 7.5, w1: 6
    assert float(d3.t_collect_end) == 7.5
    np.testing.assert_array_equal(d3.busy_until, [8.0, 8.0, 9.5])
    assert float(d3.time_wasted) == 2.0 and int(d3.comms) == 1
    # w0 on [3.5, 7.5], w1 on [4, 8]; w2 computes nothing this round: its end is t0
    assert float(d3.worker_time) == 8.0
    np.testing.assert_array_equal(d3.compute_end, [7.5, 8.0, 3.5])


def test_worker_time_under_a_trace_is_the_time_up_while_computing():
    """n = 2, h = (1, 4), kappa = 0, M = 2; worker 1 (0-based) at speed 1 on [0, 0.5), down
    on [0.5, 1), at 0.5 from 1.  Worker 0 completes at 1 and 2: T = 2.  Worker 1 has done
    0.5 + 0.5 = 1 of its 4 by T, in 1.5 of time up: its worker time is its wall time up
    (a reduced speed counts, the outage does not), not its work."""
    trace = power.make_trace(
        np.array([[0.0, 0.0, 0.0], [0.0, 0.5, 1.0]], np.float32),
        np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.5]], np.float32),
    )
    tm = dataclasses.replace(make_cluster_model(2, h=[1.0, 4.0], kappa=0.0), power=trace)
    key, busy = jax.random.key(0), jnp.zeros(2)
    c = _rennala(tm, key, 0.0, busy, M=2)
    np.testing.assert_array_equal(c.counts, [2, 0])
    assert float(c.t_end) == 2.0 and float(c.time_used) == 2.0
    np.testing.assert_allclose([c.time_wasted, c.worker_time], [1.0, 2.0 + 1.5], rtol=1e-6)
    np.testing.assert_allclose(c.compute_end, [2.0, 2.0])
    # discarded: worker 1's last 3 of work at speed 0.5 end at 8, 7.5 of time up from 0
    d = _rennala(_on(tm, inflight="discard"), key, 0.0, busy, M=2)
    np.testing.assert_allclose(d.compute_end, [2.0, 8.0], rtol=1e-6)
    np.testing.assert_allclose(d.worker_time, 2.0 + 7.5, rtol=1e-6)
    # of which 6 are still ahead at the round's end: 3.5 spent by then, as cancelled
    ahead = events.computing_ahead(tm, d.compute_end, d.t_end)
    np.testing.assert_allclose([ahead, d.worker_time - ahead], [6.0, 3.5], rtol=1e-6)


def test_rennala_unused_tie_at_T_is_wasted_but_free():
    tm = make_cluster_model(3, h="linear", kappa=0.5)
    key, busy = jax.random.key(0), jnp.zeros(3)
    # M = 4: (1, w0), (2, w0), (2, w1), (3, w0) -> T = 3; w2 also completes at 3, unused.
    d = _rennala(_on(tm, inflight="discard"), key, 0.0, busy, M=4)
    np.testing.assert_array_equal(d.counts, [3, 1, 0])
    # w2's gradient (3 units) and w1's 2nd (2 -> 4, 2 units) are thrown away; w2 is free at T.
    assert float(d.time_wasted) == 5.0 and float(d.traj_wasted) == 2.0
    np.testing.assert_array_equal(d.busy_until, [3.5, 4.0, 3.5])
    c = _rennala(tm, key, 0.0, busy, M=4)
    assert float(c.time_wasted) == 1.0 + 3.0 and float(c.traj_wasted) == 1.5


def test_discard_round_end_issue_example():
    """n = 2, h = (0.3, 11), M = 3: worker 0 delivers the 3rd gradient exactly when the
    collection ends and takes the new point at once: rounds of 0.9, 25 rounds end at 22.5."""
    tm = make_cluster_model(2, h=[0.3, 11.0])
    res = simulation.simulate_rule_rounds(
        _on(tm, inflight="discard"), jax.random.key(0), rule="rennala", M=3, rounds=25
    )
    np.testing.assert_allclose(np.diff(np.asarray(res["t_end"]), prepend=0.0), 0.9, rtol=1e-5)
    np.testing.assert_allclose(res["t_end"][-1], 22.5, rtol=1e-6)
    np.testing.assert_array_equal(res["counts"], [[3, 0]] * 25)


def test_allreduce_contributors_hand_computed():
    tm = make_cluster_model(3, h="linear", kappa=[0.5, 1.0, 4.0])
    key, busy = jax.random.key(0), jnp.zeros(3)
    # M = 2: (1, w0), (2, w0) -> T = 2 (w1's completion at 2 loses the tie): P = {w0}.
    s = _rennala(_on(tm, allreduce="contributors"), key, 0.0, busy, M=2)
    np.testing.assert_array_equal(s.counts, [2, 0, 0])
    assert float(s.comm_time) == 0.5 and float(s.t_end) == 2.5
    # w1 gets the point at 2 + max(0.5, 1.0), w2 at 2 + 4.
    np.testing.assert_array_equal(s.busy_until, [2.5, 3.0, 6.0])
    # next round from 2.5: w0 at 3.5, 4.5 -> T = 4.5; w1 starts at 3, w2 at 6.
    s2 = _rennala(_on(tm, allreduce="contributors"), key, s.t_end, s.busy_until, M=2)
    assert float(s2.t_collect_end) == 4.5 and float(s2.t_end) == 5.0
    assert float(s2.time_wasted) == 1.5  # w1 from 3 to 4.5; w2 never started
    # with "all" the AllReduce waits for the slowest link: rounds of 2 + 4.
    a = _rennala(_on(tm, allreduce="all"), key, 0.0, busy, M=2)
    assert float(a.comm_time) == 4.0 and float(a.t_end) == 6.0
    np.testing.assert_array_equal(a.busy_until, [6.0, 6.0, 6.0])
    # every worker contributes to a sync round: the two modes agree.
    b = schedules.sync_batch(2, 3)
    for mode in ALLREDUCE.values:
        y = _sync(_on(tm, allreduce=mode), key, 0.0, busy, per_worker=b)
        assert float(y.t_end) == 3.0 + 4.0


@jax.jit
def _rennala_deterministic(tm):
    busy = jnp.zeros(tm.n)
    return [
        schedules.rennala(tm, jax.random.key(1), 0.0, busy, M=m).t_collect_end
        for m in (1, 3, 8, 25)
    ]


def test_rennala_deterministic_mth_smallest_and_theory_bound():
    h = np.array([0.7, 1.0, 1.3, 2.0, 3.5])
    for M, T in zip(
        (1, 3, 8, 25), _rennala_deterministic(make_cluster_model(h.size, h=h)), strict=True
    ):
        grid = np.sort((np.arange(1, M + 1)[None, :] * h[:, None]).ravel())
        np.testing.assert_allclose(T, grid[M - 1], rtol=1e-6)
        m = np.arange(1, h.size + 1)
        bound = np.min((M + m) / np.cumsum(1.0 / np.sort(h)))
        assert float(T) <= bound * (1 + 1e-6)


def _b_at(times, t):
    return (times <= t).sum(axis=1)


def _rule(b, n, M):
    return b.min() >= 1 and np.sum(1.0 / np.maximum(b, 1)) <= n * n / M * (
        1 + schedules.MALENIA_RTOL
    )


def test_malenia_rule_holds_at_T_and_not_before():
    n, M, cap = 4, 12, 40
    rng = np.random.default_rng(0)
    h = np.array([1.0, 2.0, 3.0, 4.0])[:, None]
    taus = [
        np.broadcast_to(h, (n, cap + 1)),
        h * rng.exponential(size=(n, cap + 1)),
        h * rng.lognormal(-0.5, 1.0, size=(n, cap + 1)),
        h * rng.integers(1, 4, size=(n, cap + 1)),  # many exact ties
        h * rng.exponential(size=(n, cap + 1)),
    ]
    taus = np.stack(taus).astype(np.float32)
    free = make_cluster_model(n)  # kappa = 0
    fn = jax.jit(
        jax.vmap(
            lambda t: schedules.malenia_from_times(free, t, 0.0, jnp.zeros(n), M=M, capacity=cap)
        )
    )
    scheds = jax.tree.map(np.asarray, fn(taus))
    for j, tau in enumerate(taus):
        s = jax.tree.map(lambda x, j=j: x[j], scheds)
        times = np.cumsum(tau[:, :cap].astype(np.float64), axis=1)
        T = float(s.t_collect_end)
        b = _b_at(times, T * (1 + 1e-6))
        np.testing.assert_array_equal(s.counts, b)
        assert _rule(b, n, M) and not bool(s.overflow)
        earlier = times[times < T * (1 - 1e-6)]
        if earlier.size:
            assert not _rule(_b_at(times, earlier.max()), n, M)
        w = s.slot_worker[: int(s.num_slots)]
        np.testing.assert_array_equal(np.bincount(w, minlength=n), s.counts)


def test_malenia_overflow():
    tm = make_cluster_model(2, h=[1.0, 10.0])
    busy = jnp.zeros(2)
    # 1/b_0 + 1/b_1 <= 4/50 first holds at T = 140 with b = (140, 14): capacity 140 suffices
    ok = _malenia(tm, jax.random.key(0), 0.0, busy, M=50, capacity=140)
    assert not bool(ok.overflow)
    np.testing.assert_array_equal(ok.counts, [140, 14])
    assert float(ok.t_collect_end) == 140.0
    # ... one fewer cannot reach it (the rule never holds within capacity).
    assert bool(_malenia(tm, jax.random.key(0), 0.0, busy, M=50, capacity=139).overflow)
    assert schedules.default_malenia_capacity(50, 2) >= 140


def test_sync_deterministic():
    tm = make_cluster_model(4, h="linear", kappa=[0.1, 0.2, 0.3, 0.4])
    s = _sync(
        tm,
        jax.random.key(0),
        2.0,
        jnp.zeros(4),
        per_worker=schedules.sync_batch(10, 4, schedules.MATCH_M),
    )
    np.testing.assert_array_equal(s.counts, [3, 3, 3, 3])
    np.testing.assert_allclose(s.t_collect_end, 2.0 + 12.0)
    np.testing.assert_allclose(s.t_end, 14.4)
    assert float(s.time_wasted) == 0.0 and int(s.num_slots) == 12 and bool(s.slot_valid.all())
    # the paper's Sync NIGT: one per worker; match_M: Rennala's M spread over the workers
    assert schedules.sync_batch(10, 4) == 1 and schedules.sync_batch(10, 4, 5) == 5
    assert (
        schedules.sync_batch(10, 4, schedules.MATCH_M) == 3
        and schedules.sync_batch(3, 10, schedules.MATCH_M) == 1
    )
    for bad in (0, "half"):
        with pytest.raises(ValueError, match="match_M"):
            schedules.sync_batch(10, 4, bad)


N, M_, CAP, B = 6, 9, 12, 2


def _all(tm, key, t0, busy):
    return (
        schedules.rennala(tm, key, t0, busy, M=M_),
        schedules.malenia(tm, key, t0, busy, M=M_, capacity=CAP),
        schedules.sync(tm, key, t0, busy, per_worker=B),
    )


_all_jit = jax.jit(_all)


def _check_shapes(s, size):
    chex.assert_shape([s.slot_worker, s.slot_rank, s.slot_valid], (size,))
    chex.assert_shape([s.counts, s.busy_until], (N,))
    chex.assert_type([s.slot_worker, s.slot_rank, s.num_slots, s.counts, s.comms], jnp.int32)
    chex.assert_type([s.t_start, s.t_end, s.time_wasted, s.busy_until], jnp.float32)
    chex.assert_rank([s.num_slots, s.t_end, s.overflow, s.traj_wasted], 0)
    assert s.slot_valid.dtype == jnp.bool_ and s.overflow.dtype == jnp.bool_
    assert int(s.num_slots) == int(s.counts.sum())
    assert float(s.t_end) >= float(s.t_collect_end) > 1.0


class RennalaVariantsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_shapes_dtypes(self):
        tm = make_cluster_model(N, h="sqrt", noise="exponential", kappa="sqrt")
        fn = self.variant(lambda tm, k, t0, b: schedules.rennala(tm, k, t0, b, M=M_))
        _check_shapes(fn(tm, jax.random.key(0), jnp.float32(1.0), jnp.zeros(N)), M_)


def test_all_rules_shapes_vmap_over_keys_and_from_times():
    tm = make_cluster_model(N, h="sqrt", noise="lognormal:0.7", kappa="sqrt")
    keys = jax.random.split(jax.random.key(7), 3)
    busy = jnp.zeros(N)
    batched = jax.jit(jax.vmap(lambda k: _all(tm, k, 1.0, busy)))(keys)
    for i, k in enumerate(keys):
        single = _all_jit(tm, k, 1.0, busy)
        for s, size in zip(single, (M_, N * CAP, N * B), strict=True):
            _check_shapes(s, size)
        chex.assert_trees_all_close(jax.tree.map(lambda x, i=i: x[i], batched), single)
    chex.assert_trees_all_close(
        _rennala_from_lazy_draws(tm, keys[0], 1.0, busy, M_, "cancel"),
        _all_jit(tm, keys[0], 1.0, busy)[0],
    )


def _rennala_from_lazy_draws(tm, key, t0, busy, M, inflight, filler=None):
    """``rennala_from_times`` on a full ``[n, M + 1]`` matrix assembled from the lazy draws
    of ``rennala(tm, key, ...)``: column 0 and the candidate rows as drawn, every other entry
    from ``filler`` (default: zeros, the entries most likely to steal a slot)."""
    first, rows, tau_rows = schedules.sample_rennala_times(
        tm, key, schedules.start_offsets(t0, busy), M=M
    )
    full = jnp.zeros((tm.n, M + 1)) if filler is None else filler
    full = full.at[:, 0].set(first).at[rows].set(tau_rows)
    return schedules.rennala_from_times(_on(tm, inflight=inflight), full, t0, busy, M=M)


@pytest.mark.parametrize(
    "n,M,h,noise",
    [
        (5, 8, "sqrt", "exponential"),  # n < M: every worker is a candidate
        (8, 8, "equal", "deterministic"),
        (50, 6, "sqrt", "exponential"),
        (40, 5, "equal", "straggler:0.5:2"),  # n > M with ties among first completions
        (30, 4, "decreasing", "lognormal:1.0"),
    ],
)
@pytest.mark.parametrize("inflight", INFLIGHT.values)
def test_rennala_draws_only_what_the_round_can_use(n, M, h, noise, inflight):
    """``rennala`` draws every worker's first compute time and M more only for the min(n, M)
    workers with the earliest first completion; any values in the rest of the matrix (zeros,
    or random) give the same round through the full-matrix ``rennala_from_times``."""
    tm = make_cluster_model(n, h=h, noise=noise, kappa="sqrt")
    key = jax.random.key(n * 7 + M)
    busy = jax.random.uniform(jax.random.key(1), (n,), maxval=3.0)  # staggered starts
    t0 = 1.0
    got = schedules.rennala(_on(tm, inflight=inflight), key, t0, busy, M=M)
    first, rows, tau_rows = schedules.sample_rennala_times(
        tm, key, schedules.start_offsets(t0, busy), M=M
    )
    chex.assert_shape(first, (n,))
    chex.assert_shape(rows, (min(n, M),))
    chex.assert_shape(tau_rows, (min(n, M), M + 1))
    assert np.all(np.diff(np.asarray(rows)) > 0)
    filler = jax.random.exponential(jax.random.key(2), (n, M + 1)) * 5.0
    for fill in (None, filler):
        chex.assert_trees_all_close(
            got, _rennala_from_lazy_draws(tm, key, t0, busy, M, inflight, fill), rtol=0, atol=0
        )
    assert set(np.asarray(got.slot_worker).tolist()) <= set(np.asarray(rows).tolist())


def test_bad_static_arguments():
    tm = make_cluster_model(2)
    with pytest.raises(ValueError, match="M"):
        schedules.rennala(tm, jax.random.key(0), 0.0, jnp.zeros(2), M=0)
    with pytest.raises(ValueError, match="capacity"):
        schedules.malenia(tm, jax.random.key(0), 0.0, jnp.zeros(2), M=2, capacity=0)
    # a model's choices are checked when it is built: a round never sees a bad one
    with pytest.raises(ValueError, match="inflight"):
        _on(tm, inflight="keep")
    with pytest.raises(ValueError, match="allreduce"):
        make_cluster_model(2, allreduce="some")


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="checks the CPU lowering")
def test_rennala_top_k_is_not_lowered_to_a_full_sort():
    tm = make_cluster_model(64, noise="exponential")
    fn = jax.jit(lambda k: schedules.rennala(tm, k, 0.0, jnp.zeros(64), M=8).t_collect_end)
    hlo = fn.lower(jax.random.key(0)).compile().as_text()
    # Two TopK custom calls (first completions, then candidates); the only sort is the one
    # of the M = 8 candidate ids, never one over the n or n * M completion times.
    assert hlo.count('custom_call_target="TopK"') == 2
    sorts = [line for line in hlo.splitlines() if " sort(" in line]
    assert sorts and all(" = s32[8]{0} sort(" in line for line in sorts), sorts


def test_rennala_lazy_draws_have_the_full_draws_distribution():
    """The round time T of the lazy draws matches T from all n * (M + 1) times drawn at once
    (two-sample comparison of means and quantiles over 4,000 rounds each)."""
    n, M, reps = 50, 5, 4000
    tm = make_cluster_model(n, h="sqrt", noise="exponential")
    busy = jnp.zeros(n)

    @jax.jit
    def both(keys):
        lazy = jax.vmap(lambda k: schedules.rennala(tm, k, 0.0, busy, M=M).t_collect_end)(keys)
        full = jax.vmap(
            lambda k: (
                schedules.rennala_from_times(
                    tm, sample_compute_times(tm, k, M + 1), 0.0, busy, M=M
                ).t_collect_end
            )
        )(keys)
        return lazy, full

    lazy, full = map(np.asarray, both(jax.random.split(jax.random.key(5), reps)))
    se = np.sqrt(lazy.var() / reps + full.var() / reps)
    assert abs(lazy.mean() - full.mean()) < 4 * se, (lazy.mean(), full.mean(), se)
    np.testing.assert_allclose(
        np.quantile(lazy, [0.1, 0.5, 0.9]), np.quantile(full, [0.1, 0.5, 0.9]), rtol=0.08
    )


# ---------------------------------------------------------------------------------------
# Discard mode against the natural event-driven simulator (Tyurin's form, kappa = 0).

NATURAL_SHAPES = [("rennala", 5, 7), ("rennala", 3, 2), ("malenia", 4, 9), ("malenia", 6, 10)]


def _natural_configs():
    """24 random tie-free configurations (rule, n, M, h, noise, seed) over a few shapes, so
    that configurations of one shape and noise kind share one compiled clock."""
    rng = np.random.default_rng(2026)
    out = []
    for rule, n, M in NATURAL_SHAPES:
        for c in range(6):
            noise = (
                "exponential",
                f"lognormal:{rng.uniform(0.3, 1.2):.3f}",
                f"uniform:{rng.uniform(0.1, 0.9):.3f}:{rng.uniform(1.1, 1.9):.3f}",
            )[c % 3]
            h = np.round(rng.uniform(0.4, 3.0, size=n), 6).tolist()
            out.append((rule, n, M, h, noise, len(out)))
    return out


def _tau_of_rennala(tm, key, res, M):
    """``(version, worker, k) -> tau`` from the clock's own lazy draws (undrawn: an error)."""
    busy_before = np.vstack([np.zeros((1, tm.n)), np.asarray(res["busy_until"])[:-1]])

    @functools.cache
    def draws(v):
        off = schedules.start_offsets(res["t_start"][v], jnp.asarray(busy_before[v], jnp.float32))
        first, rows, tau_rows = schedules.sample_rennala_times(
            tm, jax.random.fold_in(key, v), off, M=M
        )
        return np.asarray(first), np.asarray(rows).tolist(), np.asarray(tau_rows)

    def tau_of(v, w, k):
        first, rows, tau_rows = draws(v)
        if k == 0:
            return float(first[w])
        assert w in rows, f"round {v}: worker {w} needs an undrawn compute time"
        return float(tau_rows[rows.index(w), k])

    return tau_of


@pytest.mark.parametrize("config", _natural_configs(), ids=lambda c: f"{c[0]}-n{c[1]}-{c[5]}")
def test_discard_matches_natural_simulator(config):
    rule, n, M, h, noise, seed = config
    rounds = 8
    tm = make_cluster_model(n, h=h, noise=noise, inflight="discard")
    key = jax.random.key(seed)
    cap = schedules.default_malenia_capacity(M, n)
    # one round more than compared: the simulator begins gradients of the next point too
    res = simulation.simulate_rule_rounds(tm, key, rule=rule, M=M, rounds=rounds + 1, capacity=cap)
    res = jax.tree.map(np.asarray, res)
    assert not res["overflow"].any()
    if rule == "rennala":
        tau_of = _tau_of_rennala(tm, key, res, M)
    else:
        taus = [
            np.asarray(sample_compute_times(tm, jax.random.fold_in(key, v), cap + 1))
            for v in range(rounds + 1)
        ]
        tau_of = lambda v, w, k: float(taus[v][w, k])
    expected = natural.discard_rounds(rule, n, rounds, tau_of, M=M)
    for v, e in enumerate(expected):
        np.testing.assert_allclose(res["t_end"][v], e["t_end"], rtol=2e-5, err_msg=f"round {v}")
        np.testing.assert_array_equal(res["counts"][v], e["counts"], err_msg=f"round {v}")


# ---------------------------------------------------------------------------------------
# Computation power: every rule on random traces against tests/reference_power.py, a float64
# event simulation written from docs/cluster_model.md ("Computation power").

PN, PK, P_ROUNDS, P_DRAWS, P_MIN = 5, 8, 4, 26, 20  # workers, stretches, rounds, draws, compared
P_CAP = 40  # Malenia's capacity; every rule reads the columns it needs of one tau matrix
# A draw is compared only if no discrete choice of its run is within this of flipping
# (reference_power's margin): float32 rounding must not decide it.
P_CLOSE = 5e-4
MODES_ALL = tuple(
    (inflight, allreduce, down)
    for inflight in INFLIGHT.values
    for allreduce in ALLREDUCE.values
    for down in ("wait", "free")
)
MODES_SOME = (  # each choice both ways, where it makes no difference (Malenia, sync) or less
    ("cancel", "all", "wait"),
    ("discard", "contributors", "wait"),
    ("cancel", "contributors", "free"),
    ("discard", "all", "free"),
)
# (rule, its sizes, the (inflight, allreduce, down_exchange) modes compared)
POWER_CASES = {
    "rennala": ("rennala", {"M": 4}, MODES_ALL),  # M < n: the candidate workers
    "rennala_M_above_n": ("rennala", {"M": 7}, MODES_SOME),
    "malenia": ("malenia", {"M": 12, "capacity": P_CAP}, MODES_SOME),
    "sync": ("sync", {"per_worker": 1}, MODES_SOME),
    "sync_match_M": ("sync", {"per_worker": schedules.sync_batch(12, PN, "match_M")}, MODES_SOME),
    "msync": ("msync", {"m": 2}, MODES_ALL),
}
ROUND_FIELDS = (
    "t_collect_end", "t_end", "comm_time", "busy_until", "time_wasted", "traj_wasted", "time_used"
)  # fmt: skip


def _power_draws(rng: np.random.Generator, draws: int = P_DRAWS):
    """Random traces (zero-speed stretches, fractional speeds), exchange times (some or all
    0) and compute times of every round, float32."""
    traces = [reference_power.random_trace(rng, PN, PK) for _ in range(draws)]
    start = np.stack([t[0] for t in traces])
    speed = np.stack([t[1] for t in traces])
    kappa = np.stack([reference_power.random_kappa(rng, PN) for _ in range(draws)])
    taus = rng.uniform(0.2, 2.0, (draws, P_ROUNDS, PN, P_CAP + 1)).astype(np.float32)
    return start, speed, kappa, taus


@functools.partial(jax.jit, static_argnames=("rule", "sizes", "modes"))
def _power_rounds(start, speed, kappa, taus, *, rule, sizes, modes):
    """Every mode of one rule over the draws (one program per rule): ``{mode: RoundSchedule
    [draws, rounds, ...]}``, each run ``P_ROUNDS`` rounds from 0 on ``*_from_times``."""
    base = make_cluster_model(PN)
    sizes = {"M": 1, "capacity": 1, "per_worker": 1, **dict(sizes)}

    def one(start, speed, kappa, taus):
        trace = power.make_trace(start, speed)
        out = {}
        for inflight, allreduce, down in modes:
            tm = _on(base, kappa=kappa, power=trace, down_exchange=down)

            def step(carry, tau, inflight=inflight, allreduce=allreduce, tm=tm):
                s = _from_times(
                    rule, tm, tau, *carry, inflight=inflight, allreduce=allreduce, **sizes
                )
                return (s.t_end, s.busy_until), s

            init = (jnp.float32(0.0), jnp.zeros((PN,), jnp.float32))
            out[inflight, allreduce, down] = jax.lax.scan(step, init, taus)[1]
        return out

    return jax.vmap(one)(start, speed, kappa, taus)


def _assert_rounds(got, want, where):
    """Round by round: counts and overflow exactly, the times and work to float32 precision
    (``atol`` scaled to the run's largest time)."""
    scale = max(max(abs(e["t_end"]), abs(e["t_collect_end"])) for e in want)
    atol = 2e-5 * (1.0 + scale) if np.isfinite(scale) else 1e-4
    for r, e in enumerate(want):
        g = jax.tree.map(lambda x, r=r: np.asarray(x[r], np.float64), got)
        np.testing.assert_array_equal(g.counts, e["counts"], err_msg=f"{where} round {r}")
        assert bool(g.overflow) == e["overflow"], f"{where} round {r}"
        chex.assert_trees_all_close(
            {k: getattr(g, k) for k in ROUND_FIELDS},
            {k: np.asarray(e[k], np.float64) for k in ROUND_FIELDS},
            rtol=1e-5,
            atol=atol,
            custom_message=f"{where} round {r}",
        )


@pytest.mark.parametrize("case", POWER_CASES)
def test_rules_under_power_match_the_reference(case):
    """Every rule, both in-flight and both AllReduce modes, exchanges that wait for a down
    worker or not, on random traces: round by round, the float64 reference's counts, times,
    busy_until and waste."""
    rule, sizes, modes = POWER_CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    start, speed, kappa, taus = _power_draws(rng)
    got = _power_rounds(start, speed, kappa, taus, rule=rule, sizes=tuple(sizes.items()),
                        modes=modes)  # fmt: skip
    for (inflight, allreduce, down), sched in got.items():
        chex.assert_shape([sched.counts, sched.busy_until], (P_DRAWS, P_ROUNDS, PN))
        compared = 0
        for d in range(P_DRAWS):
            cl = reference_power.Cluster(start[d], speed[d], down_exchange=down)
            want = reference_power.simulate_rounds(
                cl, rule, taus[d].astype(np.float64), kappa[d].astype(np.float64),
                inflight=inflight, allreduce=allreduce, **sizes,
            )  # fmt: skip
            if cl.margin < P_CLOSE:
                continue
            compared += 1
            where = f"{case} {inflight}/{allreduce}/{down} draw {d}"
            _assert_rounds(jax.tree.map(lambda x, d=d: x[d], sched), want, where)
        assert compared >= P_MIN, (case, inflight, allreduce, down, compared)


@functools.partial(jax.jit, static_argnames=("allreduce",))
def _drawn_rounds(h, kappa, start, speed, *, allreduce):
    """The drawing rules (Rennala's lazy draws included) through ``run_rounds`` on
    deterministic compute times ``h``."""
    rules = {
        "rennala": functools.partial(schedules.rennala, M=4),
        "malenia": functools.partial(schedules.malenia, M=12, capacity=P_CAP),
        "sync": functools.partial(schedules.sync, per_worker=2),
        "msync": functools.partial(schedules.msync, m=3),
    }

    def one(h, kappa, start, speed):
        tm = _on(make_cluster_model(PN), h=h, kappa=kappa, power=power.make_trace(start, speed))
        tm = _on(tm, allreduce=allreduce)
        return {
            r: schedules.run_rounds(f, tm, jax.random.key(0), P_ROUNDS) for r, f in rules.items()
        }

    return jax.vmap(one)(h, kappa, start, speed)


@pytest.mark.parametrize("allreduce", ALLREDUCE.values)
def test_drawn_rounds_under_power_match_the_reference(allreduce):
    """``run_rounds`` of every rule with deterministic noise and random ``h`` per draw."""
    rng = np.random.default_rng(7 if allreduce == "all" else 8)
    start, speed, kappa, _ = _power_draws(rng)
    h = rng.uniform(0.2, 2.0, (P_DRAWS, PN)).astype(np.float32)
    got = _drawn_rounds(h, kappa, start, speed, allreduce=allreduce)
    sizes = {"rennala": {"M": 4}, "malenia": {"M": 12, "capacity": P_CAP},
             "sync": {"per_worker": 2}, "msync": {"m": 3}}  # fmt: skip
    for rule, sched in got.items():
        compared = 0
        for d in range(P_DRAWS):
            cl = reference_power.Cluster(start[d], speed[d])
            taus = np.broadcast_to(
                h[d].astype(np.float64)[None, :, None], (P_ROUNDS, PN, P_CAP + 1)
            )
            want = reference_power.simulate_rounds(
                cl, rule, taus, kappa[d].astype(np.float64), allreduce=allreduce, **sizes[rule]
            )
            if cl.margin < P_CLOSE:
                continue
            compared += 1
            _assert_rounds(jax.tree.map(lambda x, d=d: x[d], sched), want, f"{rule} draw {d}")
        assert compared >= P_MIN, (rule, compared)
