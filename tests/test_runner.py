"""Tests for jaxnigt.run.loop: evaluation bookkeeping and health checks of the run loop."""

import itertools
import types

import numpy as np
import pytest

from jaxnigt.run import loop, progress


def _run(last):
    return types.SimpleNamespace(
        history=[last],
        points=[{"learning_rate": 0.1, "eta": 0.5}],
        num_seeds=2,
        first_seed=0,
        diverged=np.zeros(2, bool),
        budgets=np.full(2, 10.0, np.float32),
        stalled=np.zeros(2, bool),
        stalls=np.zeros(2, bool),
    )


def _last():
    return {
        "nonfinite": np.array([[False, False], [False, True]]),
        "overflow": np.zeros((2, 2), bool),
        "active": np.ones((2, 2), bool),
        "round": np.array([[3, 4], [3, 4]]),
    }


def test_health_check_names_algorithm_seed_and_round():
    with pytest.raises(loop.RunError, match=r"afedpg: non-finite .* round 4, seed 1"):
        loop._health(_run(_last()), "afedpg", False, print)
    # on_nonfinite: mark -> the seed is frozen (budget -inf) and reported once.
    logged = []
    run = _run(_last())
    loop._health(run, "afedpg", True, logged.append)
    np.testing.assert_array_equal(run.diverged, [False, True])
    np.testing.assert_array_equal(run.budgets, [10.0, -np.inf])
    loop._health(run, "afedpg", True, logged.append)
    assert logged == ["[jaxnigt] afedpg: seed 1 diverged (marked, others go on)"]
    last = _last()
    last["active"][1, 1] = False  # a no-op step after the budget does not count
    loop._health(_run(last), "afedpg", False, print)


def test_overflow_always_stops():
    last = _last()
    last["nonfinite"][:] = False
    last["overflow"][0, 0] = True
    with pytest.raises(loop.RunError, match=r"capacity overflow .* at round 3, seed 0"):
        loop._health(_run(last), "malenia_nigt", True, print)
    with pytest.raises(loop.RunError, match=r"impala: the learner fell .* at round 3"):
        loop._health(_run(last), "impala", True, print)


def _resumable(monkeypatch, steps_done):
    import jax
    import jax.numpy as jnp

    from jaxnigt.run import checkpoint

    tr = types.SimpleNamespace(first_step=None)
    run = loop.Run(
        trainer=tr,
        points=[{}],
        num_seeds=2,
        first_seed=0,
        keys=jax.random.split(jax.random.key(0), 2),
        hyper={"x": jnp.zeros(2)},
        mesh=None,
        program=None,
        init=jax.jit(jax.vmap(lambda k, h: jnp.zeros(()))),
        budget=1.0,
        max_rounds=1.0,
        budgets=np.ones(2, np.float32),
        diverged=np.zeros(2, bool),
        every=3,
    )
    history = {"active": np.ones((2, 1 + steps_done), bool)}  # step 0, then the chunks
    found = ("run/checkpoints/afedpg/chunk_000002", jnp.zeros(2), history, 2)
    monkeypatch.setattr(checkpoint, "restore_latest", lambda *a: found)
    return run


def test_resume_refuses_a_checkpoint_of_another_chunk_length(monkeypatch):
    """Chunks of ``eval.every`` steps: a checkpoint written with chunks of another length
    cannot continue the same evaluation sequence."""
    from jaxnigt.run import checkpoint

    logs = []
    loop.start_or_resume(_resumable(monkeypatch, 6), "run", True, "afedpg", logs.append)
    assert logs and "resumed" in logs[0]
    with pytest.raises(checkpoint.CheckpointError, match="chunks are 3 steps"):
        loop.start_or_resume(_resumable(monkeypatch, 8), "run", True, "afedpg", logs.append)


def test_runs_of_one_experiment_share_their_programs():
    """Configs that differ only in seeds, budget or name share one trainer and its jitted
    programs (a resume or a second run traces nothing new); any other difference does not."""
    from jaxnigt import config as config_lib

    raw = {
        "env": {"name": "lqr1d"},
        "cluster": {"n": 2},
        "algorithms": ["sync_pg"],
        "budget": 5.0,
        "seeds": 2,
    }
    a = loop.programs_for(config_lib.from_dict(raw), "sync_pg", 2)
    b = loop.programs_for(
        config_lib.from_dict({**raw, "budget": 9.0, "seeds": 3, "seed": 7, "name": "x"}),
        "sync_pg",
        3,
    )
    assert b is a and b.chunk is a.chunk and b.init is a.init
    other = config_lib.from_dict({**raw, "cluster": {"n": 3}})
    assert loop.programs_for(other, "sync_pg", 2).trainer.setup.n == 3
    lr = config_lib.from_dict({**raw, "hparams": {"learning_rate": 0.5}})
    assert loop.programs_for(lr, "sync_pg", 2) is not a


def test_the_progress_rate_counts_from_the_end_of_compilation():
    """The bar's rate and time left are counted from ``start`` (called once the programs are
    compiled), from where the bar stands then, not from its creation."""
    bar = progress.Progress(True, 100.0, "x (1 of 2)", unit=" sim-t")
    created = bar.bar.start_t
    bar.update(10.0, round=1, eval_median="-3.00")
    bar.start()
    assert bar.bar.initial == bar.bar.n == 10.0 and bar.bar.start_t >= created
    first = bar.bar.start_t
    bar.update(20.0)
    bar.start(once=True)  # started already: keeps counting from the first start
    assert bar.bar.start_t == first and bar.bar.initial == 10.0
    assert "sim-t" in str(bar.bar) and "x (1 of 2)" in str(bar.bar)
    bar.close()


@pytest.mark.parametrize("algorithm", ["sync_pg", "afedpg"])
def test_seeds_added_later_equal_the_same_seeds_run_together(algorithm):
    """Seed s's run does not depend on which seeds share its program: seeds 2 and 3 run as
    ``first_seed: 2, seeds: 2`` are seeds 2 and 3 of a run of seeds 0 … 3 (close, not bitwise:
    the batch sizes differ)."""
    import chex

    from jaxnigt import config as config_lib

    raw = {
        "env": {"name": "lqr1d"},
        "cluster": {"n": 3, "noise": "exponential"},
        "algorithms": [algorithm],
        "budget": 6.0,
        "seeds": 4,
        "eval": {"every": 2, "episodes": 2},
    }
    whole = loop.run_algorithm(config_lib.from_dict(raw), algorithm, progress=False, log=None)
    late = config_lib.from_dict({**raw, "seeds": 2, "first_seed": 2})
    added = loop.run_algorithm(late, algorithm, progress=False, log=None)
    np.testing.assert_array_equal(added["seed"], [2, 3])
    np.testing.assert_array_equal(whole["seed"], [0, 1, 2, 3])
    for k in ("sim_time", "eval_return"):
        chex.assert_trees_all_close(added[k], whole[k][2:], rtol=1e-5, atol=1e-5)
    assert not np.allclose(whole["eval_return"][0], whole["eval_return"][2])  # seeds differ


# One engine of each kind: rounds (Rennala NIGT, ADMM), per-arrival (AFedPG, Ringmaster's
# bounded delay), the central-inference per-step clock (SEED RL) and IMPALA's learner.
_ENGINES = ["rennala_nigt", "admm_pg", "afedpg", "ringmaster_pg", "seed_rl", "impala"]


@pytest.mark.parametrize("algorithm", _ENGINES)
def test_every_engine_is_evaluated_on_the_time_grid(algorithm):
    """With ``eval.every_time`` = Δ, evaluation k of every engine is at the end of the first
    round (or arrival, or update) that reaches the k-th multiple of Δ after the previous
    one: never before it, and later by at most one round or one arrival.  Compute times are
    deterministic (h_i = √i: one arrival takes at most √3), and an asynchronous block of 12
    arrivals is longer than Δ, so a chunk cut by steps alone would miss grid points."""
    import math

    from jaxnigt import config as config_lib

    every, budget = 2.5, 12.0
    rounds = algorithm in ("rennala_nigt", "admm_pg")
    hparams = {"M": 2, "M_init": 2} if algorithm == "rennala_nigt" else {}
    raw = {
        "env": {"name": "lqr1d"},
        "cluster": {"n": 3, "h": "sqrt", "noise": "deterministic", "kappa": 0.0},
        "algorithms": [algorithm],
        "budget": budget,
        "seeds": 1,
        "eval": {"every": 1, "every_time": every, "episodes": 2},
        "hparams": hparams if rounds else {"async_block": 12},
    }
    out = loop.run_algorithm(config_lib.from_dict(raw), algorithm, progress=False, log=None)
    active = out["active"][0]
    times = out["sim_time"][0][~np.isnan(out["eval_return"][0]) & active]
    step = np.nanmax(out["round_time"][0][active][1:])
    one = step if rounds else math.sqrt(3)
    assert times[0] == 0.0 and times[-1] >= budget
    for before, t in itertools.pairwise(times):
        grid = min((math.floor(before / every + 1e-6) + 1) * every, budget)
        assert grid - 1e-4 <= t <= grid + one + 1e-4, (before, t, grid, one)
    assert np.max(np.diff(times)) <= 1.1 * every + one + 1e-4


@pytest.mark.parametrize("every_time", [None, 2.0])
def test_a_round_that_can_never_end_stops_the_run_at_its_last_finite_time(tmp_path, every_time):
    """Sync NIGT waits for every worker; worker 2 goes down for good at t = 5 (h = 1: rounds
    end at 1, 2, ..., 5), so round 6 never ends (its simulated time is not finite).  The run
    stops at t = 5 with one line, its last evaluation is of the state at t = 5, and every row
    it keeps is finite: the run's CSV and summary read as a run that ended at 5.  Chunks by
    steps (a scan) and on the time grid (a while loop) alike."""
    from jaxnigt import config as config_lib
    from jaxnigt.run import metrics

    trace = tmp_path / "down.csv"
    trace.write_text("worker,start,speed\n2,5,0\n")
    raw = {
        "env": {"name": "lqr1d"},
        "cluster": {"n": 3, "h": 1.0, "power": f"trace:{trace}"},
        "algorithms": ["sync_nigt"],
        "budget": 100.0,
        "seeds": 2,
        "eval": {"every": 2, "every_time": every_time, "episodes": 2},
    }
    logged = []
    out = loop.run_algorithm(
        config_lib.from_dict(raw), "sync_nigt", progress=False, log=logged.append
    )
    assert logged[-1] == (
        "[jaxnigt] sync_nigt: no round can end after t = 5 (a worker it waits for is down for "
        "good: cluster.power); the run stops there"
    )
    assert sum("no round can end" in line for line in logged) == 1
    active = out["active"]
    for b in range(2):
        np.testing.assert_array_equal(out["sim_time"][b][active[b]], [0, 1, 2, 3, 4, 5])
        assert out["evaluated"][b][active[b]][-1]  # evaluated at t = 5
        assert np.isfinite(out["eval_return"][b][active[b]][-1])
    rows = metrics.metric_rows("sync_nigt", out)
    assert [r["sim_time"] for r in rows if r["seed"] == 0] == ["0", "1", "2", "3", "4", "5"]
    assert not out["diverged"].any()


def test_seeds_whose_round_never_ends_stop_and_the_others_go_on():
    """The bookkeeping alone: a chunk that found seed 1's next step never ends stops seed 1
    (budget -inf, one line naming it) while seed 0 goes on."""
    run = _run(_last())
    run.stalls = np.array([False, True])
    run.state = types.SimpleNamespace(counters=types.SimpleNamespace(time=np.array([3.0, 7.5])))
    run.trainer = types.SimpleNamespace(algorithm=types.SimpleNamespace(trajectories_per_update=1))
    logged = []
    loop._stalls(run, "afedpg", logged.append)
    assert logged == [
        "[jaxnigt] afedpg: no update can end after t = 7.5 (every worker it waits for is down "
        "for good: cluster.power); seed 1 stop there (the others go on)"
    ]
    np.testing.assert_array_equal(run.budgets, [10.0, -np.inf])
    loop._stalls(run, "afedpg", logged.append)  # reported once
    assert len(logged) == 1
