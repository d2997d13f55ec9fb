"""Tests for scripts/paper/physics.py: the per-type second-half returns reported beside the
heterogeneous-physics row, and its analysis of a stored run through `jaxnigt compare`."""

import json
import shutil

import numpy as np
import pytest
from paper import page, physics

from jaxnigt.analysis import run_data


def test_per_type_second_half_is_the_time_average_over_the_second_half():
    """Two types, piecewise-constant curves held from each evaluation (the library's
    time average): type 0 at 1 until B/2 = 5 then 3 (second half 3); type 1 at 2 until 7.5,
    then 6 (second half (2.5 · 2 + 2.5 · 6) / 5 = 4)."""
    xs = np.array([0.0, 5.0, 7.5, 10.0])
    curves = {"eval_type0": ((xs, np.array([1.0, 3.0, 3.0, 3.0])),),
              "eval_type1": ((xs, np.array([2.0, 2.0, 6.0, 6.0])),)}  # fmt: skip
    method = run_data.Method(
        "m", "m", 0, 0.1, 0.1, (0,), ((xs, np.zeros(4)),), curves,
        np.zeros(1), np.zeros(1), np.full(1, 10.0), (),
    )  # fmt: skip
    run = run_data.Run(path=None, config=None, budget=10.0, methods={"m": method})
    found = physics.types(run)["m"]
    assert found["eval_type0"]["seeds"] == pytest.approx([3.0])
    assert found["eval_type1"]["median"] == pytest.approx(4.0)


def test_analyze_a_stored_run_gives_the_registered_comparison_and_the_page_row(tmp_path):
    """The heterogeneous point_mass run of the fourth edition's store stands in for the
    report run: the comparison is the registered one (Malenia NIGT vs AFedPG, second half,
    paired) and the page's row reads it."""
    src = physics.ROOT / "docs" / "results" / "fourth" / "store" / "point_mass_hetero"
    shutil.copytree(src / "seeds_00-05", tmp_path / "store" / "report")
    found = physics.analyze(tmp_path)
    a = json.loads((tmp_path / "compare.json").read_text())
    assert (a["reference"], list(a["comparisons"]), a["statistic"]) == (
        "malenia_nigt",
        ["afedpg"],
        "second_half",
    )
    assert a["comparisons"]["afedpg"]["test"] == "paired sign-flip"
    assert set(found["malenia_nigt"]) == {"eval_type0", "eval_type1"}
    assert str(tmp_path) not in (tmp_path / "compare.md").read_text()
    (tmp_path / "physics").mkdir()
    for name in ("compare.json", "types.json"):
        shutil.copy(tmp_path / name, tmp_path / "physics" / name)
    row = page.physics_row(tmp_path)
    assert "| malenia_nigt − afedpg |" in row and "| 5 | " in row
