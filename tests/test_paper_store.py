"""scripts/paper/store.py: the paper's results store travels with the repository, within its
budget, holds its programs in their canonical packed form, and counts them by the editions'
layout (what a store keeps and how: tests/test_store.py)."""

import shutil
import subprocess

import pytest
from paper import fourth
from paper import store as paper_store

from jaxnigt.studies import store


def test_paths_in_results_json_are_made_relative_to_the_repository():
    root = paper_store.ROOT
    data = {"run": f"{root}/runs/x", "pool": [f"{root}/runs/a", "/elsewhere/b"], "n": 3,
            "nested": {"p": f"{root}/docs/results"}, "text": "a sentence"}  # fmt: skip
    assert paper_store.relative_paths(data) == {
        "run": "runs/x", "pool": ["runs/a", "/elsewhere/b"], "n": 3,
        "nested": {"p": "docs/results"}, "text": "a sentence",
    }  # fmt: skip


def test_the_store_is_not_ignored_by_git():
    kept = paper_store.STORE / "s" / "look" / store.PROGRAMS / "p" / "config.yaml"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(kept)], cwd=paper_store.ROOT)
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 1, f"git ignores {kept}: the store would not travel"


def test_a_stored_block_is_packed_as_the_library_packs_it(tmp_path):
    where = fourth.stored("point_mass_equal", (0, 5))
    if where is None:
        pytest.skip("the store holds no first block of point_mass_equal")
    shutil.copytree(where, tmp_path / "block")
    store.repack(tmp_path / "block")
    for f in ("config.yaml", "summary.json", "metrics.csv.gz", "done.json"):
        assert (tmp_path / "block" / f).read_bytes() == (where / f).read_bytes(), f


def test_the_inventory_counts_the_editions_kinds(tmp_path):
    where = tmp_path / "store"
    for folder in ("sc/seeds_00-05", "sc/seeds_05-10", f"sc/{paper_store.REPORT}/programs/sc",
                   "sc/look/programs/afedpg_lr-3..-1", "sc/tune__eta/programs/p"):  # fmt: skip
        (where / folder).mkdir(parents=True)
        (where / folder / "done.json").write_text("[]\n")
    inv = paper_store.inventory(where)
    assert inv.finished == {"blocks": 2, "reports": 1, "tuning": 2}


def test_the_store_keeps_within_its_budget():
    inv = paper_store.inventory()
    size = inv.finished_mb + inv.unfinished_mb
    assert size <= paper_store.BUDGET_MB, f"{size:.1f} MB"
