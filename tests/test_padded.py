"""Tests for jaxnigt.run.padded: which configs share a padded program, its bounds, and that
its runs are each config's own run (run one at a time through the run loop as a reference)."""

from __future__ import annotations

import chex
import numpy as np
import pytest

from jaxnigt import config as config_lib
from jaxnigt.run import padded
from jaxnigt.run.loop import run_algorithm

BASE = {
    "name": "padded",
    "algorithms": ["rennala_nigt", "afedpg"],
    "seeds": 2,
    "budget": 40.0,
    "env": {"name": "point_mass"},
    "cluster": {"n": 3, "h": "sqrt", "kappa": 0.5, "noise": "straggler:0.1:10"},
    "hparams": {"M": 4, "learning_rate": 0.05, "eta": 0.3},
    "eval": {"every": 3, "every_time": 10.0, "episodes": 2},
}


def _config(**changes):
    raw = config_lib.text.plain(BASE)
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            raw[section] = {**raw[section], field: value}
        else:
            raw[section] = value
    return config_lib.from_dict(raw)


def test_configs_that_differ_in_sizes_share_a_program_within_the_cap():
    ns = (2, 3, 8, 16)
    configs = [_config(cluster__n=n) for n in ns]
    assert padded.group(configs, "rennala_nigt") == [[0, 1, 2, 3]]
    # n_max / n <= 4: n = 2 and 3 cannot join n = 16's program.
    assert padded.group(configs, "rennala_nigt", 4) == [[0, 1], [2, 3]]
    assert padded.group(configs, "rennala_nigt", 1) == [[0], [1], [2], [3]]
    # The step sizes are traced: they do not split a program; γ does.
    lr = [_config(hparams={**BASE["hparams"], "learning_rate": a}) for a in (0.1, 0.2)]
    assert padded.group(lr, "afedpg") == [[0, 1]]
    gamma = [_config(hparams={**BASE["hparams"], "gamma": g}) for g in (0.9, 0.99)]
    assert padded.group(gamma, "afedpg") == [[0], [1]]


@pytest.mark.parametrize("Ms", [(2, 8), (8, 2), (2, 3, 8, 5), (8, 5, 3, 2)])
def test_the_cap_holds_for_every_config_against_its_programs_final_largest(Ms):
    configs = [_config(hparams={**BASE["hparams"], "M": M, "M_init": M}) for M in Ms]
    groups = padded.group(configs, "rennala_nigt", 2)
    assert sorted(i for g in groups for i in g) == list(range(len(Ms)))
    for members in groups:
        M_max = max(Ms[i] for i in members)
        assert all(M_max <= 2 * Ms[i] for i in members), (groups, Ms)
    assert len(groups) == 2
    # n and M apart in opposite directions: each bounds the other's padding.
    mixed = [
        _config(cluster__n=8, hparams={**BASE["hparams"], "M": 2}),
        _config(cluster__n=2, hparams={**BASE["hparams"], "M": 8}),
    ]
    assert padded.group(mixed, "rennala_nigt", 2) == [[0], [1]]
    assert padded.group(mixed, "rennala_nigt", 4) == [[0, 1]]


def test_what_cannot_be_padded_is_a_program_of_its_own():
    configs = [_config(cluster__n=n, algorithms=["impala"]) for n in (2, 3)]
    assert not padded.paddable(configs[0], "impala")
    assert padded.group(configs, "impala") == [[0], [1]]
    traced = [_config(cluster__n=n, cluster__power="periodic:10:0.5") for n in (2, 3)]
    assert padded.group(traced, "rennala_nigt") == [[0], [1]]


def test_the_bound_config_holds_each_size_at_its_largest():
    configs = [
        _config(cluster__n=2, hparams={**BASE["hparams"], "M": 6}),
        _config(cluster__n=5, hparams={**BASE["hparams"], "M": 4, "M_init": 9}),
    ]
    bound = padded.bound_config(configs, "rennala_nigt")
    hp = bound.hparams_for("rennala_nigt")
    assert (bound.cluster.n, hp.M, hp.M_init, bound.algorithms) == (5, 6, 9, ("rennala_nigt",))
    # A round 0 of its own shape for one run: the bound has one too, even at M_init = M.
    tie = [configs[0], _config(hparams={**BASE["hparams"], "M": 6, "M_init": 4})]
    hp = padded.bound_config(tie, "rennala_nigt").hparams_for("rennala_nigt")
    assert hp.M_init != hp.M and hp.M_init >= 6
    assert [s.first for s in map(lambda c: padded.sizes(c, "rennala_nigt"), tie)] == [False, True]


# the event engine padded through its richest rule: Ringleader (its table rows of padded workers)
@pytest.mark.parametrize("algorithm", ["rennala_nigt", "malenia_nigt", "ringleader_nigt"])
def test_a_padded_program_gives_each_config_its_own_run(algorithm):
    """Runs of n = 2 (M_init = 6 != M: a round 0 of its own) and n = 4 in one program: each
    config's part has its own run's rows, clock and evaluations."""
    configs = [
        _config(cluster__n=2, hparams={**BASE["hparams"], "M_init": 6}),
        _config(cluster__n=4, hparams={**BASE["hparams"], "learning_rate": 0.1}),
    ]
    prepared = padded.prepare(configs, algorithm)
    assert prepared.batch == 4 and prepared.trainer.setup.n == 4
    m = run_algorithm(configs[0], algorithm, progress=False, log=None, prepared=prepared)
    parts = padded.split(m, configs, algorithm)
    for cfg, part in zip(configs, parts, strict=True):
        alone = run_algorithm(cfg, algorithm, progress=False, log=None)
        for key in ("grid", "seed", "learning_rate", "diverged"):
            np.testing.assert_array_equal(part[key], alone[key], err_msg=key)
        keep, ref = part["active"], alone["active"]
        assert keep.sum(axis=1).tolist() == ref.sum(axis=1).tolist()
        for field in ("sim_time", "round", "env_steps", "grads", "counts_max"):
            np.testing.assert_array_equal(part[field][keep], alone[field][ref], err_msg=field)
        chex.assert_shape(part["worker_counts"], (2, keep.shape[1], cfg.cluster.n))
        np.testing.assert_array_equal(part["worker_counts"][keep], alone["worker_counts"][ref])
        evaluated = ~np.isnan(part["eval_return"])
        np.testing.assert_array_equal(
            evaluated.sum(axis=1), (~np.isnan(alone["eval_return"])).sum(axis=1)
        )
        reference = alone["eval_return"][~np.isnan(alone["eval_return"])]
        chex.assert_trees_all_close(part["eval_return"][evaluated], reference, rtol=1e-4, atol=1e-4)
