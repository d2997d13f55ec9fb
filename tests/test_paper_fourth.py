"""scripts/paper/fourth.py: report configs rebuilt from the third edition's JSON, seed blocks,
and the store: a block kept in the repository is restored, never run again, and reads back
as the run it was."""

import pytest
from paper import fourth
from paper.third_scenarios import SCENARIOS

from jaxnigt.studies import store as results_store
from jaxnigt.studies import tuning


def test_the_report_config_is_the_third_editions_and_blocks_add_seeds():
    raw = fourth.report_raw("point_mass_sqrt_dim")
    assert raw["budget"] == 6000.0 and raw["eval"]["every_time"] == 30.0  # its sizing
    assert raw["per_algorithm"]["rennala_nigt"] == {
        "learning_rate": 2**-5,
        "eta": 0.1,
        "M": 30,
        "M_init": 30,
    }
    assert raw["cluster"]["link"] == "shared" and raw["seed"] == 0
    cfg = fourth.block_config("point_mass_sqrt_dim", (5, 10))
    assert (cfg.first_seed, cfg.seeds) == (5, 5)
    assert fourth.blocks("point_mass_equal") == [(0, 5), (5, 10), (10, 20), (20, 40)]
    assert SCENARIOS["reacher_sqrt"].env == "reacher"
    assert fourth.blocks("reacher_sqrt") == [(0, 5), (5, 10), (10, 20)]  # the cap: 20 seeds


NAME, BLOCK = "point_mass_equal", (0, 5)


@pytest.fixture
def first_block(monkeypatch):
    """The store's first point_mass_equal block; running any program fails the test."""
    where = fourth.stored(NAME, BLOCK)
    if where is None:
        pytest.skip("the store holds no first block of point_mass_equal")
    monkeypatch.setattr(tuning, "run_program", lambda *a, **k: pytest.fail("ran"))
    return where


def test_a_stored_block_is_restored_not_run(tmp_path, first_block):
    name, block, where = NAME, BLOCK, first_block
    store = tmp_path / "store"
    (store / name).mkdir(parents=True)
    import shutil

    shutil.copytree(where, store / name / fourth.block_name(block))
    out = tmp_path / "runs"
    assert fourth.run_block(name, block, out, store) == "restored from the store"
    assert fourth.run_block(name, block, out, store) == "kept (finished here)"
    from jaxnigt.analysis import run_data

    run = run_data.load_run(out / name / fourth.block_name(block))
    assert {m.seeds for m in run.algorithms().values()} == {(0, 1, 2, 3, 4)}
    # packing it again gives the same files
    results_store.pack(out / name / fourth.block_name(block), tmp_path / "again")
    for f in ("config.yaml", "summary.json", "done.json"):
        assert (tmp_path / "again" / f).read_bytes() == (where / f).read_bytes()
    assert "seeds_00-05 stored" in fourth.state(name, out, store)


def test_the_first_block_is_the_third_editions_report_run_when_it_ran_here(tmp_path, first_block):
    name, block, where = NAME, BLOCK, first_block
    third_out = tmp_path / "third"
    results_store.restore(where, third_out / name / name)  # a finished run of the same config
    store, out = tmp_path / "store", tmp_path / "runs"
    what = fourth.run_block(name, block, out, store, third_out=third_out)
    assert what == "the third edition's report run (same config), copied"
    assert fourth.stored(name, block, store) is not None  # and kept in the store
    # a third-edition run of another config is not taken for the block
    other = tmp_path / "other"
    results_store.restore(where, other / name / name)
    cfg = (other / name / name / "config.yaml").read_text()
    (other / name / name / "config.yaml").write_text(cfg.replace("seeds: 5", "seeds: 4"))
    with pytest.raises(pytest.fail.Exception):
        fourth.run_block(name, block, tmp_path / "runs2", tmp_path / "store2", third_out=other)


def test_no_lead_growth_where_the_environment_has_only_the_main_scenario(tmp_path):
    assert "hopper_sqrt" not in SCENARIOS and "hopper_sqrt_dim" in SCENARIOS
    assert fourth.gap("hopper", "sync_nigt", tmp_path, tmp_path) is None


def test_the_rule_on_a_null_split_from_afedpgs_real_seeds_at_n100(tmp_path):
    """The suite's small version of the page's real-data null: AFedPG's 40 stored seeds at
    n = 100 (most of which never reach the 80 % target) split into two pseudo-methods at
    random; the rule declares a side ahead at most 12 % of the time (the issue's bound) plus
    3 Monte Carlo standard errors. The page's figure: 1,000 splits, 2,000 resamples."""
    import numpy as np

    r = fourth.null("point_mass_n100", tmp_path, experiments=100, reps=200)
    afedpg = r["methods"]["afedpg"]
    assert afedpg["seeds"] == 40 and afedpg["looks"] == [5, 10, 20]
    assert afedpg["never_reached"] > 0
    assert afedpg["ahead_either_side"] <= 0.12 + 3 * np.sqrt(0.12 * 0.88 / 100)


def test_rerun_runs_one_method_of_a_stored_block_again_and_keeps_the_others(tmp_path):
    """``fourth rerun``: a copied store's block gets the method's rows anew while the other
    methods' rows keep every stored value (only their programs' summary entries are kept as
    stored; a column the library added since, ``worker_time``, is empty in them). Runs
    point_mass_equal's AFedPG on seeds 0-4 (a few seconds of training)."""
    import csv
    import gzip
    import shutil

    store = tmp_path / "store"
    where = store / NAME / fourth.block_name(BLOCK)
    shutil.copytree(fourth.STORE / NAME / fourth.block_name(BLOCK), where)

    def rows(algorithm):
        with gzip.open(where / "metrics.csv.gz", "rt", newline="") as f:
            return [r for r in csv.DictReader(f) if r["algorithm"] == algorithm]

    kept = rows("rennala_nigt")
    what = fourth.rerun_block(NAME, BLOCK, "afedpg", tmp_path / "out", store)
    assert what == "afedpg ran; stored again"
    again = rows("rennala_nigt")
    assert [{k: r[k] for k in kept[0]} for r in again] == kept and rows("afedpg")
    assert {r.get("worker_time") or "" for r in again} <= {""}
    assert fourth.rerun_block(NAME, BLOCK, "malenia_nigt", tmp_path / "out", store) == (
        f"malenia_nigt is not a method of {NAME}"
    )


def test_the_outage_scenarios_are_their_base_scenarios_with_a_trace_and_their_claim():
    """The outage rows (docs/results/fourth.md, 2026-12-05): each config is the base
    scenario's, budget, cadence and tuned values included, with its trace and down_exchange
    added; each tests its pre-registered claim by its statistic; each trace file is what its
    fixed seed draws."""
    from paper import claims, outages

    for name, base in outages.TUNED_FROM.items():
        sc = fourth.SCENARIOS[name]
        raw, plain = fourth.report_raw(name), fourth.report_raw(base)
        trace = outages.HETERO_SLOW if "hetero" in name else outages.N10
        down = "free" if name.endswith("_free") else "wait"
        assert raw["cluster"] == {**plain["cluster"], "power": trace.spec, "down_exchange": down}
        assert trace.spec == f"trace:scripts/paper/configs/outages_{trace.name}.csv"
        for key in ("budget", "eval", "env", "seed"):
            assert raw[key] == plain[key], (name, key)
        capacity = {"malenia_capacity": 1000} if "hetero" in name else {}  # a buffer, raised
        assert raw["hparams"] == {**plain["hparams"], **capacity}
        assert raw["algorithms"] == list(sc.algorithms)
        assert all(raw["per_algorithm"][a] == plain["per_algorithm"][a] for a in sc.algorithms)
        cfg = fourth.block_config(name, (5, 10))
        assert (cfg.cluster.power, cfg.cluster.down_exchange) == (trace.spec, down)
        assert fourth.blocks(name) == fourth.blocks(base)  # the base scenario's caps
    outage, hetero = claims.CLAIMS["outages"], claims.CLAIMS["hetero_outages"]
    assert fourth.SCENARIOS["reacher_sqrt_dim_outages_free"].claim == "outages"
    assert (outage.reference, outage.kind, outage.statistic) == (
        "rennala_nigt",
        "ahead",
        "time_to_80",
    )
    assert outage.methods == ("rennala_nigt", "sync_nigt", "afedpg") and outage.baselines is None
    assert fourth.SCENARIOS["point_mass_hetero_outages"].claim == "hetero_outages"
    assert (hetero.reference, hetero.baselines, hetero.statistic) == (
        "malenia_nigt",
        ("afedpg",),
        "second_half",
    )
    for trace in outages.TRACES:
        assert trace.path.read_text() == outages.trace_text(trace)
    assert round(100 * outages.down_fraction(outages.HETERO_SLOW)[2], 1) == 9.5
    assert set(outages.down_fraction(outages.HETERO_SLOW)) == {2}  # the fast worker never
    assert round(100 * sum(outages.down_fraction(outages.N10).values()) / 10, 1) == 12.1
