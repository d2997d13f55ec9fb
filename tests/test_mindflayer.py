"""MindFlayer beyond its rule (whose rounds tests/test_rules.py holds to the float64 reference):
the worked examples of docs/cluster_model.md ("MindFlayer: attempts under a time limit") run
as the page writes them through ``jaxnigt clock``, the clock's flags, the config's keys, and
MindFlayer NIGT / PG (jaxnigt.algorithms.mindflayer_nigt, mindflayer_pg): a round's gradients
are the clock's, a round without a success keeps the point (``skip``) or steps on a zero
gradient (``zero``), and the options say which runs share a padded program."""

from __future__ import annotations

import csv
import re
import shlex
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxnigt import algorithms
from jaxnigt import config as config_lib
from jaxnigt.cli import clock
from jaxnigt.config import ConfigError
from jaxnigt.run import padded
from jaxnigt.run.trainer import make_trainer

DOCS = Path(__file__).resolve().parent.parent / "docs" / "cluster_model.md"


def _section() -> str:
    text = DOCS.read_text()
    section = text.split("### MindFlayer: attempts under a time limit")[1]
    return re.split(r"\n##+ ", section)[0]  # up to the next heading of any level


def _examples() -> list[tuple[list[str], list[str]]]:
    """Each ``jaxnigt clock`` command of the page's MindFlayer section and the CSV it shows."""
    blocks = re.findall(r"```bash\n(.*?)\n```\s*```text\n(.*?)\n```", _section(), re.S)
    return [(shlex.split(cmd)[2:], csv_text.splitlines()) for cmd, csv_text in blocks]


def _run(argv, capsys):
    status = clock.main(argv)
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


def _with_out(argv: list[str], out: Path) -> list[str]:
    i = argv.index("--out")
    return [*argv[:i], "--out", str(out), *argv[i + 2 :]]


def test_the_pages_worked_examples_are_what_the_clock_writes(tmp_path, capsys):
    """Both commands as the page writes them; their CSVs are the page's, line for line, and
    the numbers are the hand computations the page walks through."""
    examples = _examples()
    assert len(examples) == 2
    rows = []
    for argv, want in examples:
        out = tmp_path / "f.csv"
        summary = _run(_with_out(argv, out), capsys)
        assert out.read_text().splitlines() == want
        assert "rule=mindflayer" in summary
        with open(out, newline="") as f:
            rows.append(np.array([[float(x) for x in r] for r in list(csv.reader(f))[1:]]))
    # the defaults: t_i = h_i (deterministic median 1), T* = 3, B = (3, 1, 1): T = 3, five
    # gradients, the round ends at 3.5, the second at 7
    defaults, given = rows
    np.testing.assert_allclose(defaults[:, 1:4], [[0, 3, 3.5], [3.5, 6.5, 7]])
    np.testing.assert_array_equal(defaults[:, 7:], [[3, 1, 1]] * 2)
    np.testing.assert_array_equal(defaults[:, 4], 5)
    np.testing.assert_array_equal(defaults[:, 5], 0)
    # t = (1, 2, 2.5), B = (3, 2, 1): worker 2's attempt (3 > 2.5) abandoned at 2.5; T = 4
    np.testing.assert_allclose(given[:, 1:4], [[0, 4, 4.5], [4.5, 8.5, 9]])
    np.testing.assert_array_equal(given[:, 7:], [[3, 2, 0]] * 2)
    np.testing.assert_allclose(given[:, 5], 2.5)
    assert "time_limit=1,2,2.5 attempts=3,2,1" in _section()


def test_the_clock_names_its_options_and_refuses_bad_ones(tmp_path, capsys):
    out = str(tmp_path / "c.csv")
    base = ["--n", "3", "--h", "1,2,3", "--rule", "mindflayer", "--rounds", "2", "--out", out]
    summary = _run([*base, "--M", "4"], capsys)
    assert "time_limit=median attempts=prescribed" in summary
    summary = _run([*base, "--noise", "pareto:0.8", "--time-limit", "quantile:0.7"], capsys)
    assert "time_limit=quantile:0.7 attempts=prescribed" in summary
    bad = {
        ("--time-limit", "0.5"): "--time-limit: an attempt never succeeds",
        ("--time-limit", "1,2"): "--time-limit: got 2 values; expected one per worker",
        ("--attempts", "0,0,0"): "--attempts: got [0.0, 0.0, 0.0]; expected prescribed",
        ("--time-limit", "quantile:1"): "--time-limit: got 'quantile:1'",
    }
    for flags, message in bad.items():
        assert clock.main([*base, *flags]) == 2
        assert message in capsys.readouterr().err, flags
    rennala = [*base[:-4], "--rule", "rennala", "--out", out, "--attempts", "2"]
    assert clock.main(rennala) == 2
    assert "--attempts: only with --rule mindflayer" in capsys.readouterr().err


def _config(algorithm: str, **hparams) -> config_lib.ExperimentConfig:
    return config_lib.from_dict(
        {
            "env": {"name": "point_mass"},
            "cluster": {"n": 3, "h": [1.0, 2.0, 3.0], "kappa": 0.5},
            "budget": 50.0,
            "seeds": 1,
            "algorithms": [algorithm],
            "hparams": {"M": 4, **hparams},
        }
    )


def test_the_configs_keys_are_checked_and_read_by_mindflayer_alone():
    hp = _config(
        "mindflayer_nigt", mindflayer_time_limit="quantile:0.8", mindflayer_attempts=[2, 1, 0]
    ).hparams
    assert hp.mindflayer_time_limit == "quantile:0.8" and hp.mindflayer_attempts == (2, 1, 0)
    assert config_lib.readers("mindflayer_empty") == ("mindflayer_nigt", "mindflayer_pg")
    with pytest.raises(ConfigError, match=r"hparams\.mindflayer_time_limit: got 'soon'"):
        _config("mindflayer_nigt", mindflayer_time_limit="soon")
    with pytest.raises(ConfigError, match=r"no algorithm of \['rennala_nigt'\] reads it"):
        _config("rennala_nigt", mindflayer_attempts=3)
    with pytest.raises(ValueError, match="mindflayer_attempts: got 2 values; expected one"):
        make_trainer(_config("mindflayer_nigt", mindflayer_attempts=[1, 2]), "mindflayer_nigt")
    for name in ("mindflayer_nigt", "mindflayer_pg"):
        traits = algorithms.traits(name)
        assert traits.rule == "mindflayer" and traits.pads and traits.tuned_shapes == ("M",)
        assert traits.cluster_options == ("allreduce", "down_exchange")


@pytest.mark.parametrize("algorithm", ["mindflayer_nigt", "mindflayer_pg"])
def test_a_round_rolls_out_the_clocks_gradients(algorithm):
    """Deterministic times: the first round's gradients and end are its clock's (the clock
    example of the page: b = (3, 1, 1), the round ends at 3.5), and the point moves."""
    tr = make_trainer(_config(algorithm), algorithm)
    trajectories, ends = tr.algorithm.simulate_clock(jax.random.key(0), 2)
    np.testing.assert_array_equal(np.asarray(trajectories), [5, 5])
    np.testing.assert_allclose(np.asarray(ends), [3.5, 7.0])
    state = tr.init(jax.random.key(0), tr.hyper())
    new, metrics = jax.jit(tr.step)(state)
    assert float(metrics.grads) == 5 and float(new.counters.time) == pytest.approx(3.5)
    np.testing.assert_array_equal(np.asarray(metrics.worker_counts)[:3], [3, 1, 1])
    moved = jax.tree.map(lambda a, b: not np.array_equal(a, b), state.params, new.params)
    assert any(jax.tree.leaves(moved))


@pytest.mark.parametrize("empty", ["skip", "zero"])
def test_a_round_without_a_success_skips_or_steps_on_zero(empty):
    """Every attempt abandoned (t_i = h_i / 2 under deterministic times, two attempts each):
    the clock goes on (a round of h_max = 3 and the AllReduce), nothing is rolled out; skip
    keeps the point and NIGT's state, zero takes NIGT's step on a zero gradient (round 0's
    direction d_0 = 0, so the point stays there too)."""
    cfg = _config(
        "mindflayer_nigt", mindflayer_time_limit=0.5, mindflayer_attempts=2, mindflayer_empty=empty
    )
    tr = make_trainer(cfg, "mindflayer_nigt")
    state = tr.init(jax.random.key(0), tr.hyper())
    new, metrics = jax.jit(tr.step)(state)
    assert float(metrics.grads) == 0 and float(new.counters.time) == pytest.approx(3.5)
    same = lambda a, b: all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )
    # zero: NIGT's state takes the step (its count, d_0 = 0), the point stays as d_0 = 0 does
    assert same(state.opt_state, new.opt_state) == (empty == "skip")
    assert same(state.params, new.params)
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(new.params))


def test_runs_that_differ_in_M_share_a_padded_program_and_other_options_do_not():
    algorithm = "mindflayer_nigt"
    configs = [
        _config(algorithm),
        _config(algorithm, M=6),
        _config(algorithm, mindflayer_time_limit=1.5),
        _config(algorithm, M=6, mindflayer_time_limit=1.5),
        _config(algorithm, mindflayer_attempts=2),
    ]
    assert padded.group(configs, algorithm) == [[0, 1], [2, 3], [4]]


def test_a_padded_program_gives_each_config_its_own_run():
    """MindFlayer NIGT with n = 2 (its own round 0 of M_init = 6) and n = 4 under heavy tails
    in one padded program: each config's part has its own run's clock, counts and
    evaluations (each run's prescription for its own M and workers, from its own draws)."""
    from jaxnigt.run.loop import run_algorithm

    algorithm = "mindflayer_nigt"
    base = {
        "name": "padded_mf",
        "algorithms": [algorithm],
        "seeds": 2,
        "budget": 30.0,
        "env": {"name": "point_mass"},
        "cluster": {"n": 2, "h": "sqrt", "kappa": 0.5, "noise": "lognormal:2"},
        "hparams": {"M": 4, "M_init": 6, "learning_rate": 0.05, "eta": 0.3},
        "eval": {"every": 3, "every_time": 10.0, "episodes": 2},
    }
    other = {**base, "cluster": {**base["cluster"], "n": 4}, "hparams": {**base["hparams"]}}
    other["hparams"].pop("M_init")
    configs = [config_lib.from_dict(base), config_lib.from_dict(other)]
    assert padded.group(configs, algorithm) == [[0, 1]]
    prepared = padded.prepare(configs, algorithm)
    m = run_algorithm(configs[0], algorithm, progress=False, log=None, prepared=prepared)
    for cfg, part in zip(configs, padded.split(m, configs, algorithm), strict=True):
        alone = run_algorithm(cfg, algorithm, progress=False, log=None)
        keep, ref = part["active"], alone["active"]
        assert keep.sum(axis=1).tolist() == ref.sum(axis=1).tolist()
        for field in ("sim_time", "round", "grads", "counts_max"):
            np.testing.assert_array_equal(part[field][keep], alone[field][ref], err_msg=field)
        np.testing.assert_array_equal(part["worker_counts"][keep], alone["worker_counts"][ref])
        evaluated = ~np.isnan(part["eval_return"])
        reference = alone["eval_return"][~np.isnan(alone["eval_return"])]
        np.testing.assert_allclose(part["eval_return"][evaluated], reference, rtol=1e-4, atol=1e-4)
