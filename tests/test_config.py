"""Tests for jaxnigt.config: loading, overrides, and one clear error per bad field."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from jaxnigt import config as config_lib
from jaxnigt.config import ConfigError

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))

_BASE = {
    "env": {"name": "point_mass"},
    "cluster": {"n": 4, "h": "sqrt"},
    "algorithms": ["rennala_nigt"],
    "budget": 10.0,
}


def _with(**changes):
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in _BASE.items()}
    for dotted, value in changes.items():
        parts = dotted.split("__")
        node = raw
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return raw


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_bundled_configs_load(path):
    cfg = config_lib.load(path)
    assert cfg.algorithms
    assert cfg.budget is not None or cfg.max_rounds is not None
    # The resolved YAML round-trips.
    again = config_lib.from_dict(yaml.safe_load(config_lib.dump(cfg)))
    assert again == cfg


def test_config_is_frozen_and_overrides_do_not_mutate():
    raw = _with()
    cfg = config_lib.from_dict(config_lib.apply_overrides(raw, ["hparams.eta=0.5"]))
    assert cfg.hparams.eta == 0.5
    assert "hparams" not in raw
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seeds = 7


def test_overrides_parse_yaml_values():
    raw = config_lib.apply_overrides(
        _with(), ["algorithms=[sync_nigt, afedpg]", "cluster.kappa=[1, 2, 3, 4]", "budget=5"]
    )
    cfg = config_lib.from_dict(raw)
    assert cfg.algorithms == ("sync_nigt", "afedpg")
    assert cfg.cluster.kappa == (1.0, 2.0, 3.0, 4.0)
    assert cfg.budget == 5.0


def test_per_algorithm_overrides_inherit_hparams():
    cfg = config_lib.from_dict(
        _with(hparams={"M": 7, "eta": 0.2}, per_algorithm={"afedpg": {"learning_rate": 0.01}})
    )
    hp = cfg.hparams_for("afedpg")
    assert (hp.M, hp.eta, hp.learning_rate) == (7, 0.2, 0.01)
    assert cfg.hparams_for("rennala_nigt") == cfg.hparams


@pytest.mark.parametrize(
    "changes, field, allowed",
    [
        ({"bogus": 1}, "config.bogus", "allowed keys"),
        ({"cluster__bogus": 1}, "cluster.bogus", "allowed keys"),
        ({"cluster__n": 0}, "cluster.n", ">= 1"),
        ({"cluster__n": "ten"}, "cluster.n", "integer"),
        ({"hparams__M": 0}, "hparams.M", ">= 1"),
        ({"hparams__M_init": 0}, "hparams.M_init", ">= 1"),
        ({"hparams__eta": 0.0}, "hparams.eta", "(0, 1]"),
        ({"hparams__eta": 1.5}, "hparams.eta", "(0, 1]"),
        ({"cluster__h": [1.0, -1.0, 1.0, 1.0]}, "cluster.h", "> 0"),
        ({"cluster__h": 0.0}, "cluster.h", "> 0"),
        ({"cluster__h": [1.0, 2.0]}, "cluster.h", "n = 4"),
        ({"cluster__h": "fastest"}, "cluster.h", "equal, sqrt"),
        ({"cluster__kappa": -1.0}, "cluster.kappa", ">= 0"),
        ({"cluster__noise": "gaussian"}, "cluster.noise", "lognormal"),
        ({"cluster__inflight": "pause"}, "cluster.inflight", "cancel"),
        ({"cluster__link": "wifi"}, "cluster.link", "independent"),
        ({"cluster__allreduce": "some"}, "cluster.allreduce", "contributors"),
        ({"env__name": "atari"}, "env.name", "reacher"),
        ({"env__horizon": 0}, "env.horizon", ">= 1"),
        ({"env__lanes": 0.0}, "env.lanes", "(0, 1]"),
        ({"env__lanes": 1.5}, "env.lanes", "(0, 1]"),
        ({"env__heterogeneous": "sign_flip", "cluster__n": 1}, "env.heterogeneous", "n >= 2"),
        ({"env__types": [0, 1, 0]}, "env.types", "one per worker"),
        ({"env__physics": {"mass": [1, 2], "size": [1]}}, "env.physics", "mass, friction, goal"),
        ({"env__physics": {"mass": [1, -2]}}, "env.physics.mass", "> 0"),
        ({"env__physics": {"mass": [1, 2], "friction": [1]}}, "env.physics", "one entry per type"),
        ({"env__physics": {"goal": [[0, 0], [1]]}}, "env.physics.goal", "(dx, dy)"),
        ({"env__physics": {"mass": [1] * 5}}, "env.physics", "n >= 5"),
        (
            {"env__physics": {"mass": [1, 2, 3]}, "env__heterogeneous": "sign_flip"},
            "env.physics",
            "3 types, but env.heterogeneous 'sign_flip' has 2",
        ),
        ({"algorithms": ["rennala_nigt", "ppo"]}, "algorithms[1]", "malenia_nigt"),
        ({"budget": 0}, "budget", "> 0"),
        ({"budget": -3.0}, "budget", "> 0"),
        (
            {"budget": 1e39},
            "budget",
            "at most 3.40282e+38 in size (the simulation computes in float32)",
        ),
        ({"cluster__power_horizon": 1e39}, "cluster.power_horizon", "float32"),
        ({"cluster__kappa": [1, 2, 3, 1e39]}, "cluster.kappa[3]", "float32"),
        ({"seeds": 0}, "seeds", ">= 1"),
        ({"eval__every": 0}, "eval.every", ">= 1"),
        ({"eval__every_time": 0.0}, "eval.every_time", "> 0"),
        ({"per_algorithm": {"ppo": {}}}, "per_algorithm.ppo", "rennala_nigt"),
    ],
)
def test_bad_values_name_field_and_allowed(changes, field, allowed):
    with pytest.raises(ConfigError) as err:
        config_lib.from_dict(_with(**changes))
    message = str(err.value)
    assert message.startswith(field), message
    assert allowed in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    "changes, field, readers",
    [
        ({"hparams__impala_batch": 4}, "hparams.impala_batch", "impala"),
        (
            {"hparams__async_block": 5},
            "hparams.async_block",
            "afedpg, afedpg_vanilla, asgd, ringmaster_pg, a3c, impala, seed_rl",
        ),
        ({"hparams__ringmaster_R": 3}, "hparams.ringmaster_R", "ringmaster_pg"),
        ({"hparams__value_coef": 1.0}, "hparams.value_coef", "a2c, a3c, impala"),
        ({"hparams__gae_lambda": 0.9}, "hparams.gae_lambda", "a2c, a3c"),
        ({"hparams__admm_rho": 3.0}, "hparams.admm_rho", "admm_pg"),
        ({"hparams__per_worker_batch": 2}, "hparams.per_worker_batch", "sync_nigt, sync_pg"),
        (
            {
                "algorithms": ["rennala_nigt", "impala"],
                "per_algorithm": {"rennala_nigt": {"async_block": 3}},
            },
            "per_algorithm.rennala_nigt.async_block",
            "impala",
        ),
    ],
)
def test_an_option_no_listed_algorithm_reads_is_an_error(changes, field, readers):
    """Family-specific keys (an engine's options, ``Traits.options``) are not silently
    ignored: one line naming the key and the algorithms that read it."""
    with pytest.raises(ConfigError) as err:
        config_lib.from_dict(_with(**changes))
    message = str(err.value)
    assert message.startswith(field) and readers in message and "\n" not in message, message


def test_options_read_by_a_listed_algorithm_or_left_at_default_are_accepted():
    ok = [
        _with(algorithms=["rennala_nigt", "impala"], hparams={"impala_batch": 2}),
        _with(algorithms=["afedpg"], per_algorithm={"afedpg": {"async_block": 8}}),
        _with(hparams={"impala_batch": None, "admm_rho": 1.0}),  # the defaults: no effect
        _with(algorithms=["a2c"], hparams={"per_worker_batch": 2, "gae_lambda": 0.9}),
    ]
    for raw in ok:
        config_lib.from_dict(raw)
    assert config_lib.readers("M") == config_lib.algorithm_names()
    assert config_lib.readers("malenia_capacity") == (
        "malenia_nigt",
        "ringleader_round_nigt",
        "ringleader_round_pg",
    )


def test_synchronous_batch_default_named_variant_and_legacy_null():
    """One trajectory per worker by default (the paper's Sync NIGT); ``match_M`` names
    Rennala's batch spread over the workers; ``null``, the default before the third
    edition, reads as ``match_M`` so old run directories keep meaning what they ran."""
    hp = config_lib.from_dict(_with(algorithms=["sync_nigt"])).hparams
    assert (hp.per_worker_batch, hp.admm_local_batch) == (1, 1)
    for given, want in ((None, "match_M"), ("match_M", "match_M"), (3, 3)):
        raw = _with(algorithms=["sync_nigt", "admm_pg"])
        raw["hparams"] = {"per_worker_batch": given, "admm_local_batch": given}
        hp = config_lib.from_dict(raw).hparams
        assert (hp.per_worker_batch, hp.admm_local_batch) == (want, want)
    with pytest.raises(ConfigError, match=r"hparams.per_worker_batch: got 'half'; expected"):
        config_lib.from_dict(_with(algorithms=["sync_pg"], hparams={"per_worker_batch": "half"}))


def test_msync_m_above_the_workers_is_an_error_on_load():
    config_lib.from_dict(_with(algorithms=["msync_nigt"], hparams={"msync_m": 4}))
    for raw in (
        _with(algorithms=["msync_nigt"], hparams={"msync_m": 5}),
        _with(algorithms=["msync_nigt"], per_algorithm={"msync_nigt": {"msync_m": 5}}),
    ):
        with pytest.raises(ConfigError, match=r"msync_m: got 5; .* at most cluster.n = 4"):
            config_lib.from_dict(raw)


@pytest.mark.parametrize("text", ["budget", "=3", "a..b=1", "budget=[1,"])
def test_malformed_set(text):
    with pytest.raises(config_lib.OverrideError, match=r"KEY=VALUE|valid YAML"):
        config_lib.apply_overrides(_with(), [text])


def test_unreadable_and_malformed_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        config_lib.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithms: [a, b\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config_lib.load(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        config_lib.load(lst)


def test_values_of_unlisted_algorithms_are_not_checked_against_the_cluster():
    """The demo carries msync_nigt's m = 10 without running it: any n of a sweep loads."""
    for n in (2, 4, 5, 16):
        cfg = config_lib.load("configs/demo.yaml", [f"cluster.n={n}"])
        assert cfg.cluster.n == n and "msync_nigt" not in cfg.algorithms
        assert cfg.per_algorithm["msync_nigt"].msync_m == 10  # kept, type- and range-checked
    with pytest.raises(ConfigError, match=r"per_algorithm.msync_nigt.msync_m: got 10; .* = 4"):
        config_lib.load("configs/demo.yaml", ["cluster.n=4", "algorithms=[msync_nigt]"])
    with pytest.raises(ConfigError, match=r"per_algorithm.msync_nigt.msync_m: got 0"):
        config_lib.load("configs/demo.yaml", ["per_algorithm.msync_nigt.msync_m=0"])


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n# and another\n", "{}\n"])
def test_a_config_that_sets_nothing_is_an_error(tmp_path, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"sets nothing .*`jaxnigt list`"):
        config_lib.load(path)
    with pytest.raises(ConfigError, match="sets nothing"):
        config_lib.read(path)


def _warnings(path, overrides=()):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = config_lib.load(path, overrides)
    return cfg, [str(w.message) for w in caught if w.category is config_lib.ConfigWarning]


def test_a_set_hparams_value_that_per_algorithm_overrides_everywhere_warns():
    cfg, said = _warnings("configs/demo.yaml", ["hparams.learning_rate=0"])
    assert cfg.hparams.learning_rate == 0.0
    assert [cfg.hparams_for(a).learning_rate for a in cfg.algorithms] == [2**-5, 2**-5, 2**-6]
    assert said == [
        "hparams.learning_rate = 0 has no effect: per_algorithm sets learning_rate for every "
        "listed algorithm (rennala_nigt 0.03125, sync_nigt 0.03125, afedpg 0.015625); set "
        "per_algorithm.<name>.learning_rate"
    ]
    # Read by an algorithm without its own value: it takes effect, no warning.
    _, said = _warnings("configs/demo.yaml", ["hparams.M=30"])
    assert said == []
    # The same as every algorithm's own value (nothing is lost), or the file itself (a
    # tuning's tuned.yaml keeps both side by side): no warning either.
    assert _warnings("configs/demo.yaml", ["hparams.eta=0.1"])[1] == []
    assert _warnings("scripts/paper/configs/reacher_sqrt.yaml")[1] == []


def test_too_few_evaluations_in_the_budget_warn_once():
    cfg, said = _warnings("scripts/paper/configs/point_mass_sqrt.yaml", ["budget=300"])
    every = cfg.eval.every_time
    assert 300 / every < config_lib.MIN_EVALUATIONS
    assert said == [
        f"eval.every_time = {every:g} leaves {int(300 // every)} evaluations in the budget of "
        f"300 (a curve and a time to a target need 20 or more); set eval.every_time <= 15"
    ]
    assert (
        _warnings(
            "scripts/paper/configs/point_mass_sqrt.yaml", ["budget=300", "eval.every_time=15"]
        )[1]
        == []
    )
    assert _warnings("configs/demo.yaml")[1] == []  # 200 evaluations


def test_merge_puts_nested_entries_over_a_base_and_changes_neither():
    base = {"env": {"name": "point_mass"}, "cluster": {"n": 10, "h": "sqrt"}, "seeds": 5}
    extra = {"cluster": {"n": 100}, "eval": {"episodes": 16}, "seeds": [0, 1]}
    out = config_lib.merge(base, extra)
    assert out == {
        "env": {"name": "point_mass"}, "cluster": {"n": 100, "h": "sqrt"}, "seeds": [0, 1],
        "eval": {"episodes": 16},
    }  # fmt: skip
    assert base["cluster"] == {"n": 10, "h": "sqrt"} and "eval" not in base  # unchanged
    out["env"]["name"] = "reacher"
    assert base["env"]["name"] == "point_mass"  # a copy, not a view


# ------------------------------------------------- what a new user typed (one line each)


def test_a_per_algorithm_override_replaces_the_files_entries_for_the_warning():
    """``--set 'per_algorithm={}'`` drops the file's entries: the check for a dead
    ``hparams`` override reads what is left (it raised KeyError on the file's entries)."""
    sets = ["cluster.n=4", "hparams.M=4", "per_algorithm={}", "algorithms=[asgd,ringmaster_pg]",
            "hparams.learning_rate=0.0001"]  # fmt: skip
    cfg, said = _warnings("configs/demo.yaml", sets)
    assert cfg.per_algorithm == {} and cfg.hparams_for("asgd").learning_rate == 0.0001
    assert said == []
    # Entries set by --set after the hparams override count as the file's would.
    per = "per_algorithm={asgd: {learning_rate: 0.1}, ringmaster_pg: {learning_rate: 0.2}}"
    sets = ["algorithms=[asgd,ringmaster_pg]", "hparams.learning_rate=0.0001", per]
    assert _warnings("configs/demo.yaml", sets)[1] == [
        "hparams.learning_rate = 0.0001 has no effect: per_algorithm sets learning_rate for "
        "every listed algorithm (asgd 0.1, ringmaster_pg 0.2); set "
        "per_algorithm.<name>.learning_rate"
    ]


@pytest.mark.parametrize(
    "data, byte",
    [("budget: 10\nname: caf\xe9\n".encode("latin-1"), "byte 0xe9 at offset 20"),
     (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "byte 0x80 at offset 136")],
)  # fmt: skip
def test_a_config_that_is_not_utf8_text_is_one_line_naming_the_file(tmp_path, data, byte):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as err:
        config_lib.load(path)
    assert str(err.value) == (
        f"config: {str(path)!r} is not UTF-8 text ({byte}); a config is a YAML file"
    )


@pytest.mark.parametrize(
    "text, sets, section",
    [
        ("name: x\nenv:\nbudget: 10\n", [], "env"),
        ("name: x\ncluster: null\n", [], "cluster"),
        ("name: x\n", ["env="], "env"),
        ("name: x\n", ["cluster=null"], "cluster"),
        ("name: x\n", ["hparams=~"], "hparams"),
        ("name: x\nper_algorithm: {afedpg: }\n", [], "per_algorithm.afedpg"),
    ],
)
def test_a_section_with_nothing_under_it_is_an_error_naming_it(tmp_path, text, sets, section):
    """Not a run of the section's defaults (reacher, n = 10) named after what was written."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        config_lib.load(path, sets)
    assert str(err.value).startswith(f"{section}: got null (a section with nothing under it)")
    assert "leave the section out" in str(err.value)


def test_a_repeated_key_is_an_error_naming_it_and_its_line(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("name: x\nbudget: 300\nenv: {name: point_mass}\nbudget: 200\n")
    with pytest.raises(ConfigError) as err:
        config_lib.load(path)
    assert str(err.value) == (
        f"config: {str(path)!r} is not valid YAML: line 4: duplicate key 'budget' (first set "
        "on line 2)"
    )
    path.write_text("name: x\ncluster:\n  n: 3\n  h: sqrt\n  n: 4\n")
    with pytest.raises(ConfigError, match=r"line 5: duplicate key 'cluster.n' \(first set on"):
        config_lib.load(path)
    with pytest.raises(config_lib.OverrideError, match=r"grid: .* \(duplicate key 'eta'\)"):
        config_lib.load("configs/demo.yaml", ["grid={eta: [0.1], eta: [0.2]}"])
    # A merge key's entries are defaults the mapping's own keys override: no repeat.
    path.write_text("base: &b {n: 3, h: sqrt}\n")
    assert config_lib.read_yaml(path) == {"base": {"n": 3, "h": "sqrt"}}
    path.write_text("name: x\ncluster: {<<: {n: 3, h: sqrt}, n: 4}\n")
    assert config_lib.load(path).cluster.n == 4


@pytest.mark.parametrize(
    "grid, message",
    [
        ("{learning_rate: [0.1, -1]}", "grid.learning_rate[1]: got -1.0; expected a finite "
         "number >= 0"),
        ("{eta: [0.5, 2]}", "grid.eta[1]: got 2.0; expected a number in (0, 1]"),
        ("{eta: [0]}", "grid.eta[0]: got 0.0; expected a number in (0, 1]"),
    ],
)  # fmt: skip
def test_grid_values_pass_their_fields_own_check(grid, message):
    with pytest.raises(ConfigError) as err:
        config_lib.load("configs/demo.yaml", [f"grid={grid}"])
    assert str(err.value) == message
    cfg = config_lib.load("configs/demo.yaml", ["grid={learning_rate: [0, 1e-3], eta: [1]}"])
    assert cfg.grid.learning_rate == (0.0, 0.001) and cfg.grid.eta == (1.0,)


def test_numbers_in_exponent_notation_are_numbers(tmp_path):
    """YAML 1.1 (PyYAML) reads ``1e3`` as a string; a config reads it as 1000, in a file
    and in ``--set`` alike, and an integer key takes an integral one."""
    sets = ["budget=1e3", "hparams.M=2E1", "seeds=5e0", "eval.every_time=5e1",
            "target_return=-2.5e-1"]  # fmt: skip
    cfg = config_lib.load("configs/demo.yaml", sets)
    assert (cfg.budget, cfg.hparams.M, cfg.seeds) == (1000.0, 20, 5)
    assert isinstance(cfg.hparams.M, int) and cfg.target_return == -0.25
    path = tmp_path / "e.yaml"
    path.write_text("name: e\nbudget: 3e2\nhparams: {learning_rate: 1e-3, M: 1e1}\n")
    cfg = config_lib.load(path)
    assert (cfg.budget, cfg.hparams.learning_rate, cfg.hparams.M) == (300.0, 0.001, 10)
    with pytest.raises(ConfigError, match=r"hparams.M: got 2.5 \(float\); expected an integer"):
        config_lib.load("configs/demo.yaml", ["hparams.M=2.5"])
    assert config_lib.load("configs/demo.yaml", ["name=1e3x"]).name == "1e3x"  # not a number


@pytest.mark.parametrize(
    "sets, start",
    [
        (["budgte=3"], "config.budgte: unknown key; did you mean 'budget'? allowed keys: ["),
        (["cluster.nn=3"], "cluster.nn: unknown key; did you mean 'n'? allowed keys: ["),
        (["hparams.learning_rat=0.1"], "hparams.learning_rat: unknown key; did you mean "
         "'learning_rate'? allowed keys: ["),
        (["per_algorithm.afedgp.eta=0.1"], "per_algorithm.afedgp: unknown algorithm; did you "
         "mean 'afedpg'? expected one of ["),
        (["algorithms=[renala_nigt]"], "algorithms[0]: got 'renala_nigt'; did you mean "
         "'rennala_nigt'? expected one of ["),
        (["cluster.inflight=cancle"], "cluster.inflight: got 'cancle'; did you mean 'cancel'? "
         "expected one of ['cancel', 'discard']"),
        (["env.name=reachr"], "env.name: got 'reachr'; did you mean 'reacher'? expected one "
         "of ["),
        (["cluster.xyzzy=1"], "cluster.xyzzy: unknown key; allowed keys: ["),  # nothing close
    ],
)  # fmt: skip
def test_a_misspelt_key_or_value_gets_a_suggestion(sets, start):
    with pytest.raises(ConfigError) as err:
        config_lib.load("configs/demo.yaml", sets)
    assert str(err.value).startswith(start), str(err.value)
    assert "\n" not in str(err.value)


def test_a_yaml_syntax_error_names_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nalgorithms: [rennala_nigt, afedpg\nbudget: 3\n")
    with pytest.raises(ConfigError) as err:
        config_lib.load(path)
    assert str(err.value) == (
        f"config: {str(path)!r} is not valid YAML: line 3, column 7: expected ',' or ']', but "
        "got ':', while parsing a flow sequence from line 2"
    )
    path.write_text("name: x\ncluster:\n  n: 3\n   h: sqrt\n")
    with pytest.raises(ConfigError, match=r"YAML: line 4, column 5: mapping values are not"):
        config_lib.load(path)
    with pytest.raises(config_lib.OverrideError) as err:
        config_lib.load("configs/demo.yaml", ["hparams.eta=[1"])
    assert str(err.value).startswith(
        "hparams.eta: value '[1' is not valid YAML (column 3: expected ',' or ']'"
    )


# ------------------------------------------------------------------ cluster.power


@pytest.mark.parametrize(
    "text,message",
    [
        (
            None,
            "trace file {path!r} does not exist; a relative trace path is read from the folder "
            "of the config file that gives it, and from the working directory when the "
            "command line gives it",
        ),
        ("dir", "trace file {path!r} cannot be read: [Errno 21] Is a directory: {path!r}"),
        (
            b"2,1,0\n\xff\n",
            "trace file {path!r} cannot be read: 'utf-8' codec can't decode byte 0xff in "
            "position 6: invalid start byte",
        ),
        ("worker,start,speed\n2,1,-0.5\n", "trace {path!r} line 2: speed must be >= 0, got -0.5"),
        ("2,-1,0\n", "trace {path!r} line 1: start must be >= 0, got -1.0"),
        ("5,1,0\n", "trace {path!r} line 1: worker must be an integer in 1..4, got '5'"),
        ("1.5,1,0\n", "trace {path!r} line 1: worker must be an integer in 1..4, got '1.5'"),
        (
            "2,1,0\n2,1,1\n",
            "trace {path!r} line 2: worker 2's starts must increase, got 1.0 after 1.0",
        ),
        ("2,soon,0\n", "trace {path!r} line 1: not a number in '2,soon,0'"),
        ("2,inf,0\n", "trace {path!r} line 1: values must be finite, got '2,inf,0'"),
        (
            "1,1,0\n2,2,0\n3,9,0\n4,3,0\n",
            "trace {path!r}: every worker is at speed 0 from t = 9 on, before the budget 10: no "
            "gradient could ever finish after it",
        ),
    ],
)
def test_a_bad_power_trace_is_one_error_naming_the_file_and_its_line(tmp_path, text, message):
    path = tmp_path / "trace.csv"
    if text == "dir":
        path.mkdir()
    elif isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as e:
        config_lib.from_dict(_with(cluster__power=f"trace:{path}"))
    assert str(e.value) == "cluster.power: " + message.format(path=str(path))


def test_a_relative_trace_path_is_the_config_files_folder_or_the_working_directorys(
    tmp_path, monkeypatch
):
    """A config in ``sub/`` naming ``trace:down.csv``, loaded from the parent: the file beside
    the config is read (it was "does not exist" without the path tried or the rule); a
    ``--set`` path is the working directory's; both are recorded absolute."""
    sub = tmp_path / "sub"
    sub.mkdir()
    raw = _with(cluster__power="trace:down.csv")
    (sub / "c.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        config_lib.load("sub/c.yaml")
    assert str(e.value) == (
        f"cluster.power: trace file {str(sub / 'down.csv')!r} does not exist; a relative trace "
        "path is read from the folder of the config file that gives it, and from the working "
        "directory when the command line gives it"
    )
    (sub / "down.csv").write_text("worker,start,speed\n2,1.5,0\n2,6,1\n")
    assert config_lib.load("sub/c.yaml").cluster.power == f"trace:{sub / 'down.csv'}"
    (tmp_path / "here.csv").write_text("2,1,0\n2,3,1\n")
    cfg = config_lib.load("sub/c.yaml", ["cluster.power=trace:here.csv"])
    assert cfg.cluster.power == f"trace:{tmp_path / 'here.csv'}"
    with pytest.raises(ConfigError) as e:
        config_lib.load("sub/c.yaml", ["cluster.power=trace:gone.csv"])
    assert str(e.value).startswith(
        f"cluster.power: trace file {str(tmp_path / 'gone.csv')!r} does not exist; a relative"
    )
    # a sweep: section's values are the file's too
    raw["sweep"] = {"over": {"cluster.power": ["trace:down.csv", "constant"]}}
    (sub / "s.yaml").write_text(yaml.safe_dump(raw))
    over = config_lib.read("sub/s.yaml")["sweep"]["over"]
    assert over["cluster.power"] == [f"trace:{sub / 'down.csv'}", "constant"]


def test_a_trace_whose_workers_all_stop_after_the_budget_or_horizon_loads(tmp_path):
    """Every worker down for good is refused only before the time the run must cover: the
    budget, or ``cluster.power_horizon`` when set."""
    path = tmp_path / "trace.csv"
    path.write_text("1,1,0\n2,2,0\n3,9,0\n4,3,0\n")
    assert config_lib.from_dict(_with(cluster__power=f"trace:{path}", budget=9.0))
    with_horizon = _with(cluster__power=f"trace:{path}", cluster__power_horizon=5.0)
    assert config_lib.from_dict(with_horizon).cluster.power_horizon == 5.0


@pytest.mark.parametrize(
    "power,changes,message",
    [
        ("outages:10:0", {}, "cluster.power: got 'outages:10:0'; DOWN must be > 0"),
        ("outages:10:-2", {}, "cluster.power: got 'outages:10:-2'; DOWN must be > 0"),
        ("outages:0:1", {}, "cluster.power: got 'outages:0:1'; UP must be > 0"),
        (
            "outages:often:1",
            {},
            "cluster.power: got 'outages:often:1'; UP must be a number, got 'often'",
        ),
        ("periodic:0:0", {}, "cluster.power: got 'periodic:0:0'; PERIOD must be > 0"),
        ("periodic:4:-1", {}, "cluster.power: got 'periodic:4:-1'; LOW must be >= 0"),
        (
            "outages:5",
            {},
            "cluster.power: 'outages:5' takes 2 argument(s); allowed: constant, outages:UP:DOWN, "
            "periodic:PERIOD:LOW or trace:FILE",
        ),
        (
            "solar",
            {},
            "cluster.power: unknown source 'solar'; allowed: constant, outages:UP:DOWN, "
            "periodic:PERIOD:LOW or trace:FILE",
        ),
        (
            "outages:5:1",
            {"budget": None, "max_rounds": 10},
            "cluster.power: 'outages:5:1' needs cluster.power_horizon (or a budget): the time "
            "it must cover",
        ),
        (
            "outages:5:1",
            {"cluster__power_horizon": 0},
            "cluster.power_horizon: got 0.0; expected a finite number > 0",
        ),
    ],
)
def test_a_bad_power_spec_is_one_error_naming_cluster_power(power, changes, message):
    with pytest.raises(ConfigError) as e:
        config_lib.from_dict(_with(cluster__power=power, **changes))
    assert str(e.value) == message


@pytest.mark.parametrize(
    "section, field",
    [
        ("sweep:\n", "sweep"),
        ("sweep: {}\n", "sweep"),
        ("sweep: {ovr: {cluster.n: [2, 3]}}\n", "sweep"),
        ("sweep: {over: {}}\n", "sweep.over"),
        ("sweep: {over: {cluster.n: 3}}\n", "sweep.over.cluster.n"),
        ("sweep: {over: {cluster.n: [2, 2]}}\n", "sweep.over.cluster.n: got 2 twice"),
    ],
)
def test_an_empty_or_malformed_sweep_section_is_refused_by_every_command(
    tmp_path, capsys, monkeypatch, section, field
):
    from jaxnigt import cli

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump(_with()) + section)
    for argv in (
        ["plan", str(cfg), "--no-memory"],
        ["plan", str(cfg), "--over", "seeds=1,2"],
        ["sweep", str(cfg), "--over", "seeds=1,2", "--out", "o"],
        ["run", str(cfg), "--out", "o"],
        ["tune", str(cfg), "--out", "o"],
    ):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"jaxnigt: error: {field}"), (argv, err)
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]


def test_a_config_with_a_sweep_section_says_that_it_uses_its_own_point(tmp_path):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump(_with()) + "sweep: {over: {cluster.n: [2, 3, 4]}}\n")
    _, said = _warnings(cfg)
    assert len(said) == 1 and "sweep: section (cluster.n: 3 values)" in said[0], said
    assert "`jaxnigt sweep`" in said[0] and "the config's own point" in said[0]


@pytest.mark.parametrize("name", ["../../escape", "a/b", "a\\b", "..", ".", ""])
def test_a_name_that_is_not_one_path_component_is_refused(tmp_path, capsys, monkeypatch, name):
    from jaxnigt import cli

    with pytest.raises(ConfigError, match=r"^name: got .*; expected one path component"):
        config_lib.from_dict(_with(name=name))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").mkdir()
    cfg = tmp_path / "x" / "c.yaml"
    cfg.write_text(yaml.safe_dump(_with(name=name)))
    assert cli.main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: name: got "), err
    assert [p.name for p in tmp_path.rglob("*")] == ["x", "c.yaml"]
    assert config_lib.from_dict(_with(name="run..2 v1.5")).name == "run..2 v1.5"


def test_physics_types_round_trip_and_count_the_types():
    from jaxnigt.envs import PhysicsTypes

    raw = _with(env__physics={"mass": [1, 2], "goal": [[0, 0], [0.05, 0]]}, eval__episodes=4)
    cfg = config_lib.from_dict(raw)
    assert cfg.env.physics == PhysicsTypes((1.0, 2.0), (1.0, 1.0), ((0.0, 0.0), (0.05, 0.0)))
    assert config_lib.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match=r"env.types: got \[0, 2, 0, 1\]; expected type ids in"):
        config_lib.from_dict({**raw, "env": {**raw["env"], "types": [0, 2, 0, 1]}})


def test_a_playground_env_without_the_extra_says_how_to_install_it(monkeypatch):
    from jaxnigt.envs import playground

    monkeypatch.setattr(playground, "available", lambda: False)
    with pytest.raises(ConfigError) as err:
        config_lib.from_dict(_with(env__name="playground/ReacherEasy"))
    assert str(err.value) == (
        "env.name: 'playground/ReacherEasy' needs MuJoCo Playground, an optional extra: "
        "pip install -e '.[playground]'"
    )
