"""scripts/paper/page.py: docs/results.md is exactly what the committed analysis JSON and the
page's template give (so the page is regenerated, never edited by hand), the earlier editions'
pages are frozen text, and each table is made from its JSON alone (fixture JSON in a temporary
folder)."""

import json
import re
from pathlib import Path

import pytest
from paper import claims, fifth, fifth_page, fourth_page, page

from jaxnigt.analysis import report_text

ROOT = Path(__file__).resolve().parent.parent


def test_the_results_pages_are_regenerated_byte_for_byte_from_their_json():
    docs = ROOT / "docs" / "results"
    pages = page.pages(docs)
    assert set(pages) == {ROOT / "docs" / "results.md"}
    for path, text in pages.items():
        assert text == path.read_text(), f"regenerate {path}: python scripts/paper page"
    # the fifth edition's tables first, the fourth edition's below them
    assert len(pages[ROOT / "docs" / "results.md"].encode()) <= 50_000


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


def test_the_earlier_editions_pages_are_frozen_text():
    """The second and third editions' pages and the second edition's tables are committed as
    they were last generated; nothing generates them now (no template is left for them)."""
    docs = ROOT / "docs" / "results"
    for name in ("second_edition.md", "third_edition.md", "verdicts.md", "tuning.md"):
        assert (docs / name).is_file()
    assert not any((ROOT / "scripts" / "paper").glob("*_page.md"))
    assert "| claim | scenario |" in (docs / "verdicts.md").read_text()


def test_a_template_with_an_unknown_placeholder_is_refused(tmp_path):
    template = tmp_path / "page.md"
    template.write_text("# Results\n\n{{FOURTH_TABLE}}\n\n{{NO_SUCH_TABLE}}\n")
    with pytest.raises(SystemExit, match="NO_SUCH_TABLE"):
        page.page(tmp_path, template)
    template.write_text("# Results\n\n{{FOURTH_TABLE}}\n")
    text = page.page(tmp_path, template)
    assert text.startswith("<!-- Written by") and "| the paper's row | comparison |" in text


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


# ---------------------------------------------------------------- the fifth edition


def _walk(x, intervals: set, numbers: set) -> None:
    """Every interval of ``x`` as the page formats it, and every number to 2 significant
    digits (as the page's p-values)."""
    if isinstance(x, dict):
        if {"estimate", "low", "high"} <= set(x):
            intervals.add(report_text.fmt(x))
        for v in x.values():
            _walk(v, intervals, numbers)
    elif isinstance(x, list):
        for v in x:
            _walk(v, intervals, numbers)
    elif isinstance(x, float | int) and not isinstance(x, bool):
        numbers.add(f"{x:.2g}")


_NUM = r"(?:-?\d+\.\d+|−?∞)"


def test_every_interval_and_p_value_on_the_page_is_in_the_analysis_json():
    """A number the page's prose quotes is its JSON's: every ``x [a, b]`` and every bare
    ``[a, b]`` of two-decimal bounds is an interval of the third, fourth or fifth edition's
    JSON or the physics, heavy-tailed or heterogeneous-rival rows' (the fourth's as it is,
    not as it was before its second amendment), and every
    ``p = x`` a value of that JSON or a Holm-adjusted p of the fourth edition's families."""
    docs = ROOT / "docs" / "results"
    intervals, numbers = set(), set()
    for sub in ("third", "fourth", "fifth", "physics", "heavy", "hetero"):
        for path in (docs / sub).rglob("*.json"):
            if {"store", fourth_page.BEFORE} & set(path.parts):
                continue
            _walk(fifth.unfinite(json.loads(path.read_text())), intervals, numbers)
    for rows in (claims.ROWS, claims.OUTAGE_ROWS):
        numbers |= {f"{p:.2g}" for p in fourth_page.family(docs, rows).values()}
    text = (ROOT / "docs" / "results.md").read_text()
    quoted = [
        f"{m[1]} [{m[2]}, {m[3]}]"
        for m in re.finditer(rf"({_NUM})\s\[({_NUM}),\s+({_NUM})\]", text)
    ]
    assert len(quoted) > 50
    assert [q for q in quoted if q not in intervals] == []
    bounds = {iv.split(" ", 1)[1] for iv in intervals}
    two = r"(?:-?\d+\.\d\d|−?∞)"
    bare = [f"[{m[1]}, {m[2]}]" for m in re.finditer(rf"(?<!\S\s)\[({two}),\s+({two})\]", text)]
    assert [b for b in bare if b not in bounds] == []
    ps = re.findall(r"\bp = (\d(?:[\d.e+-]*\d)?)", text)
    assert len(ps) > 20 and [p for p in ps if p not in numbers] == []
    assert "p < 0.001" not in text.split("## The fourth edition")[0]


def _look(seeds, estimate, low, high, p, p_min, tost_p=1.0, outcome="reference ahead"):
    return {
        "seeds": seeds,
        "interval": _iv(estimate, low, high),
        "p": p,
        "p_min": p_min,
        "tost_p": tost_p,
        "margin": [0.8, 1.25],
        "outcome": outcome,
        "reached": {"reference": seeds, "baseline": seeds - 3, "seeds": seeds},
    }


def _fifth_sqrt(docs: Path, verdict: str, looks: list[dict], seeds: int) -> None:
    """The fifth edition's JSON of point_mass_sqrt (one comparison, against AFedPG)."""
    comparison = {
        "verdict": verdict,
        "outcome": looks[-1]["outcome"],
        "seeds": seeds,
        "alpha": 0.1,
        "level": 1 - 0.1 / 3,
        "decisive": [10, 20, 40],
        "looks": looks,
        "p": looks[-1]["p"],
        "tost_p": looks[-1]["tost_p"],
        "open": False,
    }
    target = {"value": -8.5, "R0": -32.0, "R_best": -2.5, "fraction": 0.8}
    a = {
        "reference": "rennala_nigt",
        "statistic": "time_to_80",
        "comparisons": {"afedpg": comparison},
        "fixed_target": target | {"from": "point_mass_sqrt"},
    }
    (docs / "fifth").mkdir(parents=True, exist_ok=True)
    (docs / "fifth" / "point_mass_sqrt.json").write_text(json.dumps(a))


def _fourth_sqrt(docs: Path, verdict: str, seeds: int) -> None:
    look = {"seeds": seeds, "interval": _iv(1.9, 1.1, "inf"), "margin": [0.8, 1.25]}
    comparison = {"verdict": verdict, "seeds": seeds, "looks": [look], "p": 0.01}
    a = {
        "reference": "rennala_nigt",
        "statistic": "time_to_80",
        "comparisons": {"afedpg": comparison},
    }
    (docs / "fourth").mkdir(parents=True, exist_ok=True)
    (docs / "fourth" / "point_mass_sqrt.json").write_text(json.dumps(a))


KEY = "point_mass_sqrt: rennala_nigt vs afedpg"


def test_the_fifth_table_reads_its_verdict_effect_p_and_holm_from_the_json(tmp_path):
    _fourth_sqrt(tmp_path, "confirmed", 5)
    looks = [_look(5, 1.6, 0.9, 2.8, 0.0625, 0.0625), _look(10, 1.87, 1.25, 2.63, 0.0041, 1.9e-6)]
    _fifth_sqrt(tmp_path, "confirmed", looks, 10)
    fam = {"paper": {"holm": {KEY: 0.00012}, "equivalence_holm": {}, "size": 1}}
    (tmp_path / "fifth" / "families.json").write_text(json.dumps({"families": fam}))
    lines = fifth_page.table(tmp_path).splitlines()
    assert lines[0] == (
        "| the paper's row | comparison | fourth edition | **fifth edition** | effect [interval] "
        "| p (smallest possible) | seeds | Holm, family-wise 10 % |"
    )
    (row,) = [line for line in lines if "point_mass_sqrt`: rennala_nigt vs afedpg" in line]
    assert row == (
        "| **Heterogeneous compute and communication** | `point_mass_sqrt`: rennala_nigt vs "
        "afedpg | confirmed | **confirmed** | ratio of restricted times (geometric means): "
        "1.87 [1.25, 2.63] | 0.0041 (1.9e-06) | 10 | holds (p = 0.00012) |"
    )  # never "p < 0.001": the number, to 2 significant digits
    assert "| ″ | `reacher_sqrt` | – | not run at CPU scale | – | – | – | – |" in lines
    # an equivalence reads the equivalence family, never "p = 1"
    c = {**fifth_page.cells(tmp_path, "point_mass_sqrt")[0]}
    c["fifth"] = {**c["fifth"], "verdict": "equivalent within the margin"}
    eq = {"paper": {"holm": {KEY: 1.0}, "equivalence_holm": {KEY: 0.2}}}
    assert fifth_page._holm(c, eq) == "not family-wise (TOST p = 0.2)"
    eq["paper"]["equivalence_holm"][KEY] = 0.008
    assert fifth_page._holm(c, eq) == "holds as equivalence (TOST p = 0.008)"
    c["fifth"]["verdict"] = "undecided at 40 seeds"
    assert fifth_page._holm(c, eq) == "–"
    # the reacher_sqrt_dim pair sits under two rows and counts once
    assert fifth_page.count(tmp_path).startswith("1 distinct comparison of the paper's rows")


def test_a_verdict_that_moved_gets_a_sentence_with_its_numbers_and_reasons(tmp_path):
    # the fourth edition confirmed at 5 seeds; the fifth's look at 5 decides nothing, and
    # its decisive looks stay above their share up to the cap
    _fourth_sqrt(tmp_path, "confirmed", 5)
    looks = [
        _look(5, 1.6, 0.9, 2.8, 0.0625, 0.0625, outcome="not decisive"),
        _look(10, 1.4, 0.9, 2.1, 0.09, 0.002, outcome="undecided"),
        _look(20, 1.3, 0.95, 1.8, 0.09, 1.9e-6, outcome="undecided"),
        _look(40, 1.31, 0.95, 1.80, 0.09, 1.8e-12, outcome="undecided"),
    ]
    _fifth_sqrt(tmp_path, "undecided at 40 seeds", looks, 40)
    (line,) = fifth_page.moved_lines(tmp_path)
    assert line.startswith(
        "- `point_mass_sqrt`: rennala_nigt vs afedpg, confirmed at 5 seeds → **undecided at "
        "40 seeds**: ratio of restricted times (geometric means) 1.31 [0.95, 1.80], p = 0.09 "
        "(smallest possible 1.8e-12); "
        "the look at 5 seeds decides nothing under exact tests (smallest possible p 0.062, "
        "above the share 0.033); no decisive look reached its share 0.033"
    )
    assert "3 of 40 baseline seeds, which never reached the target, at the budget" in line
    assert line.endswith(
        "the target is fixed from the tuning look (-8.50), not each run's own 80 %."
    )
    template = tmp_path / "page.md"
    template.write_text("{{FIFTH_COUNT}}; {{FIFTH_MOVED_COUNT}} moved.\n{{FIFTH_TABLE}}\n")
    text = page.page(tmp_path, template)
    assert (
        "1 distinct comparison of the paper's rows and 0 of the outage rows; 1 verdict moved"
        in text
    )
    # the same verdict at both editions: no sentence
    _fourth_sqrt(tmp_path, "undecided at 40 seeds", 40)
    assert fifth_page.moved(tmp_path) == "- none: every decision stands as the fourth edition's."


def test_the_verdicts_the_move_to_the_log_scale_changed_are_named(tmp_path):
    looks = [_look(10, 1.87, 1.25, 2.63, 0.0041, 1.9e-6)]
    _fifth_sqrt(tmp_path, "confirmed", looks, 10)
    assert fifth_page.amended(tmp_path).startswith("- none")  # no record: nothing named
    record = {"comparisons": {KEY: {"verdict": "undecided at 40 seeds"},
                              "reacher_gap_afedpg": {"verdict": "confirmed"}}}  # fmt: skip
    (tmp_path / "fifth" / "registered_test.json").write_text(json.dumps(record))
    assert fifth_page.amended_lines(tmp_path) == [
        f"- `{KEY}`: undecided at 40 seeds → **confirmed**"
    ]  # the lead growth without a file now is not named
    record["comparisons"][KEY]["verdict"] = "confirmed"
    (tmp_path / "fifth" / "registered_test.json").write_text(json.dumps(record))
    assert fifth_page.amended_lines(tmp_path) == []


def test_the_fifth_editions_checks_and_figures_in_words(tmp_path):
    assert fifth_page.simulation(tmp_path) == (
        "The simulation of the rule's error and power is pending."
    )
    assert fifth_page.figures(tmp_path) == "(no figure yet)"
    rows = {
        KEY: {"outcome": "reference ahead", "seeds": 10, "same": 30},
        "reacher_gap: rennala_nigt vs afedpg": {
            "outcome": "reference ahead",
            "seeds": 10,
            "same": 27,
        },
    }
    (tmp_path / "fifth").mkdir()
    stab = {"families": {}, "stability": {"draws": 30, "rows": rows}}
    (tmp_path / "fifth" / "families.json").write_text(json.dumps(stab))
    assert fifth_page.stability(tmp_path) == (
        "Every decided row (2) gives the same decision in at least 27 of 30 repetitions with "
        "fresh seeds for every random draw that can enter a decision (command: `python "
        "scripts/paper fifth analyze`): the decisions are exact tests, so no draw enters them, "
        "and this shows it; below 29 of 30: "
        "`reacher_gap: rennala_nigt vs afedpg` (27 of 30)."
    )
    power = {
        "kind": "time", "regime": {"sigma": 1.3, "rho": 0.5, "censored": 0.3, "grid": 0.02},
        "stages": [20], "experiments": 4000, "effect": 1.5, "part": "power",
        "reference_ahead": 0.3035, "ahead_se": 0.0073,
    }  # fmt: skip
    worst = {
        "kind": "time", "regime": {"sigma": 1.3, "rho": 0.0, "censored": 0.0, "grid": 0.02},
        "stages": [5, 10, 20, 40], "experiments": 150, "effect": 1.0, "rate": 0.1067,
        "se": 0.0252,
    }  # fmt: skip
    sim = {"command": "python -m jaxnigt.cli.error_rate --suite", "summary": {
        "worst_null": worst, "worst_null_by_look": worst | {"look": 40}, "null_rows": 82,
        "effects": [power]}}  # fmt: skip
    (tmp_path / "fifth" / "simulation.json").write_text(json.dumps(sim))
    text = fifth_page.simulation(tmp_path)
    assert "30 % censored, at 20 seeds: 30.3 % ± 0.7 % (required 33 %: not met)" in text
    assert "the worst of 82 regimes puts a side ahead in 10.7 % ± 2.5 % of 150" in text
    assert text.endswith("Command: `python -m jaxnigt.cli.error_rate --suite`.")
    (tmp_path / "fifth" / "reacher_sqrt_km.png").write_bytes(b"png")
    assert fifth_page.figures(tmp_path) == (
        "![Kaplan–Meier curves of reacher_sqrt: seeds at the fixed target by simulated time]"
        "(results/fifth/reacher_sqrt_km.png)"
    )
