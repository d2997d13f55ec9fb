"""Tests for jaxnigt.cluster.power: the work and up clocks against closed forms on hand traces,
constant power c scaling every time by 1/c (the clocks, every round rule, the per-arrival
engine and the per-step clock), a worker down for good, the docs' worked example
(docs/cluster_model.md, "Computation power"), in-flight work read on the work clock (a
gradient untouched by a round's end is not in flight: the reproducer, and the registry's rules
under long outages against the reference), the drawn and periodic sources and every error of
a trace file or spec.  The rules and engines under random traces are checked against the
plain-Python reference (tests/reference_power.py) in test_schedules.py, test_events.py and
test_step_clock.py."""

from __future__ import annotations

import dataclasses
import functools
import math
import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_power as ref

from jaxnigt.cluster import (
    events,
    power,
    power_sources,
    schedules,
    simulation,
    step_clock,
    timeline,
)
from jaxnigt.cluster.model import make_cluster_model, realize

F32 = {"rtol": 1e-5, "atol": 1e-6}  # float32 tolerance of the comparisons below


def _trace(start, speed):
    return power.make_trace(np.asarray(start, np.float32), np.asarray(speed, np.float32))


def _write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


# --------------------------------------------------------------------- the clocks on hand traces

# Worker 0: speed 1 on [0, 1), down on [1, 3), 0.5 on [3, 5), 2 from 5 on: W(1) = W(3) = 1,
# W(5) = 2, W(t) = 2 + 2 (t - 5) after.  Worker 1: up on [0, 2), down for ever from 2 (its row
# padded with its last stretch, as a file or periodic trace pads it).
HAND = ([[0, 1, 3, 5], [0, 2, 2, 2]], [[1, 0, 0.5, 2], [1, 0, 0, 0]])


def test_finish_maps_work_through_the_work_clock():
    tr = _trace(*HAND)
    s = jnp.array([[0.0, 0.5, 2.0, 0.0, 0.0, 2.0, 4.0], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    tau = jnp.array([[0.5, 1.0, 0.5, 1.0, 3.0, 0.0, 1.5], [2.0, 1.0, 2.5, 0.0, 0.0, 0.0, 0.0]])
    got = power.finish(tr, s, tau)
    want = [
        # 0.5 at speed 1; from 0.5 W must reach 1.5: 0.5 by 1, down until 3, 0.5 at speed 0.5;
        # begun while down: the same; work that runs out as the worker goes down ends then
        # (the first time W reaches it); 1 by 1, 1 by 5, 1 at speed 2; no work: at once, even
        # while down; from 4 (W = 1.5): 0.5 by 5, 1 at speed 2
        [0.5, 4.0, 4.0, 1.0, 5.5, 2.0, 5.5],
        [math.inf, 1.0, math.inf, 0.0, 0.0, 0.0, 0.0],  # down for ever from 2: never
    ]
    chex.assert_trees_all_close(got, jnp.array(want, jnp.float32), **F32)
    chex.assert_trees_all_close(
        power.work_at(tr, jnp.array([[4.0, 6.0, 2.0], [1.0, 9.0, 2.0]])),
        jnp.array([[1.5, 4.0, 1.0], [1.0, 2.0, 2.0]]),
        **F32,
    )
    # one worker's row alone gives the same
    chex.assert_trees_all_close(power.finish(tr.take(0), s[0], tau[0]), got[0], **F32)
    # from t = inf (a worker that never starts): never, also for one down for good (not nan)
    inf = jnp.full((2,), jnp.inf)
    np.testing.assert_array_equal(power.finish(tr, inf, jnp.ones(2)), [np.inf, np.inf])
    np.testing.assert_array_equal(power.exchange_end(tr, inf, jnp.ones(2)), [np.inf, np.inf])
    np.testing.assert_array_equal(power.work_at(tr, inf), [np.inf, 2.0])


def test_exchanges_need_up_time_and_length_zero_is_instantaneous():
    tr = _trace(*HAND)
    got = power.exchange_end(
        tr, jnp.array([[0.5, 2.0, 2.0, 4.0], [1.5, 0.0, 3.0, 1.0]]),
        jnp.array([[1.0, 0.0, 0.25, 1.0], [1.0, 0.5, 0.0, 1.0]]),
    )  # fmt: skip
    # the up clock of worker 0 stops on [1, 3) only: its speed (0.5, 2) does not matter;
    # worker 1's exchange from 1 fits exactly before it goes down at 2, from 1.5 never ends
    want = [[3.5, 2.0, 3.25, 5.0], [math.inf, 0.5, 3.0, 2.0]]
    chex.assert_trees_all_close(got, jnp.array(want, jnp.float32), **F32)
    chex.assert_trees_all_close(
        power.next_up(tr, jnp.array([2.0, 0.5])), jnp.array([3.0, 0.5]), **F32
    )
    chex.assert_trees_all_close(
        power.next_up(tr, jnp.array([0.5, 2.5])), jnp.array([0.5, math.inf]), **F32
    )


@pytest.mark.parametrize(
    ("members", "s", "kappa", "want"),
    [
        ([1, 1, 0], 0.5, 1.0, 4.5),  # 0.5 before A goes down at 1, the rest once both are up at 4
        ([0, 1, 0], 0.5, 1.0, 1.5),  # B alone: up until 2
        ([0, 1, 0], 0.5, 1.6, 4.1),  # B alone: paused on [2, 4)
        ([1, 1, 0], 2.5, 0.25, 4.25),  # begun while both are down: starts when both are up
        ([1, 1, 0], 0.0, 1.0, 1.0),  # fits exactly before A goes down
        ([1, 1, 0], 0.5, 0.0, 0.5),  # length 0: at once
        ([0, 0, 0], 0.5, 2.0, 0.5),  # no member: at once
        ([1, 1, 1], 0.0, 1.0, math.inf),  # C is down for ever from 0.5
    ],
)
def test_joint_exchange_needs_every_member_up(members, s, kappa, want):
    # A down on [1, 3), B down on [2, 4), C down for ever from 0.5
    tr = _trace([[0, 1, 3], [0, 2, 4], [0, 0.5, 0.5]], [[1, 0, 1], [1, 0, 1], [1, 0, 0]])
    got = power.joint_exchange_end(tr, jnp.array(members, bool), s, kappa)
    chex.assert_trees_all_close(got, jnp.float32(want), **F32)
    cl = ref.Cluster([[0, 1, 3], [0, 2, 4], [0, 0.5, 0.5]], [[1, 0, 1], [1, 0, 1], [1, 0, 0]])
    assert cl.allreduce([i for i in range(3) if members[i]], s, kappa) == pytest.approx(want)


def test_make_trace_precomputes_the_clocks_at_every_start():
    tr = _trace(*HAND)
    chex.assert_shape([tr.start, tr.speed, tr.work, tr.up], (2, 4))
    assert tr.stretches == 4
    chex.assert_trees_all_close(tr.work, jnp.array([[0, 1, 1, 2], [0, 2, 2, 2]], jnp.float32))
    chex.assert_trees_all_close(tr.up, jnp.array([[0, 1, 1, 3], [0, 2, 2, 2]], jnp.float32))
    one = tr.take(jnp.int32(1))
    chex.assert_shape(one.start, (4,))
    chex.assert_trees_all_close(one.work, tr.work[1])


# --------------------------------------------------------------------- constant power c


def _constant(n: int, c: float) -> power.PowerTrace:
    return _trace(np.zeros((n, 1)), np.full((n, 1), c))


@pytest.mark.parametrize("c", [2.0, 0.5])
def test_constant_power_divides_compute_times_and_leaves_exchanges(c):
    rng = np.random.default_rng(int(c * 10))
    s = jnp.asarray(rng.uniform(0, 20, (3, 50)), jnp.float32)
    tau = jnp.asarray(rng.uniform(0, 5, (3, 50)), jnp.float32)
    tr = _constant(3, c)
    chex.assert_trees_all_close(power.finish(tr, s, tau), s + tau / c, **F32)
    chex.assert_trees_all_close(power.work_at(tr, s), c * s, **F32)
    chex.assert_trees_all_close(power.exchange_end(tr, s, tau), s + tau, **F32)  # up clock
    chex.assert_trees_all_close(
        power.joint_exchange_end(tr, jnp.ones(3, bool), s[0, 0], tau[0, 0]), s[0, 0] + tau[0, 0]
    )


N_SCALE, M_SCALE, ROUNDS_SCALE = 4, 6, 5
_SCALE_RULES = {
    "rennala": functools.partial(schedules.rennala, M=M_SCALE),
    "malenia": functools.partial(schedules.malenia, M=M_SCALE, capacity=40),
    "sync": functools.partial(schedules.sync, per_worker=2),
    "msync": functools.partial(schedules.msync, m=2),
}


@functools.partial(jax.jit, static_argnames=("inflight",))
def _rounds_every_rule(tm, key, *, inflight):
    tm = dataclasses.replace(tm, inflight=inflight)
    return {r: schedules.run_rounds(f, tm, key, ROUNDS_SCALE) for r, f in _SCALE_RULES.items()}


@pytest.mark.parametrize("inflight", ["cancel", "discard"])
@pytest.mark.parametrize("c", [2.0, 0.5])
def test_constant_power_scales_every_round_by_one_over_c(c, inflight):
    """v = c, kappa = 0: the rounds of every rule are the constant model's at 1/c of the
    times, with the same counts; work (used or wasted) is the same."""
    tm = make_cluster_model(N_SCALE, h="sqrt", noise="exponential")
    key = jax.random.key(3)
    const = _rounds_every_rule(tm, key, inflight=inflight)
    fast = _rounds_every_rule(dataclasses.replace(tm, power=_constant(N_SCALE, c)), key,
                              inflight=inflight)  # fmt: skip
    for rule in _SCALE_RULES:
        a, b = const[rule], fast[rule]
        np.testing.assert_array_equal(b.counts, a.counts, rule)
        times = ("t_start", "t_collect_end", "t_end", "busy_until")
        chex.assert_trees_all_close(
            [getattr(b, k) for k in times], [getattr(a, k) / c for k in times], **F32
        )
        work = ("time_wasted", "traj_wasted", "time_used")
        chex.assert_trees_all_close(
            [getattr(b, k) for k in work], [getattr(a, k) for k in work], rtol=1e-5, atol=1e-5
        )


@functools.partial(jax.jit, static_argnames=("link",))
def _arrivals(tm, *, link):
    tm = dataclasses.replace(tm, link=link)
    return events.arrival_blocks(tm, jax.random.key(5), 4, 10)


@jax.jit
def _steps(tm):
    return step_clock.simulate(
        tm, jnp.zeros(tm.n), 0.0, jax.random.key(6), horizon=3, batch=2, updates=5, history=6
    )


@pytest.mark.parametrize("c", [2.0, 0.5])
def test_constant_power_scales_the_arrivals_and_steps_by_one_over_c(c):
    tm = make_cluster_model(N_SCALE, h="sqrt", noise="exponential")
    fast = dataclasses.replace(tm, power=_constant(N_SCALE, c))
    for link in ("shared", "independent"):
        a, b = _arrivals(tm, link=link), _arrivals(fast, link=link)
        chex.assert_trees_all_equal([b.worker, b.staleness], [a.worker, a.staleness])
        chex.assert_trees_all_close(
            [b.time, b.compute_end, b.dispatch_time], [a.time / c, a.compute_end / c,
                                                       a.dispatch_time / c], **F32
        )  # fmt: skip
    (_, a, done_a), (_, b, done_b) = _steps(tm), _steps(fast)
    chex.assert_trees_all_equal([b.worker, b.traj, b.versions], [a.worker, a.traj, a.versions])
    chex.assert_trees_all_close([b.time, done_b], [a.time / c, done_a / c], **F32)


# --------------------------------------------------------------------- a worker down for good


@pytest.fixture
def down_for_good(tmp_path):
    """n = 3, worker 2 (1-based) at speed 0 from time 0 on, kappa 0.1."""
    spec = "trace:" + _write(tmp_path / "down.csv", "worker,start,speed\n2,0,0\n")
    return make_cluster_model(3, h="sqrt", noise="exponential", kappa=0.1, power=spec)


@jax.jit
def _every_rule_with_one_down(tm):
    contributors = dataclasses.replace(tm, allreduce="contributors")
    free_allreduce = dataclasses.replace(tm, kappa=jnp.zeros(3))  # AllReduce of length 0
    key = jax.random.key(0)
    rennala = functools.partial(schedules.rennala, M=4)
    return {
        "rennala": schedules.run_rounds(rennala, contributors, key, 6),
        "rennala_kappa0": schedules.run_rounds(rennala, free_allreduce, key, 6),
        "rennala_all": schedules.run_rounds(rennala, tm, key, 2),
        "msync": schedules.run_rounds(_SCALE_RULES["msync"], contributors, key, 6),
        "malenia": schedules.run_rounds(_SCALE_RULES["malenia"], tm, key, 2),
        "sync": schedules.run_rounds(_SCALE_RULES["sync"], tm, key, 2),
        "shared": events.arrival_blocks(tm, key, 3, 10),
        "independent": events.arrival_blocks(dataclasses.replace(tm, link="independent"),
                                             key, 3, 10),
        "seed": step_clock.simulate(tm, tm.message, 0.0, key, horizon=2, batch=2, updates=5),
        "seed_independent": step_clock.simulate(dataclasses.replace(tm, link="independent"),
                                                tm.message, 0.0, key, horizon=2, batch=2,
                                                updates=5),
    }  # fmt: skip


def test_a_worker_down_for_the_whole_budget_never_contributes(down_for_good):
    out = jax.tree.map(np.asarray, _every_rule_with_one_down(down_for_good))
    for name in ("rennala", "rennala_kappa0", "msync"):
        s = out[name]
        assert s.counts[:, 1].sum() == 0 and s.counts.sum() > 0, name
        assert np.all(np.isfinite(s.t_end)) and np.all(np.diff(s.t_end) > 0), name
    # an AllReduce of every worker (kappa > 0) waits for it for ever
    assert np.isinf(out["rennala_all"].t_end[0])
    # Malenia needs a gradient of every worker and sync b of each: their rounds never end
    # (at inf, not nan)
    for name in ("malenia", "sync"):
        assert np.isposinf(out[name].t_collect_end[0]) and np.isposinf(out[name].t_end[0]), name
    # the per-arrival engine and the per-step clock go on without it on either link
    for link in ("shared", "independent"):
        arr = out[link]
        assert not np.any(arr.worker == 1) and np.all(np.isfinite(arr.time)), link
        _, batches, done = out["seed" if link == "shared" else "seed_independent"]
        assert not np.any(batches.worker == 1) and np.all(np.isfinite(done)), link


# --------------------------------------------------------------------- the docs' worked example


@pytest.fixture
def docs_example(tmp_path):
    """n = 3, h = 1, kappa = 0, deterministic; worker 2 down on [1.5, 6) (down.csv)."""
    spec = "trace:" + _write(tmp_path / "down.csv", "worker,start,speed\n2,1.5,0\n2,6,1\n")
    return make_cluster_model(3, h=1.0, power=spec, power_horizon=10.0)


def test_docs_worked_example(docs_example):
    tm, key = docs_example, jax.random.key(0)
    sync = schedules.run_rounds(functools.partial(schedules.sync, per_worker=1), tm, key, 3)
    chex.assert_trees_all_close(sync.t_end, jnp.array([1.0, 6.5, 7.5]), **F32)
    np.testing.assert_array_equal(sync.counts, np.ones((3, 3)))
    rennala = schedules.run_rounds(functools.partial(schedules.rennala, M=4), tm, key, 3)
    chex.assert_trees_all_close(rennala.t_end, jnp.array([2.0, 4.0, 6.0]), **F32)
    # worker 2 contributes one gradient to round 1 and none after
    np.testing.assert_array_equal(rennala.counts, [[2, 1, 1], [2, 0, 2], [2, 0, 2]])
    # the reference agrees
    cl = ref.Cluster(np.asarray(tm.power.start), np.asarray(tm.power.speed))
    taus = [np.ones((3, 5))] * 3
    kappa = np.zeros(3)
    assert [r["t_end"] for r in ref.simulate_rounds(cl, "sync", taus, kappa)] == [1, 6.5, 7.5]
    want = ref.simulate_rounds(cl, "rennala", taus, kappa, M=4)
    assert [r["t_end"] for r in want] == [2, 4, 6]
    np.testing.assert_array_equal([r["counts"] for r in want], rennala.counts)


# --------------------------------------------------------------------- in flight: work done
#
# docs/cluster_model.md: a gradient is in flight at a round's end T iff its worker has done a
# positive amount of work on it by T (work clock); one begun while its worker is down, on
# which nothing was done by T, is not: no waste, and the worker is not kept busy.


@pytest.fixture
def down_from_0(tmp_path):
    """n = 2, h = (1, 0.5), kappa = 0, deterministic; worker 2 (1-based) down on [0, 1.2)."""
    spec = "trace:" + _write(tmp_path / "z.csv", "worker,start,speed\n2,0,0\n2,1.2,1\n")
    return make_cluster_model(2, h=[1.0, 0.5], power=spec)


def test_a_gradient_with_no_work_done_by_t_is_not_in_flight(down_from_0):
    """Rennala, M = 1 (the hand derivation is tests/test_clock.py's
    test_discard_a_gradient_begun_while_down_with_no_work_done_is_not_in_flight): round 0
    ends at 1 with worker 2's gradient untouched (down since 0): not in flight.  Discard:
    rounds end at 1, 1.7, 2.2, wasted 0, 1, 1; worker 2 is free at 1, worker 1 busy until
    2 then 3 with its discarded gradients.  The registry's rule, the reference and the
    timeline agree; cancel ends the rounds at the same times."""
    key = jax.random.key(0)
    want_wasted = {"discard": [0.0, 1.0, 1.0], "cancel": [0.0, 0.7, 0.5]}
    want_busy = {"discard": [[1.0, 1.0], [2.0, 1.7], [3.0, 2.2]],
                 "cancel": [[1.0, 1.0], [1.7, 1.7], [2.2, 2.2]]}  # fmt: skip
    want_bars = {"discard": [(0, 1.0, 2.0, 1), (0, 2.0, 3.0, 2)],
                 "cancel": [(0, 1.0, 1.7, 1), (0, 1.7, 2.2, 2)]}  # fmt: skip
    for inflight in ("discard", "cancel"):
        tm = dataclasses.replace(down_from_0, inflight=inflight)
        res = simulation.simulate_rule_rounds(tm, key, rule="rennala", M=1, rounds=3)
        chex.assert_trees_all_close(
            [res["t_end"], res["time_wasted"], res["busy_until"]],
            [jnp.array([1.0, 1.7, 2.2]), jnp.array(want_wasted[inflight]),
             jnp.array(want_busy[inflight])],
            **F32,
        )  # fmt: skip
        np.testing.assert_array_equal(res["counts"], [[1, 0], [0, 1], [0, 1]])
        cl = ref.Cluster(np.asarray(tm.power.start), np.asarray(tm.power.speed))
        taus = [np.array([[1.0, 1.0], [0.5, 0.5]])] * 3
        want = ref.simulate_rounds(cl, "rennala", taus, np.zeros(2), M=1, inflight=inflight)
        chex.assert_trees_all_close(
            [np.array([r[k] for r in want]) for k in ("t_end", "time_wasted", "busy_until")],
            [np.asarray(res[k], np.float64) for k in ("t_end", "time_wasted", "busy_until")],
            **F32,
        )
        np.testing.assert_array_equal(
            [r["stalled"] for r in want], [[False, True], [False, False], [False, False]]
        )
        bars = timeline.clock_timeline(tm, key, rule="rennala", M=1, rounds=3).bars("wasted")
        got = list(zip(bars["worker"], bars["start"], bars["end"], bars["group"], strict=True))
        assert len(got) == 2 and all(w == 0 for w, *_ in got), (inflight, got)
        chex.assert_trees_all_close(
            np.array(got, np.float64), np.array(want_bars[inflight], np.float64), **F32
        )


DN, DK, D_ROUNDS, D_DRAWS, D_MIN = 4, 10, 5, 24, 16  # workers, stretches, rounds, draws, compared
D_CLOSE = 5e-4  # compare a draw only when no discrete choice is this close to flipping
D_MODES = (
    ("discard", "all", "wait"),
    ("discard", "contributors", "wait"),
    ("discard", "all", "free"),
    ("discard", "contributors", "free"),
    ("cancel", "contributors", "wait"),
)
# (rule, M): M < n, M > n (Rennala), the fastest two (m-synchronous)
D_CASES = {"rennala": ("rennala", 2), "rennala_M_above_n": ("rennala", 6), "msync": ("msync", 2)}
D_FIELDS = ("t_collect_end", "t_end", "busy_until", "time_wasted", "traj_wasted", "time_used")


@functools.partial(jax.jit, static_argnames=("rule", "M"))
def _registry_rounds(h, kappa, start, speed, *, rule, M):
    """Every mode of ``D_MODES`` of one registered rule over the draws, through
    :func:`simulation.simulate_rule_rounds` (the clock's path), deterministic compute times
    ``h``: ``{mode: {field: [draws, rounds, ...]}}``."""

    def one(h, kappa, start, speed):
        tm = make_cluster_model(DN)
        tm = dataclasses.replace(tm, h=h, kappa=kappa, power=power.make_trace(start, speed))
        out = {}
        for inflight, allreduce, down in D_MODES:
            m = dataclasses.replace(tm, inflight=inflight, allreduce=allreduce,
                                    down_exchange=down)  # fmt: skip
            out[inflight, allreduce, down] = simulation.simulate_rule_rounds(
                m, jax.random.key(0), rule=rule, M=M, rounds=D_ROUNDS
            )
        return out

    return jax.vmap(one)(h, kappa, start, speed)


@pytest.mark.parametrize("case", D_CASES)
def test_rules_with_workers_down_at_the_round_end_match_the_reference(case):
    """Long outages (a worker often down through a whole round, its gradient untouched at
    T): the registry's rules under ``discard`` (and ``cancel``), round by round, against the
    float64 reference; the compared draws hold such untouched gradients."""
    rule, M = D_CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)) + 11)
    traces = [ref.random_trace(rng, DN, DK, mean_length=2.5) for _ in range(D_DRAWS)]
    start = np.stack([t[0] for t in traces])
    speed = np.stack([t[1] for t in traces])
    kappa = np.stack([ref.random_kappa(rng, DN) for _ in range(D_DRAWS)])
    h = rng.uniform(0.2, 2.0, (D_DRAWS, DN)).astype(np.float32)
    got = jax.tree.map(np.asarray, _registry_rounds(h, kappa, start, speed, rule=rule, M=M))
    for (inflight, allreduce, down), res in got.items():
        where = f"{case} {inflight}/{allreduce}/{down}"
        compared = stalled = 0
        for d in range(D_DRAWS):
            cl = ref.Cluster(start[d], speed[d], down_exchange=down)
            taus = [np.broadcast_to(h[d].astype(np.float64)[:, None], (DN, M + 2))] * D_ROUNDS
            modes = {"inflight": inflight, "allreduce": allreduce}
            want = ref.simulate_rounds(cl, rule, taus, kappa[d].astype(np.float64), M=M, m=M,
                                       **modes)  # fmt: skip
            if cl.margin < D_CLOSE:
                continue
            compared += 1
            stalled += sum(int(np.sum(r["stalled"])) for r in want)
            scale = max(max(abs(r["t_end"]), abs(r["t_collect_end"])) for r in want)
            for r, e in enumerate(want):
                msg = f"{where} draw {d} round {r}"
                np.testing.assert_array_equal(res["counts"][d, r], e["counts"], err_msg=msg)
                chex.assert_trees_all_close(
                    {k: np.asarray(res[k][d, r], np.float64) for k in D_FIELDS},
                    {k: np.asarray(e[k], np.float64) for k in D_FIELDS},
                    rtol=1e-5, atol=2e-5 * (1.0 + scale), custom_message=msg,
                )  # fmt: skip
        assert compared >= D_MIN, (where, compared)
        assert stalled >= 10, (where, stalled)  # untouched gradients at T were compared


# --------------------------------------------------------------------- sources


def test_outages_are_deterministic_per_key_and_differ_across_keys():
    out = power.Outages(jnp.array([5.0, 1.0, 2.0]), jnp.array([1.0, 3.0, 0.5]), bouts=6)
    draw = jax.jit(power.draw_outages)
    a, b, c = (draw(out, jax.random.key(k)) for k in (1, 1, 2))
    chex.assert_trees_all_equal(a, b)
    assert not np.allclose(np.asarray(a.start), np.asarray(c.start))
    chex.assert_shape([a.start, a.speed], (3, 2 * 6 + 1))
    assert power.stretches(out) == 13 and power.stretches(a) == 13 and power.stretches(None) == 0
    start = np.asarray(a.start)
    np.testing.assert_array_equal(start[:, 0], 0.0)
    assert np.all(np.diff(start, axis=1) > 0)
    # up first, then down and up in turn, up after the last bout
    np.testing.assert_array_equal(a.speed, np.tile([1.0] + [0.0, 1.0] * 6, (3, 1)))
    # realize draws them from the run's key; a model without outages is returned as it is
    tm = make_cluster_model(3, power="outages:5:1", power_horizon=20.0)
    r1, t1 = realize(tm, jax.random.key(7))
    _, t2 = realize(tm, jax.random.key(7))
    _, t3 = realize(tm, jax.random.key(8))
    chex.assert_trees_all_equal(t1, t2)
    assert r1.power is t1 and not np.allclose(np.asarray(t1.start), np.asarray(t3.start))
    plain = make_cluster_model(3)
    same, drawn = realize(plain, jax.random.key(7))
    assert same is plain and drawn is None
    with pytest.raises(ValueError, match=r"^the cluster model's outages are drawn per run"):
        _ = tm.trace


def test_outages_cover_the_horizon_and_are_down_their_share_of_the_time():
    up, down, horizon = np.full(400, 4.0), np.full(400, 1.0), 200.0
    bouts = power_sources.outage_bouts(up, down, horizon)
    tr = power.draw_outages(power.Outages(jnp.asarray(up), jnp.asarray(down), bouts),
                            jax.random.key(0))  # fmt: skip
    start = np.asarray(tr.start, np.float64)
    assert start[:, -1].min() > horizon  # every worker's bouts cover the horizon
    up_by = np.asarray(power.work_at(tr, jnp.full((400,), horizon)))  # speeds 0 or 1
    np.testing.assert_allclose(1 - up_by.mean() / horizon, 1 / 5, atol=0.01)


def test_periodic_trace_shape_and_values():
    n, period, low, horizon = 3, 2.0, 0.25, 5.0
    tr = power_sources.periodic_trace(n, period, low, horizon)
    K = math.ceil(horizon / (period / 2)) + 4
    chex.assert_shape([tr.start, tr.speed], (n, K))
    start, speed = np.asarray(tr.start, np.float64), np.asarray(tr.speed)
    np.testing.assert_array_equal(start[:, 0], 0.0)
    assert np.all(np.diff(start, axis=1) > 0) and np.all(start[:, -1] >= horizon)
    np.testing.assert_array_equal(speed[:, -1], 1.0)  # speed 1 past the horizon
    for i in range(n):  # speed 1 in the first half of each period, worker i shifted by i/n
        for t in np.linspace(0.01, horizon, 97):
            phase = (t / period + i / n) % 1.0
            if min(phase, abs(phase - 0.5), 1 - phase) < 1e-3:
                continue
            j = np.searchsorted(start[i], t, side="right") - 1
            assert speed[i, j] == (1.0 if phase < 0.5 else low), (i, t)
    assert np.asarray(power_sources.periodic_trace(2, 1.0, 0.0, 3.0).speed).min() == 0.0  # LOW = 0


def test_trace_file_rows_defaults_and_padding(tmp_path):
    path = _write(tmp_path / "t.csv", "worker,start,speed\n\n1,0,0.5\n1,2,0\n3,1.5,2\n")
    rows = power_sources.read_trace_rows(path, 3)
    assert rows == {0: [(0.0, 0.5), (2.0, 0.0)], 2: [(1.5, 2.0)]}
    tr = power_sources.build("trace:" + path, 3, 10.0)
    # worker 2 is absent (speed 1 throughout), worker 3 at speed 1 before its first row;
    # shorter rows repeat their last stretch
    np.testing.assert_array_equal(tr.start, [[0, 2], [0, 0], [0, 1.5]])
    np.testing.assert_array_equal(tr.speed, [[0.5, 0], [1, 1], [1, 2]])
    assert power_sources.build("constant", 3, None) is None
    # every worker down for ever, but only from the budget on: accepted
    path = _write(tmp_path / "late.csv", "1,3,0\n2,5,0\n")
    assert power_sources.build("trace:" + path, 2, 5.0).stretches == 2
    # one worker never down: accepted whatever the budget
    one = _write(tmp_path / "one.csv", "1,0,0\n")
    assert power_sources.build("trace:" + one, 2, 5.0) is not None


def _raises(message: str):
    """pytest.raises for a TraceError whose whole message is ``message``."""
    return pytest.raises(power_sources.TraceError, match="^" + re.escape(message) + "$")


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("worker,start,speed\n1,0,-1\n", 2, "speed must be >= 0, got -1.0"),
        ("1,-0.5,1\n", 1, "start must be >= 0, got -0.5"),
        ("4,0,1\n", 1, "worker must be an integer in 1..3, got '4'"),
        ("0,0,1\n", 1, "worker must be an integer in 1..3, got '0'"),
        ("1.5,0,1\n", 1, "worker must be an integer in 1..3, got '1.5'"),
        ("2,2,0\n2,1,1\n", 2, "worker 2's starts must increase, got 1.0 after 2.0"),
        ("2,2,0\n1,0,1\n2,2,1\n", 3, "worker 2's starts must increase, got 2.0 after 2.0"),
        ("1,x,1\n", 1, "not a number in '1,x,1'"),
        (
            "start,worker,speed\n",
            1,
            "the header must be worker,start,speed, got 'start,worker,speed'",
        ),
        (
            "speed,start,worker\n2,1,0\n",
            1,
            "the header must be worker,start,speed, got 'speed,start,worker'",
        ),
        (
            "\ufeffworker,start,spead\n",
            1,
            "the header must be worker,start,speed, got 'worker,start,spead'",
        ),
        ("2,1,x\n", 1, "not a number in '2,1,x'"),
        (
            "2,1.5,1e308\n",
            1,
            "start and speed must be at most 3.40282e+38 (the trace is float32), got '2,1.5,1e308'",
        ),
        (
            "2,1e39,1\n",
            1,
            "start and speed must be at most 3.40282e+38 (the trace is float32), got '2,1e39,1'",
        ),
        (
            "2,1,3e38\n2,3,1\n",
            2,
            "worker 2's work by t = 3 (the integral of its speed) is 6e+38, more than float32 "
            "holds (3.40282e+38)",
        ),
        ("1,2\n", 1, "expected worker,start,speed, got '1,2'"),
        ("1,inf,1\n", 1, "values must be finite, got '1,inf,1'"),
    ],
)
def test_trace_file_line_errors(tmp_path, text, line, what):
    """A value beyond float32 (1e308 was inf in the trace: NaN from round 2 on) is refused
    before numpy casts it (the cast's RuntimeWarnings leaked)."""
    path = _write(tmp_path / "bad.csv", text)
    with _raises(f"power trace {path!r} line {line}: {what}"):
        power_sources.read_trace_rows(path, 3)
    with _raises(f"power trace {path!r} line {line}: {what}"):
        power_sources.build("trace:" + path, 3, 10.0)


def test_a_byte_order_mark_is_no_part_of_the_header(tmp_path):
    """A CSV saved with a UTF-8 BOM (as YAML configs with one are read): line 1 was "not a
    number in '\\ufeffworker,start,speed'"."""
    plain = _write(tmp_path / "plain.csv", "worker,start,speed\n2,1.5,0\n2,6,1\n")
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "plain.csv").read_bytes())
    assert power_sources.read_trace_rows(bom, 2) == power_sources.read_trace_rows(plain, 2)
    headless = tmp_path / "headless.csv"
    headless.write_bytes(b"\xef\xbb\xbf2,1.5,0\n")
    assert power_sources.read_trace_rows(headless, 2) == {1: [(1.5, 0.0)]}


def test_trace_file_errors(tmp_path):
    missing = str(tmp_path / "nope.csv")
    with _raises(f"power trace file {missing!r} does not exist"):
        power_sources.build("trace:" + missing, 3, 10.0)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe1,0,1\n")
    with _raises(
        f"power trace file {str(binary)!r} cannot be read: 'utf-8' codec can't decode byte "
        "0xff in position 0: invalid start byte"
    ):
        power_sources.read_trace_rows(binary, 3)
    folder = str(tmp_path)
    unreadable = f"^power trace file {re.escape(repr(folder))} cannot be read: "
    with pytest.raises(power_sources.TraceError, match=unreadable):
        power_sources.read_trace_rows(folder, 3)
    empty = _write(tmp_path / "empty.csv", "worker,start,speed\n\n")
    with _raises(f"power trace file {empty!r} has no rows"):
        power_sources.read_trace_rows(empty, 3)
    # every worker at speed 0 from some time before the budget: refused
    down = _write(tmp_path / "down.csv", "1,3,0\n2,0,1\n2,5,0\n")
    with _raises(
        f"power trace {down!r}: every worker is at speed 0 from t = 5 on, before the budget "
        "10: no gradient could ever finish after it"
    ):
        power_sources.build("trace:" + down, 2, 10.0)
    with pytest.raises(ValueError, match=r"^power trace .* every worker is at speed 0 from"):
        make_cluster_model(2, power="trace:" + down, power_horizon=10.0)


ALLOWED = "allowed: constant, outages:UP:DOWN, periodic:PERIOD:LOW or trace:FILE"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("outages:5:0", "power 'outages:5:0': DOWN must be > 0"),
        ("outages:5:-1", "power 'outages:5:-1': DOWN must be > 0"),
        ("outages:0:5", "power 'outages:0:5': UP must be > 0"),
        ("outages:x:5", "power 'outages:x:5': UP must be a number, got 'x'"),
        ("outages:5", f"power: 'outages:5' takes 2 argument(s); {ALLOWED}"),
        ("periodic:0:0.5", "power 'periodic:0:0.5': PERIOD must be > 0"),
        ("periodic:2:-1", "power 'periodic:2:-1': LOW must be >= 0"),
        ("trace", f"power: 'trace' takes 1 argument(s); {ALLOWED}"),
        ("sometimes", f"power: unknown source 'sometimes'; {ALLOWED}"),
        ("", f"power: got ''; {ALLOWED}"),
    ],
)
def test_spec_errors(spec, message):
    with _raises(message):
        power_sources.build(spec, 2, 10.0)
    with _raises(message):
        power_sources.check_spec(spec, 2, 10.0)


def test_drawn_and_periodic_sources_need_a_horizon():
    for spec in ("outages:5:1", "periodic:2:0"):
        with _raises(
            f"power {spec!r} needs cluster.power_horizon (or a budget): the time it must cover"
        ):
            power_sources.build(spec, 2, None)
    out = power_sources.build("outages:linear:1", 3, 50.0)  # a profile: per-worker means
    np.testing.assert_array_equal(out.up, [1.0, 2.0, 3.0])
    assert out.bouts == power_sources.outage_bouts(np.array([1.0, 2.0, 3.0]), np.ones(3), 50.0)
    assert power_sources.parse_power(" periodic:4:0.5 ") == ("periodic", ("4", "0.5"))
