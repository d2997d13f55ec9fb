"""Tests for jaxnigt.run.plan and ``jaxnigt plan``: the clock's trajectories per step equal what
the real trainer rolls out, and the memory figure is the compiled step's."""

import jax
import numpy as np
import pytest

from jaxnigt import algorithms, cli
from jaxnigt import config as config_lib
from jaxnigt.run import plan, sizing
from jaxnigt.run.trainer import make_trainer

BASE = {
    "env": {"name": "point_mass"},
    "cluster": {"n": 4, "h": "sqrt", "kappa": 0.5},
    "budget": 50.0,
    "seeds": 2,
}
#: Engine options, each set only where an algorithm of the config reads it (the loader
#: refuses an option no algorithm reads).
OPTIONS = {"malenia_capacity": 40, "async_block": 4, "ringmaster_R": 2}


def _raw(algorithm: str) -> dict:
    hparams = {"M": 6}
    hparams |= {k: v for k, v in OPTIONS.items() if algorithm in config_lib.readers(k)}
    return {**BASE, "hparams": hparams, "algorithms": [algorithm]}


#: Algorithms whose clock (``Algorithm.simulate_clock``) is built by the same engine code
#: with the same collection as another's: the update rule never changes when a step ends or
#: how many trajectories it rolls out. The representative's real step is compiled below; the
#: others are checked against its clock (cheap: no rollout is compiled).
SAME_CLOCK = {
    "rennala_pg": "rennala_nigt",
    "sync_pg": "sync_nigt",
    "a2c": "sync_nigt",
    "asgd": "afedpg",
    "a3c": "afedpg",
    "afedpg_vanilla": "afedpg",
    "ringleader_nigt": "afedpg",  # the cycles decide updates, not arrivals
    "ringleader_pg": "afedpg",
    "ringleader_round_pg": "ringleader_round_nigt",
    "mindflayer_pg": "mindflayer_nigt",
}
REPRESENTATIVES = [a for a in algorithms.NAMES if a not in SAME_CLOCK]


def test_algorithms_that_share_an_engine_share_its_clock():
    assert set(SAME_CLOCK) | set(REPRESENTATIVES) == set(algorithms.NAMES)
    for algorithm, representative in SAME_CLOCK.items():
        clocks = []
        for name in (algorithm, representative):
            tr = make_trainer(config_lib.from_dict(_raw(name)), name)
            trajectories, ends = tr.algorithm.simulate_clock(jax.random.key(1), 3)
            clocks.append((np.asarray(trajectories), np.asarray(ends)))
        for got, want in zip(clocks[0], clocks[1], strict=True):
            np.testing.assert_array_equal(got, want, err_msg=algorithm)


@pytest.mark.parametrize("algorithm", REPRESENTATIVES)
def test_trajectories_per_step_equal_one_real_step(algorithm):
    """Deterministic times: the planner's clock and one step of the trainer agree (one
    algorithm per clock; :data:`SAME_CLOCK` maps the others to theirs)."""
    cfg = config_lib.from_dict(_raw(algorithm))
    tr = make_trainer(cfg, algorithm)
    step_time = tr.clock(3)[1]
    state = tr.init(jax.random.key(0), tr.hyper())
    new, metrics = jax.jit(tr.step)(state)
    # the first step (ringmaster_pg's later blocks refuse more gradients than its first)
    assert float(metrics.grads) == pytest.approx(tr.clock(1)[0])
    # the first step's simulated time is the first simulated step's end
    first_end = np.asarray(tr.algorithm.simulate_clock(jax.random.key(0), 1)[1])[0]
    assert float(new.counters.time) == pytest.approx(float(first_end), rel=1e-6)
    assert step_time > 0


def test_memory_is_the_compiled_programs():
    cfg = config_lib.from_dict(_raw("rennala_nigt"))
    row = plan.plan_algorithm(cfg, "rennala_nigt")
    tr = make_trainer(cfg, "rennala_nigt")
    keys = jax.random.split(jax.random.key(0), 2)
    state = jax.jit(jax.vmap(tr.init))(keys, tr.hyper(batch=2))
    compiled = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, 1))).lower(state).compile()
    m = compiled.memory_analysis()
    want = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    assert row["memory_mb"] * 2**20 == pytest.approx(want, rel=0.10)
    # The floor needs no compile, and stays below what the compiled step needs.
    assert 0 < row["memory_floor_mb"] <= row["memory_mb"]
    assert row["steps"] == pytest.approx(cfg.budget / row["step_time"])
    assert row["env_steps_per_run"] == pytest.approx(
        row["steps"] * row["trajectories_per_step"] * tr.setup.horizon
    )


def test_plan_command_prints_a_table(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(config_lib.dump(config_lib.from_dict(_raw("afedpg"))))
    assert cli.main(["plan", str(path), "--no-memory"]) == 0
    out = capsys.readouterr().out
    assert "[jaxnigt] backend cpu" in out and "afedpg" in out and "traj/step" in out
    assert cli.main(["plan", str(path), "--set", "cluster.n=0"]) == 2


def test_every_bundled_config_plans_without_memory():
    """Every bundled config: the clock-only plan of every algorithm (no compile)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "configs"
    for path in sorted(root.glob("*.yaml")):
        cfg = config_lib.load(path)
        for algorithm in cfg.algorithms:
            tr = make_trainer(cfg, algorithm)
            per_step, step_time = tr.clock(2)
            assert per_step >= 1 and step_time > 0, (path.name, algorithm)


@pytest.mark.parametrize(("algorithm", "batch"), [("a3c", None), ("impala", None), ("impala", 2)])
def test_updates_of_the_asynchronous_actor_critics(algorithm, batch):
    """a3c updates on every arrival; impala once per learner batch (default n arrivals)."""
    raw = _raw(algorithm)
    if batch is not None:
        raw["per_algorithm"] = {"impala": {"impala_batch": batch}}
    cfg = config_lib.from_dict(raw)
    row = plan.plan_algorithm(cfg, algorithm, memory=False)
    per_update = 1 if algorithm == "a3c" else batch or cfg.cluster.n
    assert row["updates"] == pytest.approx(row["steps"] * row["trajectories_per_step"] / per_update)


LIMIT = (8 * 2**30, "the test's limit")  # fixed: the machine's own memory would vary


def test_a_huge_n_is_one_line_before_anything_of_its_size_is_built(capsys, monkeypatch):
    from jaxnigt.cluster import timing
    from jaxnigt.run import sizing

    monkeypatch.setattr(sizing, "device_limit", lambda: LIMIT)
    monkeypatch.setattr(timing, "profile_values", _small_only(timing.profile_values))
    assert cli.main(["plan", "demo", "--set", "cluster.n=1000000000", "--no-memory"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("jaxnigt: error: cluster.n = 1,000,000,000: the cluster's time")
    assert "more than the 8.0 GiB of the test's limit; the largest n that fits is about" in err[0]


def test_an_algorithm_that_cannot_fit_is_named_under_the_whole_table(capsys, monkeypatch):
    """n = 10⁵ on point_mass: the rounds fit; afedpg's step keeps a parameter version per
    arrival of its block of n (5·10⁵ · 16 KiB) and its clock (n exchanges a step, each over
    all n workers) is not simulated."""
    from jaxnigt.run import sizing

    monkeypatch.setattr(sizing, "device_limit", lambda: (2**30, "the test's limit"))
    raw = {**BASE, "cluster": {"n": 100_000, "h": "sqrt"}, "seeds": 5, "hparams": {"M": 6}}
    cfg = config_lib.from_dict({**raw, "algorithms": ["rennala_nigt", "afedpg"]})
    floors = plan.memory_floors(cfg)
    assert floors["rennala_nigt"].problem is None
    assert floors["afedpg"].problem.startswith(
        "cluster.n = 100,000: one step of afedpg (5 runs; its largest array float32[5,100000,"
    )
    assert floors["afedpg"].clock_work == 100_000**2
    rows = {r["algorithm"]: r for r in plan.plan(cfg, memory=False)}
    assert rows["afedpg"]["step_time"] is None and rows["afedpg"]["problem"]
    assert rows["rennala_nigt"]["step_time"] > 0 and rows["rennala_nigt"]["problem"] is None
    text = plan.table(list(rows.values()), cfg)
    assert "afedpg: clock not simulated" in text
    with pytest.raises(sizing.SizeError, match="one step of afedpg"):
        plan.preflight(cfg)
    few = config_lib.from_dict({**raw, "algorithms": ["rennala_nigt"]})
    assert plan.preflight(few) == []


def _small_only(profile_values):
    """``timing.profile_values`` that fails where it would build a huge n's values."""

    def values(spec, n, **kw):
        assert n <= 1000, f"{n} values built before the size check"
        return profile_values(spec, n, **kw)

    return values


@pytest.mark.parametrize(
    "algorithm, changes, name",
    [
        ("rennala_nigt", {"hparams": {"M": 10**6}}, "hparams.M = 1,000,000"),
        ("rennala_nigt", {"hparams": {"M": 6, "M_init": 10**6}}, "hparams.M_init = 1,000,000"),
        (
            "rennala_nigt",
            {"hparams": {"M": 10**6, "M_init": 10**6}},
            "hparams.M = hparams.M_init = 1,000,000",
        ),
        (
            "rennala_nigt",
            {"hparams": {"M": 6}, "per_algorithm": {"rennala_nigt": {"M": 10**6}}},
            "per_algorithm.rennala_nigt.M = 1,000,000",
        ),
        (
            "malenia_nigt",
            {"hparams": {"M": 6, "malenia_capacity": 10**8}},
            "hparams.malenia_capacity = 100,000,000",
        ),
        ("rennala_nigt", {"hparams": {"M": 6}, "seeds": 10**6}, "seeds = 1,000,000"),
        (
            "rennala_nigt",
            {"hparams": {"M": 6}, "seeds": 5 * 10**5, "grid": {"learning_rate": [0.1, 0.2]}},
            "seeds × grid points = 1,000,000",
        ),
        (
            "rennala_nigt",
            {"hparams": {"M": 6}, "env": {"name": "point_mass", "horizon": 10**7}},
            "env.horizon = 10,000,000",
        ),
        (
            "rennala_nigt",
            {"hparams": {"M": 6}, "eval": {"episodes": 10**8}},
            "eval.episodes = 100,000,000",
        ),
    ],
)
def test_the_size_check_covers_every_dimension_that_allocates(algorithm, changes, name):
    """At n = 4: M, M_init (round 0), Malenia's capacity, the runs, the horizon and the
    evaluation's episodes each make a program too large; the check before a run names the key
    (it looked at n alone up to n = 4,096, and the run ended in RESOURCE_EXHAUSTED)."""
    limit = (2**30, "the test's limit")
    cfg = config_lib.from_dict({**BASE, "algorithms": [algorithm], **changes})
    assert not plan.sized_by_n(cfg)
    with pytest.raises(sizing.SizeError) as e:
        plan.preflight(cfg, limit)
    message = str(e.value)
    assert message.startswith(f"{name}: one step of {algorithm} ("), message
    assert "more than the 1.0 GiB of the test's limit; the largest " in message, message
    # The plan says the same of the same config.
    assert plan.memory_floors(cfg, limit)[algorithm].problem == message


def test_small_configs_are_sized_from_n_alone_without_tracing():
    """Tracing every program before each run is the cost of a large config only."""
    for name in ("demo", "reacher_n10", "humanoid_n100", "hetero_humanoid_n2"):
        cfg = config_lib.load(f"configs/{name}.yaml")
        assert plan.sized_by_n(cfg), name
    cfg = config_lib.from_dict({**BASE, "algorithms": ["rennala_nigt"], "hparams": {"M": 6}})
    assert plan.trajectory_steps(cfg, "rennala_nigt") == 2 * 30 * 8  # runs × H × episodes
    assert plan.sizes(cfg, "rennala_nigt") == {
        "cluster.n": 4,
        "seeds": 2,
        "env.horizon": 30,
        "eval.episodes": 8,
        "hparams.M": 6,
    }


def test_a_compiled_step_larger_than_the_device_is_a_problem_of_the_plan():
    """Its floor fits, its compiled step does not: the plan names it (it printed the figure
    and exited 0)."""
    raw = _raw("rennala_nigt")
    cfg = config_lib.from_dict({**raw, "hparams": {"M": 10_000}})  # 154 MB of activations
    (row,) = plan.plan(cfg, limit=(2**40, "a large limit"))
    assert row["problem"] is None and row["memory_floor_mb"] < row["memory_mb"]
    between = (row["memory_floor_mb"] + row["memory_mb"]) / 2 * 2**20
    limit = (int(sizing.cluster_bytes(4) + between), "the test's limit")
    (row,) = plan.plan(cfg, limit=limit)
    assert row["problem"].startswith(
        "hparams.M = 10,000: one step of rennala_nigt (2 runs), compiled, needs at least "
    ), row["problem"]
    assert "of the test's limit; the largest hparams.M that fits is about" in row["problem"]


# ------------------------------------------------------------------ power traces

_LQR = {
    "env": {"name": "lqr1d"},
    "cluster": {"n": 4, "h": 1.0},
    "budget": 50.0,
    "seeds": 2,
    "algorithms": ["sync_nigt"],
}


def test_the_plan_prints_the_power_traces_memory(tmp_path, capsys):
    """A file's trace is one, shared by the runs; outages are drawn per run (per seed)."""
    trace = tmp_path / "t.csv"
    trace.write_text("2,1.5,0\n2,6,1\n")
    path = tmp_path / "c.yaml"
    path.write_text(config_lib.dump(config_lib.from_dict(_LQR)))
    for spec, per_run in ((f"trace:{trace}", False), ("outages:5:1", True)):
        argv = ["plan", str(path), "--no-memory", "--set", f"cluster.power={spec}"]
        assert cli.main(argv) == 0
        out = capsys.readouterr().out.splitlines()
        stretches = sizing.trace_size(spec, 4, 50.0).stretches
        size = 4 * stretches * 32
        copies = "one per run (drawn per seed)" if per_run else "one, shared by the runs"
        assert (
            f"power trace (cluster.power = {spec}): 4 workers × {stretches} stretches × 8 "
            f"float32 arrays = {size / 1024:.1f} KiB, {copies}"
        ) in out
        header = next(line for line in out if line.lstrip().startswith("algorithm"))
        row = next(line for line in out if line.lstrip().startswith("sync_nigt"))
        assert "power trace MB" in header
        assert f"{size * (2 if per_run else 1) / 2**20:,.3g}" in row.split()
    assert cli.main(["plan", str(path), "--no-memory"]) == 0
    assert "power trace" not in capsys.readouterr().out  # constant power: no trace


@pytest.mark.parametrize(
    "spec, hint",
    [
        (
            "periodic:0.5:0",
            "a longer PERIOD or a shorter cluster.power_horizon (default: the budget)",
        ),
        (
            "outages:0.5:0.5",
            "a shorter cluster.power_horizon (default: the budget), longer UP and DOWN means, or "
            "fewer seeds",
        ),
    ],
)  # fmt: skip
def test_a_power_trace_that_cannot_fit_is_one_line_before_it_is_built(
    tmp_path, capsys, monkeypatch, spec, hint
):
    """Sized from the spec alone (its trace is never laid out): the plan and the check before
    a run both refuse it, naming cluster.power, with exit 2."""
    from jaxnigt.cluster import power, power_sources

    limit = (2**20, "the test's limit")
    monkeypatch.setattr(sizing, "device_limit", lambda: limit)
    real = power_sources.periodic_trace  # laid out only over one period, to check its numbers

    def periodic(n, period, low, horizon):
        assert horizon <= period, "the periodic trace was built over its horizon"
        return real(n, period, low, horizon)

    monkeypatch.setattr(power_sources, "periodic_trace", periodic)
    monkeypatch.setattr(power, "draw_outages", lambda *a: pytest.fail("outages drawn"))
    raw = {**_LQR, "cluster": {**_LQR["cluster"], "power": spec, "power_horizon": 5000.0}}
    cfg = config_lib.from_dict(raw)
    trace = sizing.trace_size(spec, 4, 5000.0)
    size = trace.bytes(4, 2)
    each = ", one per run (2 runs: outages are drawn per run)" if trace.per_run else ""
    message = (
        f"cluster.power: the trace of {spec!r} has 4 workers × {trace.stretches:,} stretches "
        f"× 8 float32 arrays{each}: at least {sizing.size_text(size)}, more than the 1.0 MiB "
        f"of the test's limit beside the cluster's time model; {hint}"
    )
    with pytest.raises(sizing.SizeError) as e:
        plan.preflight(cfg)
    assert str(e.value) == message
    path = tmp_path / "c.yaml"
    path.write_text(config_lib.dump(cfg))
    assert cli.main(["plan", str(path), "--no-memory"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"jaxnigt: error: {message}"]


def test_a_noise_without_a_mean_is_named_under_the_table(tmp_path, capsys):
    """pareto:ALPHA / loglogistic:BETA with a tail index <= 1 have no mean: the step time is an
    average of drawn steps, and the plan says so; with a mean (index > 1) it says nothing."""
    path = tmp_path / "c.yaml"
    path.write_text(config_lib.dump(config_lib.from_dict(_raw("sync_nigt"))))
    for noise, named in (("pareto:0.8", True), ("loglogistic:1", True), ("pareto:1.5", False)):
        argv = ["plan", str(path), "--no-memory", "--set", f"cluster.noise={noise}"]
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        line = f"cluster.noise = {noise} has no mean (a tail index <= 1: h is the median time)"
        assert (line in out) == named, out
        assert (f"average of {plan.CLOCK_STEPS} drawn steps" in out) == named
