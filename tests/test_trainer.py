"""Tests for jaxnigt.run.trainer: vmapped seeds/grids, budget masking, determinism."""

import json
import sys
import textwrap

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from children import child_env, run, with_tests_on_path

from jaxnigt import config as config_lib
from jaxnigt.run.trainer import make_trainer

# timed_point_mass (tests/tasks.py): point_mass whose episodes end at steps drawn at reset, so
# programs compiled differently (batched vs single) can differ only by float32 rounding.
_RAW = {
    "env": {"name": "timed_point_mass"},
    "cluster": {"n": 3, "h": "sqrt", "kappa": 1.0, "noise": "exponential"},
    "algorithms": ["rennala_nigt", "afedpg"],
    "hparams": {"M": 6, "learning_rate": 0.05, "eta": 0.3},
    "budget": 50.0,
}
_CFG = config_lib.from_dict(_RAW)


def _keys(seeds):
    return jax.vmap(lambda s: jax.random.fold_in(jax.random.key(0), s))(jnp.asarray(seeds))


@pytest.fixture(scope="module", params=["rennala_nigt", "afedpg"])
def trainer(request):
    return make_trainer(_CFG, request.param)


@pytest.fixture(scope="module")
def run_batch(trainer):
    return jax.jit(jax.vmap(lambda k, h: trainer.run_chunk(trainer.init(k, h), 4)))


def test_seeds_together_equal_seeds_alone(trainer, run_batch):
    # Same batch shape (2) for both calls: pair each seed with a different partner.
    together = run_batch(_keys([0, 1]), trainer.hyper(batch=2))
    other = run_batch(_keys([1, 5]), trainer.hyper(batch=2))
    chex.assert_trees_all_close(
        jax.tree.map(lambda x: x[1], together[1]), jax.tree.map(lambda x: x[0], other[1])
    )
    single = jax.jit(lambda k, h: trainer.run_chunk(trainer.init(k, h), 4))(
        _keys([0])[0], trainer.hyper()
    )
    # Unbatched vs batched compile differently; toy physics keeps them within float noise.
    chex.assert_trees_all_close(
        jax.tree.map(lambda x: x[0], together[1]), single[1], rtol=1e-4, atol=1e-4
    )


_FRESH = textwrap.dedent(
    """
    import json, sys
    import tasks
    tasks.register_test_envs()
    import jax, jax.numpy as jnp, numpy as np
    from jaxnigt import config as config_lib
    from jaxnigt.run.trainer import make_trainer
    cfg = config_lib.from_dict(json.loads(sys.argv[1]))
    tr = make_trainer(cfg, sys.argv[2])
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(0), s))(jnp.asarray([0, 1]))
    run = jax.jit(jax.vmap(lambda k, h: tr.run_chunk(tr.init(k, h), 4)))
    _, m = run(keys, tr.hyper(batch=2))
    print("RESULT" + json.dumps({k: np.asarray(v).tolist() for k, v in m.items()}))
    """
)


def test_same_seed_same_results_in_a_fresh_process(trainer, run_batch, tmp_path):
    """The same config and seeds give bitwise the same metrics in another process (the same
    program on the same machine: no tolerance)."""
    here = jax.tree.map(np.asarray, run_batch(_keys([0, 1]), trainer.hyper(batch=2))[1])
    raw = json.dumps(config_lib.from_dict(_RAW).to_dict())
    argv = [sys.executable, "-c", _FRESH, raw, trainer.name]
    env = with_tests_on_path(child_env())  # the suite's cache: the same executable
    code, stdout, stderr = run(argv, tmp_path, env=env)
    assert code == 0, stderr[-2000:]
    line = next(x for x in stdout.splitlines() if x.startswith("RESULT"))
    there = json.loads(line[len("RESULT") :])
    assert set(there) == set(here)
    for k, v in here.items():
        np.testing.assert_array_equal(np.asarray(there[k], v.dtype), v, err_msg=k)


def test_grid_values_are_traced_not_recompiled(trainer):
    chex.clear_trace_counter()  # the lambda below is one function for chex across params
    run = jax.jit(
        jax.vmap(chex.assert_max_traces(lambda k, h: trainer.run_chunk(trainer.init(k, h), 2), n=1))
    )
    returns = []
    for lr, eta in (([0.01, 0.1], [0.5, 0.2]), ([0.3, 0.002], [0.9, 0.05])):
        hyper = {
            **trainer.hyper(batch=2),
            "learning_rate": jnp.asarray(lr),
            "eta": jnp.asarray(eta),
        }
        _, m = run(_keys([0, 0]), hyper)
        returns.append(np.asarray(m["train_return"]))
    # Different hyperparameters from the same seed give different trajectories after step 1.
    assert not np.allclose(returns[0][0, 1:], returns[0][1, 1:])
    assert not np.allclose(returns[0][:, 1:], returns[1][:, 1:])


def test_budget_masking_freezes_state(trainer):
    state = trainer.init(jax.random.key(0), trainer.hyper())
    state, m = jax.jit(lambda s: trainer.run_chunk(s, 40, budget=20.0))(state)
    active = np.asarray(m["active"])
    times = np.asarray(m["sim_time"])
    last = np.nonzero(active)[0][-1]
    assert active[: last + 1].all() and not active[last + 1 :].any()
    assert times[last - 1] < 20.0 <= times[last]
    assert float(state.counters.time) == pytest.approx(float(times[last]))


def test_chunk_and_evaluate_without_training_keeps_state(trainer):
    state = trainer.init(jax.random.key(0), trainer.hyper())
    new, _, returns = jax.jit(
        lambda s, k, t: trainer.chunk_and_evaluate(s, k, t, 3), static_argnums=()
    )(state, jax.random.key(1), False)
    chex.assert_trees_all_equal(new.params, state.params)
    chex.assert_shape(returns, (trainer.eval_episodes,))


def test_dim_is_the_policy_d_that_scales_kappa():
    """``Trainer.dim`` (what the run logs as d=) is the d of κ·d^{1/4}, for the actor-critic
    family too, whose built algorithm's parameters add the critic's."""
    from jaxnigt.rl.policy import num_params

    cfg = config_lib.from_dict(
        {"env": {"name": "lqr1d"}, "algorithms": ["a2c"],
         "cluster": {"n": 2, "kappa": 1.0, "scale_by_dim": True}}
    )  # fmt: skip
    tr = make_trainer(cfg, "a2c")
    state = jax.eval_shape(tr.init, jax.random.key(0), tr.hyper())
    assert num_params(state.params) > tr.dim  # policy + critic
    assert num_params(state.params["policy"]) == tr.dim
    np.testing.assert_allclose(tr.setup.cluster.kappa, tr.dim**0.25, rtol=1e-6)


def test_make_task_lanes_default_and_override():
    from jaxnigt import envs
    from jaxnigt.run.trainer import make_task

    assert make_task(_CFG).lanes == (envs.DEFAULT_LANES if make_task(_CFG).terminates else 1.0)
    reacher = config_lib.from_dict({**_RAW, "env": {"name": "reacher"}})
    assert make_task(reacher).lanes == 1.0  # never terminates: one lane per trajectory
    mine = config_lib.from_dict({**_RAW, "env": {"name": "point_mass", "lanes": 0.25}})
    assert make_task(mine).lanes == 0.25


def test_eval_every_time_is_steps_of_simulated_time(trainer):
    """``eval.every_time``: chunks of about that much simulated time on each algorithm's own
    clock, so a Rennala round and an asynchronous block are evaluated at the same cadence."""
    per_step, step_time = trainer.clock(16)
    _, times = trainer.algorithm.simulate_clock(jax.random.key(0), 16)
    assert step_time == pytest.approx(float(times[-1]) / 16)
    assert per_step >= 1
    assert trainer.eval_every(7, None) == 7
    assert trainer.eval_every(7, 5 * step_time) == 5
    assert trainer.eval_every(7, 0.1 * step_time) == 1


def test_the_public_clock_program_and_prepare_are_what_the_run_uses(trainer):
    """``trainer.clock_program`` is the cached program behind :meth:`Trainer.clock`;
    ``loop.prepare`` the run that ``run_algorithm`` builds (scripts/benchmarks uses both)."""
    from jaxnigt.run import loop
    from jaxnigt.run import trainer as trainer_lib

    program = trainer_lib.clock_program(trainer)
    assert program is trainer_lib.clock_program(trainer)  # cached per trainer
    per_step, ends = program(jax.random.key(0), 16)
    assert trainer.clock(16)[1] == pytest.approx(float(ends[-1]) / 16)
    assert np.asarray(per_step).shape == (16,)
    run = loop.prepare(_CFG, trainer.name, trainer)
    assert run.trainer is trainer and run.num_seeds == _CFG.seeds and run.budget == 50.0
    assert loop.prepare(_CFG, trainer.name, trainer, num_seeds=2).num_seeds == 2


def test_runner_chunks_follow_every_time(trainer):
    from jaxnigt.run import loop

    _, step_time = trainer.clock(16)
    sets = [f"eval.every_time={3 * step_time}", f"budget={7 * step_time}", "seeds=1"]
    cfg = config_lib.from_dict(config_lib.apply_overrides(_RAW, sets))
    out = loop.run_algorithm(cfg, trainer.name, trainer=trainer, progress=False, log=lambda _: 0)
    times, evaluated = out["sim_time"][0], out["evaluated"][0]
    every = 3 * step_time
    # time 0, then the end of the first round that reaches each multiple of every_time
    grid = np.floor(times / every + 1e-6)
    reaches = np.nonzero(np.diff(grid) > 0)[0] + 1
    np.testing.assert_array_equal(np.nonzero(evaluated)[0][1:-1], reaches[: evaluated.sum() - 2])
    assert evaluated[0] and evaluated[-1]


def _consts(jaxpr):
    """Every constant of a closed jaxpr and of the programs nested in it."""
    from jax.extend import core as jex_core

    out = list(getattr(jaxpr, "consts", []))
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        for param in eqn.params.values():
            for sub in param if isinstance(param, list | tuple) else (param,):
                if isinstance(sub, jex_core.ClosedJaxpr | jex_core.Jaxpr):
                    out += _consts(sub)
    return out


def test_programs_take_the_per_worker_arrays_as_arguments(trainer):
    """Trainer.program passes the time model and the worker types in: no constant of the
    compiled step has the n = 37 workers' length (closed over, they would, and XLA would
    fold expressions of them at compile time), and its results are the trainer's own."""
    n = 37
    tr = make_trainer(config_lib.from_dict({**_RAW, "cluster": {**_RAW["cluster"], "n": n}}),
                      trainer.name)  # fmt: skip
    keys, hyper = _keys([0, 1]), tr.hyper(batch=2)
    init = tr.program(lambda t, k, h: jax.vmap(t.init)(k, h))
    step = tr.program(lambda t, s: jax.vmap(lambda x: t.run_chunk(x, 2))(s))
    state = init(keys, hyper)
    jaxpr = jax.make_jaxpr(step.jitted)(step.cluster, state)
    assert not [c.shape for c in _consts(jaxpr) if n in np.shape(c)]
    closed = jax.jit(jax.vmap(lambda x: tr.run_chunk(x, 2)))
    assert any(n in np.shape(c) for c in _consts(jax.make_jaxpr(closed)(state)))
    plain = lambda tree: jax.tree.map(
        lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x,
        tree,
    )
    chex.assert_trees_all_close(plain(step(state)), plain(closed(state)), rtol=1e-4, atol=1e-4)
    chex.assert_trees_all_equal(
        plain(init(keys, hyper)), plain(jax.jit(jax.vmap(tr.init))(keys, hyper))
    )
    assert tr.clock(3) == tr.clock(3)  # cached program, same clock


@pytest.mark.parametrize("algorithm", ["seed_rl", "impala", "admm_pg"])
def test_every_engine_reads_its_per_worker_arrays_from_the_record(algorithm):
    """The cluster model is the one place per-worker arrays live: no constant of a traced
    step has the n = 37 workers' length, for the engines the test above does not build
    (central inference's per-step message times included)."""
    n = 37
    cluster = {**_RAW["cluster"], "n": n, "scale_by_dim": True}
    raw = {**_RAW, "cluster": cluster, "algorithms": [algorithm]}
    tr = make_trainer(config_lib.from_dict(raw), algorithm)
    init = tr.program(lambda t, k, h: jax.vmap(t.init)(k, h))
    state = jax.eval_shape(init.jitted, init.cluster, _keys([0]), tr.hyper(batch=1))
    step = tr.program(lambda t, s: jax.vmap(lambda x: t.run_chunk(x, 1))(s))
    jaxpr = jax.make_jaxpr(step.jitted)(step.cluster, state)
    assert not [c.shape for c in _consts(jaxpr) if n in np.shape(c)]
