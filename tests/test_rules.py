"""The open registry of round rules (jaxnigt.cluster.rules): registration, the building
blocks a user's rule is written with, and the padding check."""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.cluster import model as model_lib
from jaxnigt.cluster import rules, schedules, simulation, timing


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


# ---------------------------------------------------------------------------- MindFlayer
# The rule against the float64 reference written from docs/cluster_model.md ("MindFlayer:
# attempts under a time limit"; tests/reference_mindflayer.py) on random draws: heavy tails
# (lognormal with a large sigma, Pareto and log-logistic with a tail index below 1), every
# kind of time limit and of attempts, power traces with outages, both in-flight and both
# AllReduce modes, exchanges that wait for a down worker or not.

MF_N, MF_ROUNDS, MF_DRAWS, MF_MIN = 4, 3, 6, 4  # workers, rounds, draws, compared per case
# the least distance to a flip compared (reference_mindflayer.Close): relative, and absolute
# for two workers' successful completions; the power trace's own as test_schedules' P_CLOSE
MF_CLOSE = {"success": 1e-5, "expected": 3e-6, "multiple": 1e-5, "order": 5e-5}
MF_NEAR = 5e-4
_MF_A = (("cancel", "all", "wait"), ("discard", "contributors", "wait"))
_MF_B = (("cancel", "contributors", "wait"), ("discard", "all", "free"))
# (noise, time limit, attempts, M, modes, power trace)
MF_CASES = {
    "lognormal_median": ("lognormal:2.5", "median", "prescribed", 5, _MF_A, False),
    "lognormal_quantile_power": ("lognormal:3", "quantile:0.7", "prescribed", 4, _MF_B, True),
    "exponential_multiple": ("exponential", 0.8, "prescribed", 6, _MF_A, False),
    "pareto_attempts_power": ("pareto:0.7", "median", 3, 4, _MF_B, True),
    "uniform_listed_limits": (
        "uniform:0.5:1.5",
        (0.9, 1.6, 2.0, 2.6),
        "prescribed",
        4,
        _MF_A,
        False,
    ),
    "loglogistic_listed_attempts": (
        "loglogistic:0.9",
        "quantile:0.6",
        (3, 1, 0, 2),
        4,
        _MF_A,
        False,
    ),
    "straggler_power": ("straggler:0.3:5", "median", "prescribed", 5, _MF_B, True),
    "deterministic_power": ("deterministic", "median", "prescribed", 6, _MF_B, True),
}


def _mf_options(noise, limit, attempts, hs):
    """The case's options, their bound's floor the least over its draws' h."""
    from jaxnigt.cluster.rules import mindflayer

    options = mindflayer.Options(limit, attempts)
    floors = [
        options.resolve(model_lib.make_cluster_model(MF_N, h=list(map(float, h)), noise=noise))
        for h in hs
    ]
    least = [o.floor for o in floors if o.floor is not None]
    return dataclasses.replace(options, floor=min(least)) if least else options


@functools.partial(jax.jit, static_argnames=("noise", "options", "M", "modes", "traced"))
def _mf_rounds(h, kappa, taus, start, speed, *, noise, options, M, modes, traced):
    from jaxnigt.cluster import power
    from jaxnigt.cluster.rules import mindflayer

    base = model_lib.make_cluster_model(MF_N, noise=noise)

    def one(h, kappa, taus, start, speed):
        trace = power.make_trace(start, speed) if traced else None
        out = {}
        for inflight, allreduce, down in modes:
            tm = dataclasses.replace(
                base, h=h, kappa=kappa, power=trace, inflight=inflight, allreduce=allreduce,
                down_exchange=down,
            )  # fmt: skip

            def step(carry, tau, tm=tm):
                s = mindflayer.mindflayer_from_times(tm, tau, *carry, M=M, options=options)
                return (s.t_end, s.busy_until), s

            init = (jnp.float32(0.0), jnp.zeros((MF_N,), jnp.float32))
            out[inflight, allreduce, down] = jax.lax.scan(step, init, taus)[1]
        return out

    return jax.vmap(one)(h, kappa, taus, start, speed)


def _mf_reference(case, d, draws, mode, options):
    """The reference's rounds of draw ``d`` and its closeness to a flip (None: too close)."""
    import reference_mindflayer as ref
    import reference_power

    noise, limit, attempts, M, _, traced = MF_CASES[case]
    h, kappa, taus, start, speed = (x[d] for x in draws)
    kind, params = timing.parse_noise(noise)
    inflight, allreduce, down = mode
    if not traced:
        start, speed = np.zeros((MF_N, 1)), np.ones((MF_N, 1))
    cl = reference_power.Cluster(start, speed, down_exchange=down)
    close = ref.Close()
    t = ref.time_limits(limit, h, kind, params)
    if attempts == "prescribed":
        B = ref.prescribe(close, t, ref.probabilities(limit, h, t, kind, params), M)
    else:
        B = list(attempts) if isinstance(attempts, tuple) else [attempts] * MF_N
    want = ref.simulate_rounds(
        cl, close, taus.astype(np.float64), kappa.astype(np.float64), t=t, B=B,
        allreduce=allreduce, inflight=inflight,
    )  # fmt: skip
    far = cl.margin >= MF_NEAR and all(getattr(close, k) >= v for k, v in MF_CLOSE.items())
    return want if far else None


@pytest.mark.parametrize("case", MF_CASES)
def test_mindflayer_matches_the_reference(case):
    """Round by round, the reference's counts, successful slots in order, times, busy_until
    and waste: on the draws where no discrete choice is within float32 rounding of flipping."""
    import reference_mindflayer as ref
    import reference_power

    from jaxnigt.cluster.rules import mindflayer

    noise, limit, attempts, M, modes, traced = MF_CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    kind, params = timing.parse_noise(noise)
    h = rng.uniform(0.5, 2.5, (MF_DRAWS, MF_N)).astype(np.float32)
    options = _mf_options(noise, limit, attempts, h)
    K = mindflayer.columns(options, M)
    xi = ref.draw(rng, kind, params, (MF_DRAWS, MF_ROUNDS, MF_N, K))
    taus = (h[:, None, :, None] * xi).astype(np.float32)
    kappa = np.stack([reference_power.random_kappa(rng, MF_N) for _ in range(MF_DRAWS)])
    traces = [reference_power.random_trace(rng, MF_N, 6) for _ in range(MF_DRAWS)]
    start, speed = (np.stack([tr[j] for tr in traces]) for j in (0, 1))
    draws = (h, kappa, taus, start, speed)
    got = _mf_rounds(*draws, noise=noise, options=options, M=M, modes=modes, traced=traced)
    for mode, sched in got.items():
        compared = 0
        for d in range(MF_DRAWS):
            want = _mf_reference(case, d, draws, mode, options)
            if want is None:
                continue
            compared += 1
            for r, e in enumerate(want):
                where = f"{case} {mode} draw {d} round {r}"
                g = jax.tree.map(lambda x, d=d, r=r: np.asarray(x[d, r], np.float64), sched)
                np.testing.assert_array_equal(g.counts, e["counts"], err_msg=where)
                valid = g.slot_valid.astype(bool)
                slots = list(zip(g.slot_worker[valid].astype(int), g.slot_rank[valid].astype(int),
                                 strict=True))  # fmt: skip
                assert slots == e["slots"], where
                assert valid[: len(slots)].all(), where  # the successful slots first
                scale = max(abs(e["t_end"]), 1.0)
                for field in ("t_collect_end", "t_end", "comm_time", "busy_until", "time_used",
                              "time_wasted", "traj_wasted"):  # fmt: skip
                    np.testing.assert_allclose(
                        getattr(g, field), e[field], rtol=1e-5, atol=2e-5 * scale,
                        err_msg=f"{where} {field}",
                    )  # fmt: skip
        assert compared >= MF_MIN, (case, mode, compared)


def test_mindflayer_noise_laws_are_the_references():
    """The quantiles and distribution functions MindFlayer reads (jaxnigt.cluster.noise_laws:
    float32, traced parameters) against the reference's (float64) for every noise kind, and
    the host CDF; every noise kind has them."""
    import reference_mindflayer as ref

    from jaxnigt.cluster import noise_laws

    specs = ["deterministic", "exponential", "lognormal:2.5", "uniform:0.5:1.5",
             "straggler:0.3:5", "straggler:0.6:0.5", "pareto:0.7", "pareto:2.5",
             "loglogistic:0.9", "loglogistic:3"]  # fmt: skip
    xs = [0.05, 0.3, 0.7, 1.0, 1.3, 4.0, 60.0]
    for spec in specs:
        kind, params = timing.parse_noise(spec)
        m = model_lib.make_cluster_model(2, noise=spec)
        for U in (0.2, 0.5, 0.7, 0.95):
            want = ref.quantile(kind, params, U)
            np.testing.assert_allclose(float(noise_laws.quantile(m, U)), want, rtol=2e-6,
                                       err_msg=f"{spec} q_{U}")  # fmt: skip
        got = np.asarray(noise_laws.cdf(m, jnp.asarray(xs)))
        want = [ref.cdf(kind, params, x) for x in xs]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=spec)
        host = [noise_laws.host_cdf(kind, params, x) for x in xs]
        np.testing.assert_allclose(host, want, rtol=1e-12, atol=1e-15, err_msg=spec)
    assert all(noise_laws.known(kind) for kind in timing.NOISES)


@pytest.mark.parametrize(
    "limit, attempts",
    [("median", "prescribed"), ("quantile:0.8", "prescribed"), (1.3, "prescribed"), (1.1, 3)],
)
def test_mindflayer_padded_runs_are_their_unpadded_runs(limit, attempts):
    """Runs of M = 2 and 5 on 3 workers, padded to M = 5 and 5 rows (as a padded program gives
    them: their sizes as values), have their unpadded rounds: the same draws, counts, slots
    and times; the registered rule passes the registry's padding check."""
    from jaxnigt.cluster import padding
    from jaxnigt.cluster.rules import mindflayer

    rules.check_padding("mindflayer")
    m = model_lib.make_cluster_model(3, h=(1.0, 2.0, 3.0), noise="lognormal:1.5", kappa=0.3)
    options = mindflayer.Options(limit, attempts).resolve(m)
    rule = mindflayer.round_with(options)
    key = jax.random.key(3)
    for M in (2, 5):
        plain = schedules.run_rounds(
            lambda mm, k, t, b, M=M: rule(mm, k, t, b, rules.RoundSize(M=M)), m, key, 4
        )
        size = rules.RoundSize(M=5, run={"M": jnp.int32(M)})
        padded = schedules.run_rounds(
            lambda mm, k, t, b: rule(mm, k, t, b, size), padding.pad(m, 5), key, 4
        )
        np.testing.assert_array_equal(padded.counts[:, :3], plain.counts)
        assert not np.asarray(padded.counts[:, 3:]).any()
        np.testing.assert_allclose(padded.t_end, plain.t_end, rtol=1e-6)
        np.testing.assert_allclose(padded.busy_until[:, :3], plain.busy_until, rtol=1e-6)
        for r in range(4):
            n_ok = int(plain.num_slots[r])
            assert int(padded.num_slots[r]) == n_ok
            np.testing.assert_array_equal(padded.slot_worker[r, :n_ok], plain.slot_worker[r, :n_ok])
            np.testing.assert_array_equal(padded.slot_rank[r, :n_ok], plain.slot_rank[r, :n_ok])


def test_mindflayer_is_registered_and_its_options_are_checked():
    from jaxnigt.cluster.rules import mindflayer

    assert rules.rule_names()[4] == "mindflayer" and not rules.builtin("mindflayer")
    spec = rules.get_rule("mindflayer")
    assert spec.pads and spec.cluster_options == ("allreduce", "down_exchange")
    assert mindflayer.parse_time_limit("quantile:0.25") == "quantile:0.25"
    assert mindflayer.parse_time_limit("1,2.5") == (1.0, 2.5)
    assert mindflayer.parse_time_limit(2) == 2.0
    assert mindflayer.parse_attempts("3,0,1") == (3, 0, 1)
    assert mindflayer.parse_attempts("prescribed") == "prescribed"
    for bad, parse in (("quantile:1", mindflayer.parse_time_limit),
                       (0, mindflayer.parse_time_limit), ("fast", mindflayer.parse_time_limit),
                       (0, mindflayer.parse_attempts), ((0, 0), mindflayer.parse_attempts),
                       (1.5, mindflayer.parse_attempts)):  # fmt: skip
        with pytest.raises(ValueError, match="got"):
            parse(bad)
    m = model_lib.make_cluster_model(3, noise="deterministic")
    with pytest.raises(ValueError, match="never succeeds"):
        mindflayer.Options(0.5).resolve(m)
    with pytest.raises(ValueError, match="one per worker"):
        mindflayer.Options((1.0, 2.0)).resolve(m)
    # the default: median limits, 2M + 1 attempts' draws at most (p >= 1/2)
    assert mindflayer.columns(mindflayer.DEFAULT, 4) == 9
    assert mindflayer.Options(0.5, 3).resolve(m).floor is None  # given attempts: no bound


# ---------------------------------------------------------------------------- Ringleader
# docs/cluster_model.md, "Ringleader: a round per cycle": its worked example through `jaxnigt
# clock`, the rule against the float64 reference written from the page
# (tests/reference_ringleader.py) on random draws (heavy tails, power traces, both in-flight
# and both AllReduce modes, exchanges that wait for a down worker or not, every option), its
# padded rounds, and the default rule as Malenia's at M = n.


def test_ringleader_worked_example_is_the_clocks(tmp_path, capsys):
    """The page's command and rows, by hand: completions 1, 2, 3, 4 (worker 0), 1.5, 3, 4.5
    (worker 1), 4 (worker 2): the table is full at T = 4 with b = (4, 2, 1) (worker 0's fourth
    at the same instant counts); worker 1's third, begun at 3, is cancelled after 1 of work;
    the AllReduce ends the round at 4.5; the second round is the first from 4.5.  Malenia at
    M = 3 prints the same rows.  The paper's whole cycle: T = 5 (worker 1 again at 4.5,
    worker 0 at 5), b = (5, 3, 1), 1.5 wasted (worker 1's fourth from 4.5, worker 2's second
    from 4), the round ends at 5.5."""
    import csv

    from jaxnigt.cli import clock
    from jaxnigt.cluster.rules import ringleader

    argv = "--n 3 --h 1,1.5,4 --kappa 0.5 --rule ringleader --rounds 2".split()
    want = [[0, 0, 4, 4.5, 7, 1, 1, 4, 2, 1], [1, 4.5, 8.5, 9, 7, 1, 1, 4, 2, 1]]
    for extra in ([], ["--rule", "malenia", "--M", "3"]):
        out = tmp_path / "g.csv"
        assert clock.main([*argv, *extra, "--out", str(out)]) == 0
        assert capsys.readouterr().err == ""
        with open(out, newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["round", "t_start", "t_collect_end", "t_end", "grads_used",
                           "time_wasted", "comms", "b_0", "b_1", "b_2"]  # fmt: skip
        np.testing.assert_allclose([[float(x) for x in r] for r in rows[1:]], want, rtol=1e-6)
    m = model_lib.make_cluster_model(3, h=(1.0, 1.5, 4.0), kappa=0.5)
    rule = ringleader.round_with(ringleader.Options(end="cycle"))
    size = rules.RoundSize(M=1, capacity=12)
    s = schedules.run_rounds(lambda mm, k, t, b: rule(mm, k, t, b, size), m, jax.random.key(0), 2)
    np.testing.assert_allclose(s.t_collect_end, [5.0, 10.5], rtol=1e-6)
    np.testing.assert_allclose(s.t_end, [5.5, 11.0], rtol=1e-6)
    np.testing.assert_array_equal(s.counts, [[5, 3, 1]] * 2)
    np.testing.assert_allclose(s.time_wasted, [1.5, 1.5], rtol=1e-6)
    np.testing.assert_allclose(s.traj_wasted, [0.5 / 1.5 + 1 / 4] * 2, rtol=1e-6)


RL_N, RL_ROUNDS, RL_DRAWS, RL_CAP, RL_MIN = 4, 3, 8, 40, 6  # workers, rounds, draws,
# capacity, least draws compared per case and mode (7 or 8 of 8 with these seeds)
# the least distance to a flip compared: the rule's own (relative) and the trace's (absolute,
# as test_schedules' P_CLOSE)
RL_CLOSE, RL_TRACE_CLOSE = 5e-5, 5e-4
_RL_A = (("cancel", "all", "wait"), ("discard", "contributors", "free"))
_RL_B = (("cancel", "contributors", "free"), ("discard", "all", "wait"))
# (end, table, noise of the compute times, power trace, modes)
RL_CASES = {
    "every_exponential": ("every", "mean", "exponential", False, _RL_A),
    "every_pareto_power": ("every", "mean", "pareto:1.5", True, _RL_B),
    "cycle_loglogistic": ("cycle", "mean", "loglogistic:1.3", False, _RL_A),
    "cycle_pareto_heavy_power": ("cycle", "mean", "pareto:0.8", True, _RL_B),
    "latest_lognormal_power": ("every", "latest", "lognormal:1.5", True, _RL_A),
    "cycle_latest_uniform": ("cycle", "latest", "uniform:0.5:1.5", False, _RL_B),
}
RL_FIELDS = ("t_collect_end", "t_end", "comm_time", "busy_until", "time_used", "time_wasted",
             "traj_wasted")  # fmt: skip


@functools.partial(jax.jit, static_argnames=("options", "modes", "traced"))
def _rl_rounds(kappa, taus, start, speed, *, options, modes, traced):
    from jaxnigt.cluster import power
    from jaxnigt.cluster.rules import ringleader

    base = model_lib.make_cluster_model(RL_N)

    def one(kappa, taus, start, speed):
        trace = power.make_trace(start, speed) if traced else None
        out = {}
        for inflight, allreduce, down in modes:
            tm = dataclasses.replace(
                base, kappa=kappa, power=trace, inflight=inflight, allreduce=allreduce,
                down_exchange=down,
            )  # fmt: skip

            def step(carry, tau, tm=tm):
                s = ringleader.ringleader_from_times(
                    tm, tau, *carry, capacity=RL_CAP, options=options
                )
                return (s.t_end, s.busy_until), s

            init = (jnp.float32(0.0), jnp.zeros((RL_N,), jnp.float32))
            out[inflight, allreduce, down] = jax.lax.scan(step, init, taus)[1]
        return out

    return jax.vmap(one)(kappa, taus, start, speed)


@pytest.mark.parametrize("case", RL_CASES)
def test_ringleader_matches_the_reference(case):
    """Round by round, the reference's counts, slots in order, times, busy_until and waste
    (an overflowing round: its flag, and the run stops there), on the draws where no discrete
    choice is within float32 rounding of flipping: over the cases, 6 x 2 x 8 = 96 runs of 3
    rounds, at least 72 of them compared (94 with these seeds)."""
    import reference_power
    import reference_ringleader as ref

    from jaxnigt.cluster.rules import ringleader

    end, table, noise, traced, modes = RL_CASES[case]
    options = ringleader.Options(end=end, table=table)
    rng = np.random.default_rng(sum(map(ord, case)))
    h = rng.uniform(0.5, 2.5, (RL_DRAWS, 1, RL_N, 1))
    xi = ref.draw_noise(rng, noise, (RL_DRAWS, RL_ROUNDS, RL_N, RL_CAP + 1))
    taus = (h * xi).astype(np.float32)
    kappa = np.stack([reference_power.random_kappa(rng, RL_N) for _ in range(RL_DRAWS)])
    traces = [reference_power.random_trace(rng, RL_N, 6) for _ in range(RL_DRAWS)]
    start, speed = (np.stack([tr[j] for tr in traces]) for j in (0, 1))
    got = _rl_rounds(kappa, taus, start, speed, options=options, modes=modes, traced=traced)
    overflowed = 0
    for (inflight, allreduce, down), sched in got.items():
        compared = 0
        for d in range(RL_DRAWS):
            power = (start[d], speed[d]) if traced else (np.zeros((RL_N, 1)), np.ones((RL_N, 1)))
            cl = reference_power.Cluster(*power, down_exchange=down)
            close = ref.Close()
            want = ref.simulate_rounds(
                cl, close, taus[d].astype(np.float64), kappa[d].astype(np.float64),
                capacity=RL_CAP, end=end, table=table, inflight=inflight, allreduce=allreduce,
            )  # fmt: skip
            if cl.margin < RL_TRACE_CLOSE or close.margin < RL_CLOSE:
                continue
            compared += 1
            for r, e in enumerate(want):
                where = f"{case} {inflight}/{allreduce}/{down} draw {d} round {r}"
                g = jax.tree.map(lambda x, d=d, r=r: np.asarray(x[d, r], np.float64), sched)
                assert bool(g.overflow) == e["overflow"], where
                if e["overflow"]:
                    overflowed += 1
                    break
                np.testing.assert_array_equal(g.counts, e["counts"], err_msg=where)
                valid = g.slot_valid.astype(bool)
                slots = list(zip(g.slot_worker[valid].astype(int), g.slot_rank[valid].astype(int),
                                 strict=True))  # fmt: skip
                assert slots == e["slots"], where
                assert valid[: len(slots)].all(), where  # the table's slots first
                scale = max(abs(e["t_end"]), 1.0)
                for field in RL_FIELDS:
                    np.testing.assert_allclose(
                        getattr(g, field), e[field], rtol=1e-5, atol=2e-5 * scale,
                        err_msg=f"{where} {field}",
                    )  # fmt: skip
        assert compared >= RL_MIN, (case, inflight, allreduce, down, compared)
    if case == "cycle_pareto_heavy_power":  # a tail index below 1 overflows 40 gradients
        assert overflowed >= 1, overflowed


def test_ringleader_is_malenia_at_M_equal_n_and_pads():
    """The registered rule's drawn rounds are Malenia's at M = n with the same capacity and
    key (times, counts, slots, busy_until); it passes the registry's padding check, and runs of
    capacity 6 and 20 on 3 workers padded to 5 rows and capacity 20 have their unpadded rounds
    under every option."""
    from jaxnigt.cluster import padding
    from jaxnigt.cluster.rules import ringleader

    m = model_lib.make_cluster_model(4, h="sqrt", noise="lognormal:1", kappa=0.3)
    key = jax.random.key(5)
    size = rules.RoundSize(M=4, capacity=24)
    got, want = (
        schedules.run_rounds(lambda mm, k, t, b, r=r: rules.get_rule(r).round(mm, k, t, b, size),
                             m, key, 5)
        for r in ("ringleader", "malenia")
    )  # fmt: skip
    for field in ("t_end", "counts", "slot_worker", "slot_rank", "slot_valid", "busy_until",
                  "time_wasted", "overflow"):  # fmt: skip
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)
    rules.check_padding("ringleader")
    m3 = model_lib.make_cluster_model(3, h=(1.0, 2.0, 3.0), noise="exponential", kappa=0.3)
    for end, table in (("every", "latest"), ("cycle", "mean"), ("cycle", "latest")):
        rule = ringleader.round_with(ringleader.Options(end=end, table=table))
        for cap in (6, 20):
            plain = schedules.run_rounds(
                lambda mm, k, t, b, cap=cap: rule(mm, k, t, b, rules.RoundSize(M=1, capacity=cap)),
                m3, key, 4,
            )  # fmt: skip
            padded_size = rules.RoundSize(M=1, capacity=20, run={"capacity": jnp.int32(cap)})
            padded = schedules.run_rounds(
                lambda mm, k, t, b: rule(mm, k, t, b, padded_size), padding.pad(m3, 5), key, 4
            )
            where = f"{end}/{table} capacity {cap}"
            np.testing.assert_array_equal(padded.counts[:, :3], plain.counts, err_msg=where)
            assert not np.asarray(padded.counts[:, 3:]).any(), where
            np.testing.assert_array_equal(padded.overflow, plain.overflow, err_msg=where)
            for field in ("t_end", "time_used", "time_wasted", "traj_wasted"):
                np.testing.assert_allclose(getattr(padded, field), getattr(plain, field),
                                           rtol=1e-6, err_msg=f"{where} {field}")  # fmt: skip
            np.testing.assert_allclose(padded.busy_until[:, :3], plain.busy_until, rtol=1e-6)
            for r in range(4):
                k = int(plain.num_slots[r])
                assert int(padded.num_slots[r]) == k, where
                np.testing.assert_array_equal(padded.slot_worker[r, :k], plain.slot_worker[r, :k])
                np.testing.assert_array_equal(padded.slot_rank[r, :k], plain.slot_rank[r, :k])


def test_ringleader_is_registered_with_its_methods_and_its_options_are_checked():
    from jaxnigt import algorithms
    from jaxnigt.cluster.rules import ringleader

    assert "ringleader" in rules.rule_names() and not rules.builtin("ringleader")
    spec = rules.get_rule("ringleader")
    assert spec.pads and spec.cluster_options == ("inflight", "down_exchange")
    assert spec.overflow == ringleader.OVERFLOW and spec.doc.startswith("Ringleader:")
    for name in ("ringleader_round_nigt", "ringleader_round_pg"):
        assert name in algorithms.NAMES
        traits = algorithms.traits(name)
        assert traits.rule == "ringleader" and traits.tuned_shapes == ()
        assert traits.options == ("malenia_capacity",) and traits.pads
    for name in ("ringleader_nigt", "ringleader_pg"):  # the paper's cycles: the event engine
        assert algorithms.traits(name).rule is None and algorithms.traits(name).pads
    assert algorithms.traits("ringleader_round_nigt").step_sizes == ("learning_rate", "eta")
    assert algorithms.traits("ringleader_round_pg").step_sizes == ("learning_rate",)
    assert algorithms.traits("ringleader_pg").step_sizes == ("learning_rate",)
    with pytest.raises(ValueError, match=r"ringleader point: got 'x'; expected one of"):
        ringleader.cycle_next(model_lib.make_cluster_model(2), jax.random.key(0), None, point="x")
    for bad in ({"end": "first"}, {"table": "sum"}):
        with pytest.raises(ValueError, match=r"ringleader (end|table): got .*expected one of"):
            ringleader.Options(**bad)
    with pytest.raises(ValueError, match="needs 5 compute times"):
        ringleader.ringleader_from_times(
            model_lib.make_cluster_model(2), jnp.ones((2, 3)), 0.0, jnp.zeros(2), capacity=4
        )


# --- Ringleader ASGD's cycles on the event engine ---------------------------------------------

CY_N, CY_NUM, CY_DRAWS = 4, 64, 8  # workers, exchanges, draws per case
# (noise, link, point, traced): 6 cases x 8 draws = 48 random runs of 64 exchanges
CY_CASES = {
    "exponential_shared_held": ("exponential", "shared", "held", False),
    "pareto_shared_held": ("pareto:1.5", "shared", "held", False),
    "lognormal_independent_held": ("lognormal:1.0", "independent", "held", False),
    "pareto_independent_current": ("pareto:1.2", "independent", "current", False),
    "deterministic_shared_held_power": ("deterministic", "shared", "held", True),
    "loglogistic_shared_current_power": ("loglogistic:1.5", "shared", "current", True),
}


@functools.partial(jax.jit, static_argnames=("noise", "link", "point", "traced"))
def _cycles(h, kappa, start, speed, *, noise, link, point, traced):
    """Per draw: the first compute times, the exchanges' draws ``xi`` and the rule's events."""
    from jaxnigt.cluster import events, power
    from jaxnigt.cluster.rules import ringleader

    base = model_lib.make_cluster_model(CY_N, noise=noise, link=link)

    def one(h, kappa, start, speed, d):
        init_key, run_key = (jax.random.fold_in(jax.random.key(k), d) for k in (3, 4))
        trace = power.make_trace(start, speed) if traced else None
        tm = dataclasses.replace(base, h=h, kappa=kappa, power=trace)
        state = ringleader.cycle_init(events.async_init(tm, init_key, 0.5))

        def step(s, _):
            return ringleader.cycle_next(tm, jax.random.fold_in(run_key, s.events), s, point=point)

        final, ev = jax.lax.scan(step, state, None, length=CY_NUM)
        xi = jax.vmap(lambda j: model_lib.sample_noise(tm, jax.random.fold_in(run_key, j), ()))(
            jnp.arange(CY_NUM)
        )
        return model_lib.sample_compute_times(tm, init_key, 1)[:, 0], xi, final, ev

    return jax.vmap(one)(h, kappa, start, speed, jnp.arange(h.shape[0]))


@pytest.mark.parametrize("case", CY_CASES)
def test_ringleader_cycles_match_the_reference(case):
    """Exchange by exchange, the reference's worker, update or not, table (the cycle's or the
    next's), cycle end, cycle and staleness exactly, and the arrival time to float32
    precision, on the draws no choice is within rounding of flipping (>= 6 of 8 per case)."""
    import reference_power
    import reference_ringleader as ref

    noise, link, point, traced = CY_CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    h = rng.uniform(0.3, 2.5, (CY_DRAWS, CY_N)).astype(np.float32)
    kappa = np.stack([reference_power.random_kappa(rng, CY_N) for _ in range(CY_DRAWS)])
    traces = [reference_power.random_trace(rng, CY_N, 8) for _ in range(CY_DRAWS)]
    start, speed = (np.stack([tr[j] for tr in traces]) for j in (0, 1))
    first, xi, final, ev = jax.tree.map(
        np.asarray,
        _cycles(h, kappa, start, speed, noise=noise, link=link, point=point, traced=traced),
    )
    compared = 0
    for d in range(CY_DRAWS):
        power = (start[d], speed[d]) if traced else (np.zeros((CY_N, 1)), np.ones((CY_N, 1)))
        cl = reference_power.Cluster(*power)
        want = ref.simulate_cycles(cl, first[d], xi[d], h[d], kappa[d], 0.5, point=point, link=link)
        if cl.margin < 5e-4:
            continue
        compared += 1
        where = f"{case} draw {d}"
        got = {
            "worker": ev.arrival.worker[d],
            "accepted": ev.accepted[d],
            "into_next": ev.extra.into_next[d],
            "rotate": ev.extra.rotate[d],
            "cycle": ev.extra.cycle[d],
            "staleness": ev.arrival.staleness[d],
        }
        for name, values in got.items():
            np.testing.assert_array_equal(values, [e[name] for e in want], f"{where} {name}")
        times = np.array([e["time"] for e in want])
        chex.assert_trees_all_close(
            ev.arrival.time[d].astype(np.float64), times, rtol=1e-5, atol=2e-5 * (1 + times.max())
        )
        # the paper's bounds: n updates a cycle, a gradient at most 2n - 2 updates old
        cycles = int(final.cycles[d])
        assert np.sum(ev.accepted[d][ev.extra.cycle[d] < cycles]) == CY_N * cycles, where
        assert ev.arrival.staleness[d].max() <= 2 * CY_N - 2, where
    assert compared >= 6, (case, compared)
    assert final.cycles.sum() >= CY_DRAWS, final.cycles  # the draws run whole cycles


def test_ringleader_table_gives_the_reference_directions():
    """The server table (sums and counts of the cycle's and the next cycle's gradients) on
    the events of a drawn run: each update's direction is the reference's mean over workers
    of each worker's mean, in float64 up to float32 rounding; with n = 1 every exchange is an
    update along its own gradient (asynchronous SGD)."""
    import reference_ringleader as ref

    from jaxnigt.cluster import events
    from jaxnigt.cluster.rules import ringleader

    for n, num in ((4, 40), (1, 6)):
        tm = model_lib.make_cluster_model(n, h="sqrt", noise="exponential", kappa=0.2)
        state = ringleader.cycle_init(events.async_init(tm, jax.random.key(0), 0.0))
        step = lambda s, _, tm=tm: ringleader.cycle_next(
            tm, jax.random.fold_in(jax.random.key(1), s.events), s
        )
        ev = jax.lax.scan(step, state, None, length=num)[1]
        grads = {"w": jax.random.normal(jax.random.key(2), (num, 3, 2)), "b": jnp.arange(num)}
        grads["b"] = grads["b"].astype(jnp.float32)[:, None] * jnp.ones((num, 2))
        table = ringleader.table_init(jax.tree.map(lambda g: g[0], grads), tm)

        def put(t, x):
            w, g, extra = x
            t, direction, takes = ringleader.table_put(t, w, g, extra)
            return t, (direction, takes)

        directions, takes = jax.lax.scan(put, table, (ev.arrival.worker, grads, ev.extra))[1]
        np.testing.assert_array_equal(takes, ev.accepted)  # the paper's point: held
        flags = [np.asarray(x) for x in (ev.arrival.worker, ev.accepted, ev.extra.into_next,
                                         ev.extra.rotate)]  # fmt: skip
        for leaf in ("w", "b"):
            want = ref.table_directions(n, *flags, np.asarray(grads[leaf], np.float64))
            for j, e in enumerate(want):
                if e is not None:
                    chex.assert_trees_all_close(
                        np.asarray(directions[leaf][j], np.float64), e, rtol=1e-5, atol=1e-6
                    )
        assert np.asarray(ev.accepted).sum() >= (2 * n if n > 1 else num)
        if n == 1:
            chex.assert_trees_all_close(directions, grads)
