"""scripts/paper/second.py: the second edition's report configs are what its committed
tuning JSON gives (the pipeline regenerates every one of them), and they load."""

from pathlib import Path

import pytest
import yaml
from paper import second
from paper.scenarios import DEFAULT_MODEL

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "results"
WRITTEN = [n for n in second.SCENARIOS if (second.CONFIGS / f"{n}.yaml").is_file()]


def _chosen(sc):
    chosen = {}
    for family, algorithms in sc.include:
        values = second.tuned_values(DOCS, family)
        chosen.update({a: values[a] for a in algorithms})
    chosen.update(second.tuned_values(DOCS, sc.family))
    return chosen


@pytest.mark.parametrize("name", WRITTEN)
def test_each_report_config_is_regenerated_from_the_tuning_json(name, tmp_path, monkeypatch):
    sc = second.SCENARIOS[name]
    raw = second.scenario_raw(sc, _chosen(sc))
    committed = second.CONFIGS / f"{name}.yaml"
    assert yaml.safe_load(committed.read_text()) == raw
    monkeypatch.setattr(second, "CONFIGS", tmp_path)
    second.write_config(sc, raw)
    written = (tmp_path / f"{name}.yaml").read_text()
    assert yaml.safe_load(written) == raw
    # the committed files carry comments of their own below the header the pipeline writes
    assert written.splitlines()[:2] == committed.read_text().splitlines()[:2]


def test_the_report_configs_load_and_say_where_they_came_from():
    from jaxnigt import config as config_lib

    assert len(WRITTEN) >= 12
    for name in WRITTEN:
        cfg = config_lib.load(second.CONFIGS / f"{name}.yaml")
        assert cfg.name == name and cfg.seed == 0 and cfg.budget == second.SCENARIOS[name].budget


def test_a_cluster_model_variant_retunes_only_what_it_affects(tmp_path):
    base = second.tuned_values(DOCS, "point_mass")
    both = second.tuned_values(DOCS, "point_mass", ("independent", "contributors"))
    # AFedPG sends over the server link and joins no AllReduce; Sync NIGT AllReduces
    assert set(base) == set(both) == {"rennala_nigt", "sync_nigt", "afedpg"}
    with pytest.raises(SystemExit, match="tune family 'nope' first"):
        second.tuned_values(tmp_path, "nope")
    assert second.scenario_algorithms(second.SCENARIOS["point_mass_ac"])[0] == "rennala_nigt"
    assert second.SCENARIOS["point_mass_equal"].model_dir(DEFAULT_MODEL) == "point_mass_equal"
