"""Tests for scripts/paper/rows.py: a page of registered rows, stored and analyzed under the
fifth edition's rule from the store alone."""

import dataclasses
import json
import shutil

from paper import heavy, hetero, rows


def test_the_registered_pages_name_their_configs_and_families():
    for spec in (heavy.SPEC, hetero.SPEC):
        for row, (grid, cap) in spec.rows.items():
            assert (rows.CONFIGS / f"{row}.yaml").exists(), row
            assert cap in (20, 40) and "--lr-exp" in grid[0]
            assert rows.stages(spec, row) == ("5,10,20,40" if cap == 40 else "5,10,20")
        assert sorted(r for f in spec.families.values() for r in f) == sorted(spec.rows)


def test_analyze_the_stored_blocks_gives_the_rule_and_holm_over_the_family(tmp_path):
    """The fourth edition's heterogeneous point_mass blocks stand in for a row's: the rule
    looks at 5 and 10 seeds of the two blocks restored, decides Malenia NIGT against AFedPG
    by the second-half return, a time statistic is reported beside it, and Holm over a
    family of one is the rule's p."""
    spec = dataclasses.replace(
        hetero.SPEC, name="x", baselines=("afedpg",), root=tmp_path,
        rows={"row": ((), 40)}, families={"f": ("row",)}, beside=("time_to_80",),
    )  # fmt: skip
    src = rows.ROOT / "docs" / "results" / "fourth" / "store" / "point_mass_hetero"
    store = spec.docs / "row" / "store"
    for block, name in (("seeds_00-05", "seeds_0_5"), ("seeds_05-10", "seeds_5_10")):
        shutil.copytree(src / block, store / name)
    (spec.docs / "row" / "tune").mkdir(parents=True)
    (spec.docs / "row" / "tune" / "tuning.json").write_text(json.dumps({"algorithms": []}))
    found = rows.analyze(spec, "row")
    c = found["comparisons"]["afedpg"]
    assert [look["seeds"] for look in c["looks"]][:2] == [5, 10]
    assert found["statistic"] == "second_half" and c["verdict"]
    text = (spec.docs / "row" / "sequential.md").read_text()
    assert "/tmp" not in text  # no temporary path in what is stored
    # beside the verdict: the time statistic on every stored seed, its target pooled (the
    # tuning fixed none for a return claim)
    side = found["beside"]["time_to_80"]
    assert side["statistic"] == "time_to_80" and not side["target_fixed"]
    assert (spec.docs / "row" / "beside_time_to_80.md").exists()
    family = rows.family(spec, {"row": found})["f"]
    assert family["holm_p"]["row/afedpg"] == c["p"]
