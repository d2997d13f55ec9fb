"""scripts/paper/page.py: docs/results.md is exactly what the committed analysis JSON and the
page's template give (so the page is regenerated, never edited by hand), and each table is
made from its JSON alone (fixture JSON in a temporary folder)."""

import json
from pathlib import Path

import pytest
from paper import claims, fourth_page, page

ROOT = Path(__file__).resolve().parent.parent


def test_the_results_pages_are_regenerated_byte_for_byte_from_their_json():
    docs = ROOT / "docs" / "results"
    pages = page.pages(docs)
    assert set(pages) == {
        ROOT / "docs" / "results.md",
        docs / "third_edition.md",
        docs / "second_edition.md",
    }
    for path, text in pages.items():
        assert text == path.read_text(), f"regenerate {path}: python scripts/paper page"
    assert len(pages[ROOT / "docs" / "results.md"].encode()) <= 40_000  # one screen first


def _comparison(effect, avg, ratio50, outcome, needed=None):
    return {
        "effect": effect,
        "average_return_difference": avg,
        "outcome": outcome,
        "needed_seeds": needed,
        "identical": False,
        "time_to_target_ratio": {"0.5": ratio50, "0.8": effect},
    }


def _iv(e, lo, hi):
    return {"estimate": e, "low": lo, "high": hi}


def _analysis(claim="equal", verdict="refuted"):
    return {
        "reference": "rennala_nigt",
        "claim": claim,
        "statistic": "average",
        "budget": 150.0,
        "improvement_over_spread": 12.4,
        "verdict": verdict,
        "scenario": "point_mass_equal",
        "algorithms": {
            "rennala_nigt": {"time_to_target": {"0.8": 38.0}, "seeds": 5},
            "sync_nigt": {"time_to_target": {"0.8": None}, "seeds": 5},
        },
        "comparisons": {
            "sync_nigt": _comparison(
                _iv(-1.94, -3.56, -0.55),
                _iv(-1.94, -3.56, -0.55),
                _iv(1.1, 0.9, 1.3),
                "baseline ahead",
            )
        },
        "tuned": {
            "rennala_nigt": {"learning_rate": 2**-5, "eta": 0.1, "M": 20},
            "sync_nigt": {"learning_rate": 2**-6, "eta": 0.1, "M": 20},
        },
    }


def test_the_tables_come_from_the_fixture_json_alone(tmp_path):
    (tmp_path / "point_mass_equal.json").write_text(json.dumps(_analysis()))
    rows = page.verdict_rows(tmp_path)
    assert len(rows) == 3  # the header, its rule and the one analysed run
    assert "`point_mass_equal` | shared / all | rennala_nigt tied with sync_nigt" in rows[2]
    assert "| 12 |" in rows[2]  # improvement / spread, rounded
    (row,) = page.comparison_rows(tmp_path)[2:]
    assert "-1.94 [-3.56, -0.55]" in row and "1.10 [0.90, 1.30]" in row
    third = tmp_path / "third"
    third.mkdir()
    (third / "point_mass_equal.json").write_text(json.dumps(_analysis()))
    (row,) = page.third_rows(tmp_path)[2:]
    assert "Δ average return: **-1.94 [-3.56, -0.55]**" in row
    assert "| 38 / ∞ |" in row  # median times to 80 %: the baseline never reached it
    assert row.endswith("| **refuted** | refuted |")  # one step back: the second edition's
    # each run's budget and tuned values in a table of their own, one row per run
    (run,) = page.third_runs(tmp_path)[2:]
    assert run == (
        "| `point_mass_equal` | shared / all | 150 "
        "| rennala_nigt $2^{-5}$, η 0.1, M 20; sync_nigt $2^{-6}$, η 0.1 |"
    )


def test_a_template_with_an_unknown_placeholder_is_refused(tmp_path):
    template = tmp_path / "page.md"
    template.write_text("# Results\n\n{{VERDICTS}}\n\n{{NO_SUCH_TABLE}}\n")
    with pytest.raises(SystemExit, match="NO_SUCH_TABLE"):
        page.page(tmp_path, template)
    template.write_text("# Results\n\n{{VERDICTS}}\n")
    text = page.page(tmp_path, template)
    assert text.startswith("<!-- Written by") and "| claim | scenario |" in text


def _fourth_equal(docs: Path, p: float | None = None) -> None:
    """The fourth edition's JSON of point_mass_equal in ``docs``: refuted at 10 seeds."""
    look = {
        "seeds": 10,
        "interval": _iv(-2.0, -3.8, -0.2),
        "margin": [-2.6, 2.6],
        "outcome": "baseline ahead",
    }
    comparison = {"verdict": "refuted", "seeds": 10, "looks": [look]}
    if p is not None:
        comparison["p"] = p
    fourth = {
        "reference": "rennala_nigt",
        "statistic": "average",
        "claim": "tie",
        "comparisons": {"sync_nigt": comparison},
    }
    (docs / "fourth").mkdir(exist_ok=True)
    (docs / "fourth" / "point_mass_equal.json").write_text(json.dumps(fourth))


def _comparisons(docs: Path) -> int:
    """The opening table's comparisons (one a scenario not run)."""
    return sum(len(fourth_page.cells(docs, sc)) for r in claims.ROWS for sc in r.scenarios)


def test_the_opening_table_takes_each_scenario_from_its_newest_edition(tmp_path):
    (tmp_path / "third").mkdir()
    (tmp_path / "third" / "point_mass_equal.json").write_text(json.dumps(_analysis()))
    (row,) = [c for c in fourth_page.cells(tmp_path, "point_mass_equal")]
    assert row["edition"] == "third" and row["verdict"] == "sync_nigt ahead"  # its outcome
    n = _comparisons(tmp_path)
    assert fourth_page.editions(tmp_path) == (
        f"A **bold** verdict is the fourth edition's; a plain one (1 of {n}) is an earlier "
        f"edition's at 5 seeds, not yet rerun under the rule; {n - 1} of {n} are not run at CPU "
        "scale."
    )
    _fourth_equal(tmp_path)
    (row,) = fourth_page.cells(tmp_path, "point_mass_equal")
    assert row["edition"] == "fourth" and row["verdict"] == "refuted" and row["seeds"] == 10
    text = fourth_page.table(tmp_path)
    head, _rule, first, second, *_ = text.splitlines()
    # the opening table: what the first screen needs, the paper's row named once (then ″)
    assert head == (
        "| the paper's row | comparison | verdict | effect [interval] | seeds "
        "| Holm, family-wise 10 % | AdaStop |"
    )
    # no p-value in this JSON, no AdaStop check: both columns empty
    assert first == (
        "| **Equal compute and communication** | `point_mass_equal`: rennala_nigt "
        "vs sync_nigt | **refuted** | Δ average return: -2.00 [-3.80, -0.20] | 10 | – | – |"
    )
    assert second == "| ″ | `reacher_equal` | not run at CPU scale | – | – | – | – |"
    assert "〃" not in text  # a ditto mark that common fonts lack
    assert "| ″ | `walker2d_sqrt_dim` ‡ | not run at CPU scale |" in text  # ‡: a reduced grid
    # one more column is one more entry of the table's columns
    extra = fourth_page.Column("edition", lambda r, c, first: c["edition"] or "–")
    wider = fourth_page.table(tmp_path, (*fourth_page.OPENING, extra)).splitlines()
    assert wider[0].endswith("| AdaStop | edition |") and wider[1].endswith("| --- | --- |")
    assert wider[2] == first.removesuffix(" |") + " | fourth |"


def test_the_opening_tables_holm_and_adastop_columns_then_the_rows_settings(tmp_path):
    # the family-wise column: Holm's adjusted p over the table's fourth-edition comparisons;
    # the AdaStop column: "agrees", or AdaStop's own decision
    _fourth_equal(tmp_path, p=0.004)
    check = {"decision": "equal", "ahead": None, "seeds": 10, "agree": False}
    ada = {"scenarios": {"point_mass_equal": {"comparisons": {"sync_nigt": check}}}}
    (tmp_path / "fourth" / "adastop.json").write_text(json.dumps(ada))
    first = fourth_page.table(tmp_path).splitlines()[2]
    assert first.endswith("| 10 | holds (p = 0.004) | **differs**: no difference (10 seeds) |")
    assert fourth_page.family(tmp_path) == {("point_mass_equal", "sync_nigt"): 0.004}
    # the rest: each row's setting, what the paper observed, its scenarios (and their edition)
    settings = fourth_page.settings(tmp_path).splitlines()
    assert settings[0] == "| the paper's row | setting | the paper observed | scenarios |"
    assert settings[2] == (
        "| **Equal compute and communication** | $n = 10$, $h_i = 1$, "
        "$\\kappa_i = 0$ | the three methods perform about the same "
        "| `point_mass_equal`, `reacher_equal` (not run at CPU scale) |"
    )
    assert "lead growth `point_mass_sqrt` → `point_mass_sqrt_dim` (not run" in settings[4]
    # one comparison of the fourth edition, the other scenarios not run
    n = _comparisons(tmp_path)
    assert fourth_page.editions(tmp_path) == (
        f"A **bold** verdict is the fourth edition's; {n - 1} of {n} are not run at CPU scale."
    )
    png = fourth_page.forest(tmp_path, tmp_path / "forest.png")
    assert png.stat().st_size > 1000


def test_the_outage_rows_are_a_table_and_a_holm_family_of_their_own(tmp_path):
    """The outage rows (paper.claims.OUTAGE_ROWS) are not the paper's: their table has the
    opening table's columns but AdaStop, their Holm family is theirs alone, and their
    settings table shows what the clock predicted where the paper's observation stands."""
    _fourth_equal(tmp_path, p=0.004)
    look = {"seeds": 5, "interval": _iv(1.5, 1.3, 1.7), "margin": [0.8, 1.25]}
    comparison = {"verdict": "confirmed", "seeds": 5, "looks": [look], "p": 0.004}
    outage = {
        "reference": "rennala_nigt",
        "statistic": "time_to_80",
        "claim": "ahead",
        "comparisons": {"sync_nigt": comparison},
    }
    (tmp_path / "fourth" / "point_mass_sqrt_dim_outages.json").write_text(json.dumps(outage))
    rows = claims.OUTAGE_ROWS
    head, _rule, first, *rest = fourth_page.table(
        tmp_path, fourth_page.OUTAGE_COLUMNS, rows
    ).splitlines()
    assert head == (
        "| row | comparison | verdict | effect [interval] | seeds | Holm, family-wise 10 % |"
    )
    assert first == (
        "| **A worker that disconnects** | `point_mass_sqrt_dim_outages`: rennala_nigt vs "
        "sync_nigt | **confirmed** | time-to-80 % ratio: 1.50 [1.30, 1.70] | 5 "
        "| holds (p = 0.004) |"
    )
    assert rest[0] == "| ″ | `reacher_sqrt_dim_outages` | not run at CPU scale | – | – | – |"
    # two families: neither table's Holm reads the other's comparisons
    assert fourth_page.family(tmp_path, rows) == {
        ("point_mass_sqrt_dim_outages", "sync_nigt"): 0.004
    }
    assert fourth_page.family(tmp_path) == {("point_mass_equal", "sync_nigt"): 0.004}
    settings = fourth_page.settings(tmp_path, rows, fourth_page.OUTAGE_HEADERS).splitlines()
    assert settings[0] == "| row | setting | predicted before the runs (slowdown) | scenarios |"
    assert "Sync NIGT 2.55× (2.37×)" in settings[3] and "`down_exchange: free`" in settings[3]
    assert settings[4].endswith("| `point_mass_hetero_outages` (not run at CPU scale) |")
