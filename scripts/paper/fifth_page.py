"""The fifth edition on docs/results.md: the paper's rows decided again by exact tests
(docs/results/fifth.md), beside the fourth edition's verdicts.

Each row of the paper's table (:data:`paper.claims.ROWS`; the outage rows,
:data:`paper.claims.OUTAGE_ROWS`, in a table of their own) names its scenarios; a comparison's
cell reads the fifth edition's JSON (``docs/results/fifth/<scenario>.json``, the lead growths'
``<env>_gap_<baseline>.json``, the families' Holm readings and the stability check in
``families.json``) and the fourth edition's verdict (:func:`paper.fourth_page.cells`, the
fourth's gap JSON).  Nothing is computed here: every interval, p-value and verdict is read from
that JSON (:func:`paper.fifth.unfinite` turns its ``"inf"`` strings back into floats).
"""

from __future__ import annotations

import json
from pathlib import Path

from jaxnigt.analysis import report_text
from paper import fourth_page, outages
from paper.claims import GROWTH, OUTAGE_ROWS, ROWS, Row
from paper.fifth import unfinite
from paper.fourth_page import Column, markdown

FIFTH = "fifth"  # DOCS/fifth: the fifth edition's analysis JSON (paper.fifth)
FAMILY_ALPHA = fourth_page.FAMILY_ALPHA
_EFFECT = {
    "time_to_80": "ratio of restricted times (geometric means)",
    "average": "Δ average return",
    "second_half": "Δ second-half return",
    "lead_growth": "growth of the log RMST ratio",
}
COMMAND = "`python scripts/paper fifth analyze`"


def _load(path: Path) -> dict | None:
    return unfinite(json.loads(path.read_text())) if path.is_file() else None


def _p(p: float) -> str:
    """A p-value to 2 significant digits, never "< 0.001"."""
    return f"{p:.2g}"


def cells(docs: Path, scenario: str) -> list[dict]:
    """One dict per comparison of ``scenario`` (``<env>_gap``: the lead growths): its
    family key, the fifth edition's comparison (None where not analysed) and last look, the
    fourth edition's verdict and seeds (None where it has none)."""
    if scenario.endswith("_gap"):
        env = scenario.removesuffix("_gap")
        out = []
        for b in GROWTH.baselines:
            new = _load(docs / FIFTH / f"{env}_gap_{b}.json")
            old = _load(docs / "fourth" / f"{env}_gap_{b}.json")
            if new is not None or old is not None:
                out.append(
                    _cell(scenario, GROWTH.reference, b, "lead_growth", new, old, {"env": env})
                )
        return out
    a = _load(docs / FIFTH / f"{scenario}.json")
    before = {c["baseline"]: c for c in fourth_page.cells(docs, scenario)}
    if a is None:
        return [
            _cell(scenario, c.get("reference"), b, c["statistic"], None, c)
            for b, c in before.items()
        ]
    return [
        _cell(scenario, a["reference"], b, a["statistic"], r, before.get(b), a)
        for b, r in a["comparisons"].items()
    ]


def _cell(scenario, reference, baseline, statistic, new, old, extra=None) -> dict:
    fourth = old if old is not None and old.get("edition", "fourth") == "fourth" else None
    return {
        "scenario": scenario,
        "reference": reference,
        "baseline": baseline,
        "statistic": statistic,
        "key": f"{scenario}: {reference} vs {baseline}",
        "fifth": new,
        "last": new["looks"][-1] if new else None,
        "fourth": None if fourth is None else fourth["verdict"],
        "fourth_seeds": None if fourth is None else fourth["seeds"],
        "target": (extra or {}).get("fixed_target"),
        "env": (extra or {}).get("env"),
    }


def _effect(c: dict) -> str:
    if c["last"] is None:
        return "–"
    return f"{_EFFECT[c['statistic']]}: {report_text.fmt(c['last']['interval'])}"


def _verdict(c: dict) -> str:
    if c["fifth"] is not None:
        return f"**{c['fifth']['verdict']}**"
    return "not run at CPU scale" if c["baseline"] is None else "not analysed yet"


def _p_cell(c: dict) -> str:
    last = c["last"]
    return "–" if last is None else f"{_p(last['p'])} ({_p(last['p_min'])})"


def _family(c: dict) -> str:
    return "outages" if c["scenario"] in outages.SCENARIOS else "paper"


def _holm(c: dict, families: dict) -> str:
    """Holm's family-wise reading at :data:`FAMILY_ALPHA` of a decided side (its family's
    adjusted p), or of an equivalence (the equivalence family's adjusted TOST p)."""
    new = c["fifth"]
    if new is None:
        return "–"
    fam = families.get(_family(c), {})
    if new["verdict"] in ("confirmed", "refuted"):
        p = fam.get("holm", {}).get(c["key"])
        if p is None:
            return "–"
        what = "holds" if p <= FAMILY_ALPHA else "not family-wise"
        return f"{what} (p = {_p(p)})"
    if new["verdict"].startswith("equivalent"):
        p = fam.get("equivalence_holm", {}).get(c["key"])
        if p is None:
            return "–"
        what = "holds as equivalence" if p <= FAMILY_ALPHA else "not family-wise"
        return f"{what} (TOST p = {_p(p)})"
    return "–"


COLUMNS = (
    Column("the paper's row", lambda r, c, first: f"**{r.name}**" if first else "″"),
    Column("comparison", lambda r, c, first: fourth_page.comparison_name(c)),
    Column("fourth edition", lambda r, c, first: c["fourth"] or "–"),
    Column("**fifth edition**", lambda r, c, first: _verdict(c)),
    Column("effect [interval]", lambda r, c, first: _effect(c)),
    Column("p (smallest possible)", lambda r, c, first: _p_cell(c)),
    Column("seeds", lambda r, c, first: str(c["fifth"]["seeds"]) if c["fifth"] else "–", "---:"),
    Column("Holm, family-wise 10 %", lambda r, c, first: _holm(c, c["families"])),
)
OUTAGE_COLUMNS = (
    Column("row", lambda r, c, first: f"**{r.name}**" if first else "″"),
    *COLUMNS[1:],
)


def families(docs: Path) -> dict:
    return (_load(docs / FIFTH / "families.json") or {}).get("families", {})


def table(docs: Path, columns=COLUMNS, rows: tuple[Row, ...] = ROWS) -> str:
    """The fifth edition's table of ``rows``: one line per comparison of each row (Markdown)."""
    fam = families(docs)
    lines = []
    for row in rows:
        found = [{**c, "families": fam} for s in row.scenarios for c in cells(docs, s)]
        lines += [[col.cell(row, c, i == 0) for col in columns] for i, c in enumerate(found)]
    return markdown([c.header for c in columns], [c.align for c in columns], lines)


def distinct(docs: Path, rows: tuple[Row, ...] = ROWS) -> list[dict]:
    """The comparisons of ``rows``, each once (the ``reacher_sqrt_dim`` pair sits under two
    rows), that either edition decided or ran."""
    found = [c for row in rows for s in row.scenarios for c in cells(docs, s) if c["baseline"]]
    return list({c["key"]: c for c in found}.values())


def count(docs: Path) -> str:
    """The distinct comparisons of the paper's rows and of the outage rows, in words."""
    paper, out = len(distinct(docs)), len(distinct(docs, OUTAGE_ROWS))
    shown = sum(1 for row in ROWS for s in row.scenarios for c in cells(docs, s) if c["baseline"])
    twice = f" (shown in {shown} lines: a pair sits under two rows)" if shown != paper else ""
    plural = "s" * (paper != 1)
    text = f"{paper} distinct comparison{plural} of the paper's rows{twice}"
    return f"{text} and {out} of the outage rows"


def fourth_legend(docs: Path) -> str:
    """The fourth edition's legend (:func:`paper.fourth_page.editions`) with its count of
    distinct comparisons, not of the table's lines."""
    text = fourth_page.editions(docs)
    n = sum(1 for c in distinct(docs) if c["fourth"] is not None)
    if "(all " not in text:  # some verdicts an earlier edition's: that legend counts lines
        return text
    return text.replace(text[text.find("(all ") : text.find(", in bold)")], f"(all {n}")


# ------------------------------------------------------------------------------ moved


def _kind(verdict: str) -> str:
    """A verdict's decision: confirmed, refuted, equivalent or undecided (open included)."""
    head = verdict.split(" at ")[0]
    return "undecided" if head == "open" else head


def _seeded(verdict: str, seeds) -> str:
    return verdict if "seeds" in verdict else f"{verdict} at {seeds} seeds"


def _reasons(c: dict) -> list[str]:
    """The reasons that follow from the JSON: the look the fourth decided at that decides
    nothing now, what the decisive looks gave against their share, never-reached seeds
    counted at the budget, the fixed target."""
    new, last = c["fifth"], c["last"]
    share = new["alpha"] / max(len(new["decisive"]), 1)
    out = []
    old = c["fourth_seeds"]
    at = {look["seeds"]: look for look in new["looks"]}
    if _kind(c["fourth"]) != "undecided" and old not in new["decisive"] and old in at:
        out.append(
            f"the look at {old} seeds decides nothing under exact tests (smallest possible p "
            f"{_p(at[old]['p_min'])}, above the share {_p(share)})"
        )
    kind = _kind(new["verdict"])
    if kind in ("confirmed", "refuted"):
        out.append(f"p = {_p(last['p'])} ≤ its share {_p(share)} at {last['seeds']} seeds")
    elif kind.startswith("equivalent"):
        out.append(f"TOST p = {_p(last['tost_p'])} ≤ its share {_p(share)}")
    else:
        decisive = [at[k] for k in new["decisive"] if k in at]
        if decisive:
            ps = ", ".join(f"{_p(look['p'])} at {look['seeds']}" for look in decisive)
            out.append(f"no decisive look reached its share {_p(share)} (p = {ps} seeds)")
    reached = last.get("reached")
    if reached:
        k = reached["seeds"]
        never = {m: k - reached[m] for m in ("reference", "baseline") if reached[m] < k}
        if never:
            said = " and ".join(f"{n} of {k} {m} seeds" for m, n in never.items())
            out.append(
                f"the restricted time counts {said}, which never reached the target, at the budget"
            )
    if c["target"] is not None:
        out.append(
            f"the target is fixed from the tuning look ({c['target']['value']:.2f}), not each "
            "run's own 80 %"
        )
    return out


def moved_lines(docs: Path) -> list[str]:
    """One sentence per comparison whose fifth verdict differs from its fourth verdict."""
    lines = []
    for rows in (ROWS, OUTAGE_ROWS):
        for c in distinct(docs, rows):
            new, last = c["fifth"], c["last"]
            if new is None or c["fourth"] is None:
                continue
            if _kind(new["verdict"]) == _kind(c["fourth"]):
                continue
            effect = f"{_EFFECT[c['statistic']]} {report_text.fmt(last['interval'])}"
            lines.append(
                f"- {fourth_page.comparison_name(c)}, {_seeded(c['fourth'], c['fourth_seeds'])} → "
                f"**{_seeded(new['verdict'], new['seeds'])}**: {effect}, p = {_p(last['p'])} "
                f"(smallest possible {_p(last['p_min'])}); {'; '.join(_reasons(c))}."
            )
    return lines


def moved(docs: Path) -> str:
    """:func:`moved_lines` as a Markdown list."""
    lines = moved_lines(docs)
    return "\n".join(lines) or "- none: every decision stands as the fourth edition's."


def amended_lines(docs: Path) -> list[str]:
    """A line per comparison whose verdict the move of the time test to the log scale
    changed: its verdict under the registered test (``registered_test.json``) → now."""
    before = (_load(docs / FIFTH / "registered_test.json") or {}).get("comparisons", {})
    lines = []
    for name, old in before.items():
        scenario, _, pair = name.partition(": ")
        if not pair:  # a lead growth, stored as <env>_gap_<baseline>
            now = _load(docs / FIFTH / f"{name}.json")
        else:
            a = _load(docs / FIFTH / f"{scenario}.json") or {"comparisons": {}}
            now = a["comparisons"].get(pair.rpartition(" vs ")[2])
        if now is not None and now["verdict"] != old["verdict"]:
            lines.append(f"- `{name}`: {old['verdict']} → **{now['verdict']}**")
    return lines


def amended(docs: Path) -> str:
    """:func:`amended_lines` as a Markdown list."""
    return "\n".join(amended_lines(docs)) or (
        "- none: every verdict is the one the registered test gave."
    )


# ---------------------------------------------------------------- figures and checks


def figures(docs: Path) -> str:
    """Each scenario's Kaplan–Meier figure, in the tables' order."""
    names = dict.fromkeys(s for r in (*ROWS, *OUTAGE_ROWS) for s in r.scenarios)
    lines = [
        f"![Kaplan–Meier curves of {s}: seeds at the fixed target by simulated time]"
        f"(results/{FIFTH}/{s}_km.png)"
        for s in names
        if (docs / FIFTH / f"{s}_km.png").is_file()
    ]
    return "\n\n".join(lines) or "(no figure yet)"


def stability(docs: Path) -> str:
    """The stability check (``families.json``) in words."""
    s = (_load(docs / FIFTH / "families.json") or {}).get("stability")
    if not s or not s["rows"]:
        return f"The stability check is not run yet ({COMMAND})."
    draws, rows = s["draws"], s["rows"]
    least = min(r["same"] for r in rows.values())
    below = [f"`{k}` ({r['same']} of {draws})" for k, r in rows.items() if r["same"] < draws - 1]
    text = (
        f"Every decided row ({len(rows)}) gives the same decision in "
        f"{'at least ' if least < draws else ''}{least} of {draws} repetitions with fresh "
        f"seeds for every random draw that can enter a decision (command: {COMMAND}): the "
        "decisions are exact tests, so no draw enters them, and this shows it"
    )
    return text + (f"; below {draws - 1} of {draws}: {', '.join(below)}." if below else ".")


#: The power the rule requires at a 1.5× speed-up with 20 paired seeds, by the share of the
#: baseline's seeds censored (docs/results/fifth.md, "Checks that go with it").
REQUIRED_POWER = {0.3: 0.33, 0.6: 0.25}


def _pct(v: float, se: float) -> str:
    return f"{100 * v:.1f} % ± {100 * se:.1f} %"


def simulation(docs: Path) -> str:
    """The rule's error and power by simulation (``docs/results/fifth/simulation.json``)."""
    s = _load(docs / FIFTH / "simulation.json")
    if s is None:
        return "The simulation of the rule's error and power is pending."
    summary = s.get("summary", {})
    parts = []
    for e in summary.get("effects", []):
        if e.get("part") != "power" or e.get("kind") != "time" or e.get("effect") != 1.5:
            continue
        censored = e["regime"]["censored"]
        stages = e["stages"]
        at = (
            f"at {stages[0]} seeds"
            if len(stages) == 1
            else f"looks at {', '.join(map(str, stages))}"
        )
        text = f"{100 * censored:.0f} % censored, {at}: {_pct(e['reference_ahead'], e['ahead_se'])}"
        need = REQUIRED_POWER.get(censored)
        if len(stages) == 1 and need is not None:
            met = e["reference_ahead"] >= need
            text += f" (required {100 * need:.0f} %: {'met' if met else 'not met'})"
        parts.append(text)
    text = ""
    if parts:
        text = "At a true 1.5× speed-up (log-time spread 1.3, pair correlation 0.5) the rule puts "
        text += "the faster method ahead with " + "; ".join(parts) + "."
    worst = summary.get("worst_null")
    if worst:
        r = worst["regime"]
        text += (
            f" Under the null, the worst of {summary.get('null_rows', '?')} regimes puts a "
            f"side ahead in {_pct(worst['rate'], worst['se'])} of {worst['experiments']} "
            f"experiments (spread {r['sigma']:g}, correlation {r['rho']:g}, "
            f"{100 * r['censored']:.0f} % censored, looks at "
            f"{', '.join(map(str, worst['stages']))})"
        )
        by_look = summary.get("worst_null_by_look")
        if by_look:
            text += (
                f"; the worst single look, at {by_look['look']} seeds, "
                f"{_pct(by_look['rate'], by_look['se'])}"
            )
        text += "."
    text += f" Command: `{s.get('command', 'python -m jaxnigt.cli.error_rate')}`."
    return text + same_draws(docs) + split_nulls(docs)


def split_nulls(docs: Path) -> str:
    """The rule on nulls split from each stored scenario's own seeds (``null.json``,
    ``python scripts/paper fifth null``): the largest share of splits with a side ahead."""
    s = _load(docs / FIFTH / "null.json")
    if not s:
        return ""
    rows = [(m["ahead_either_side"], m["monte_carlo_se"], n, a, r["seeds"], r["experiments"])
            for n, r in s.items() for a, m in r["methods"].items()]  # fmt: skip
    rate, se, name, method, seeds, n = max(rows)
    small = sorted({r["seeds"] for r in s.values() if r["seeds"] < 20})
    return (
        f" On nulls split from the stored seeds ({n:,} random splits of each method's seeds "
        f"into two pseudo-methods, {len(rows)} methods of {len(s)} scenarios; `python scripts/"
        f"paper fifth null`), the rule puts a side ahead in at most {_pct(rate, se)} "
        f"(`{name}`, {method}, {seeds} seeds)"
        + (f"; with {', '.join(map(str, small))} seeds a half cannot reach a decisive look."
           if small else ".")
    )  # fmt: skip


_TEST_NAMES = {
    "sign_flip_log": "the rule's (log scale)",
    "sign_flip_rmst": "the registered (differences)",
    "signed_rank": "exact Wilcoxon",
    "paired_t": "paired t",
}


def same_draws(docs: Path) -> str:
    """The rule's test beside the tests the requirement was set from, on the same draws
    (``power_tests.json``, ``python scripts/paper fifth power``); empty before it ran."""
    s = _load(docs / FIFTH / "power_tests.json")
    if s is None:
        return ""
    parts = []
    for censored, tests in s["censored"].items():
        each = ", ".join(f"{_TEST_NAMES[k]} {_pct(v['power'], v['se'])}" for k, v in tests.items())
        parts.append(f"{100 * float(censored):.0f} % censored: {each}")
    at30 = {k: v["power"] for k, v in s["censored"]["0.3"].items()}
    gap = lambda k: 100 * (at30["sign_flip_log"] - at30[k])
    return (
        f" On the same {s['experiments']:,} draws of each regime (one look, 20 paired seeds, "
        "two-sided 10 %): " + "; ".join(parts) + f" (`{s['command']}`). At 30 % censored the "
        f"rule's test finds the speed-up {gap('sign_flip_rmst'):.1f} points more often than "
        "the registered one, which misses the required 33 % (the reason for the move)."
    )


# -------------------------------------------------------------- the prose's numbers


def first_look(docs: Path, scenario: str = "point_mass_sqrt_dim", baseline="sync_nigt") -> str:
    """The fourth edition's first look of a comparison, paired: ``1.22 [0.89, 1.45] at
    level 0.975``."""
    a = _load(docs / "fourth" / f"{scenario}.json")
    if a is None:
        return "(not run)"
    r = a["comparisons"][baseline]
    return f"{report_text.fmt(r['looks'][0]['interval'])} at level {r['level']:.3g}"


def hetero_text(docs: Path, scenario: str = "reacher_hetero", baseline="afedpg") -> str:
    """The fourth edition's path of a comparison over its looks, its verdict and last
    interval against the margin, in words."""
    a = _load(docs / "fourth" / f"{scenario}.json")
    if a is None:
        return "(not run)"
    r = a["comparisons"][baseline]
    path = ", ".join(
        f"{look['interval']['estimate']:.2f} at {look['seeds']}" for look in r["looks"]
    )
    last = r["looks"][-1]
    iv = last["interval"]
    return (
        f"the estimate moved as seeds were added ({path} seeds) and the row ends "
        f"{r['verdict']}, its interval [{iv['low']:.2f}, {iv['high']:.2f}] straddling both a tie "
        f"and the equivalence margin (±{last['margin'][1]:.2f})"
    )


def fill(text: str, docs: Path) -> str:
    """``text`` with the fifth edition's placeholders filled from the JSON in ``docs``."""
    if "{{FIFTH_TABLE}}" not in text:
        return text
    moved_ = moved_lines(docs)
    for tag, value in (
        ("FIFTH_TABLE", lambda: table(docs)),
        ("FIFTH_OUTAGES", lambda: table(docs, OUTAGE_COLUMNS, OUTAGE_ROWS)),
        ("FIFTH_COUNT", lambda: count(docs)),
        ("FIFTH_MOVED_COUNT", lambda: f"{len(moved_)} verdict{'s' * (len(moved_) != 1)}"),
        ("FIFTH_MOVED", lambda: moved(docs)),
        ("FIFTH_AMENDED", lambda: amended(docs)),
        ("FIFTH_KM", lambda: figures(docs)),
        ("FIFTH_STABILITY", lambda: stability(docs)),
        ("FIFTH_SIM", lambda: simulation(docs)),
        ("FOURTH_FIRST_LOOK", lambda: first_look(docs)),
        ("FOURTH_HETERO", lambda: hetero_text(docs)),
    ):
        if f"{{{{{tag}}}}}" in text:
            text = text.replace(f"{{{{{tag}}}}}", value())
    return text
