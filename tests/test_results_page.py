"""scripts/results.py's page: docs/results.md is exactly what the committed analysis JSON
and the page's template give (so the page is regenerated, never edited by hand)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = str(ROOT / "scripts")


def test_the_results_page_is_regenerated_byte_for_byte_from_its_json(monkeypatch):
    monkeypatch.syspath_prepend(SCRIPTS)  # the scripts import each other from their folder
    import results as pipeline

    docs = ROOT / "docs" / "results"
    assert pipeline.page(docs) == (ROOT / "docs" / "results.md").read_text()
