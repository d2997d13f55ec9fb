"""The opening screen of docs/results.md: the paper's experiment table, row by row, with what
jaxnigt finds, and one figure of every decided effect (a forest plot).

Each row of the paper's table (:data:`paper.claims.ROWS`) names its scenarios; a scenario's
cell comes from the newest edition that ran it: the fourth edition's sequential JSON
(``docs/results/fourth``), else the third edition's analysis (``docs/results/third``, 5 seeds,
no sequential rule), else the second edition's (``docs/results``), else "not run at CPU
scale".  Nothing is computed here: every interval and verdict is read from that JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

from jaxnigt.analysis import report_text, verdicts
from paper import claims, third_scenarios
from paper.claims import GROWTH, ROWS, Row

VERDICT_COLOURS = {"confirmed": "tab:green", "refuted": "tab:red", "equivalent": "tab:blue"}
_STATISTIC = {
    "time_to_80": "time-to-80 % ratio",
    "average": "Δ average return",
    "second_half": "Δ second-half return",
}


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def cells(docs: Path, scenario: str) -> list[dict]:
    """One dict per comparison of ``scenario``: baseline, verdict, effect, seeds, edition."""
    if scenario.endswith("_gap"):
        return _gap_cells(docs, scenario.removesuffix("_gap"))
    fourth = _load(docs / "fourth" / f"{scenario}.json")
    if fourth is not None:
        return [
            {
                "scenario": scenario,
                "reference": fourth["reference"],
                "baseline": b,
                "verdict": r["verdict"],
                "effect": r["looks"][-1]["interval"],
                "seeds": r["seeds"],
                "statistic": fourth["statistic"],
                "edition": "fourth",
                "margin": r["looks"][-1]["margin"],
                "p": r.get("p"),
            }
            for b, r in fourth["comparisons"].items()
        ]
    for edition, where in (("third", docs / "third"), ("second", docs)):
        a = _load(where / f"{scenario}.json")
        if a is not None and "comparisons" in a:
            statistic = a.get("statistic", "average")
            # an earlier edition's comparison: its own outcome (the claim's verdict of that
            # edition spans several comparisons, and a comparison outside the claim has none)
            return [
                {
                    "scenario": scenario,
                    "reference": a["reference"],
                    "baseline": b,
                    "verdict": report_text.outcome_text(claims.row(a, b), a["reference"], b),
                    "effect": c.get("effect", c["average_return_difference"]),
                    "seeds": a["algorithms"][a["reference"]]["seeds"],
                    "statistic": statistic,
                    "edition": edition,
                    "margin": None,
                    "p": None,
                }
                for b, c in a["comparisons"].items()
            ]
    return [
        {
            "scenario": scenario,
            "baseline": None,
            "verdict": "not run at CPU scale",
            "effect": None,
            "seeds": None,
            "statistic": None,
            "edition": None,
            "margin": None,
            "p": None,
        }
    ]


def _gap_cells(docs: Path, env: str) -> list[dict]:
    out = []
    for baseline in GROWTH.baselines:
        g = _load(docs / "fourth" / f"{env}_gap_{baseline}.json")
        edition = "fourth"
        if g is None:
            g, edition = _load(docs / "third" / f"{env}_gap_{baseline}.json"), "third"
        if g is None:
            continue
        effect = g["looks"][-1]["interval"] if "looks" in g else g["log_lead_difference"]
        verdict = g["verdict"] if edition == "fourth" else f"{g['verdict']} (5 seeds)"
        out.append(
            {
                "scenario": f"{env}: √i → √i·d^{{1/4}}",
                "env": env,
                "reference": GROWTH.reference,
                "baseline": baseline,
                "verdict": verdict,
                "effect": effect,
                "seeds": g.get("seeds", 5),
                "statistic": "lead_growth",
                "edition": edition,
                "p": g.get("p") if edition == "fourth" else None,
                "margin": g["looks"][-1]["margin"] if "looks" in g else None,
            }
        )
    return out


def _effect(c: dict) -> str:
    if c["effect"] is None:
        return "–"
    what = (
        "growth of the log time ratio"
        if c["statistic"] == "lead_growth"
        else _STATISTIC.get(c["statistic"], c["statistic"])
    )
    return f"{what}: {report_text.fmt(c['effect'])}"


@dataclasses.dataclass(frozen=True)
class Column:
    """A column of the opening table: its header, its Markdown alignment, and its cell, made
    from the paper's row, one comparison (:func:`cells`) and whether that comparison is the
    row's first."""

    header: str
    cell: Callable[[Row, dict, bool], str]
    align: str = "---"


# A scenario tuned on a reduced grid (a stated deviation) is marked with ‡.
def _mark(scenario: str) -> str:
    return " ‡" if scenario in third_scenarios.GRIDS else ""


def comparison_name(c: dict) -> str:
    """A table row's comparison: the scenario (or lead growth) and its two methods."""
    if c["statistic"] == "lead_growth":
        where = f"`{c['env']}` lead growth"
    else:
        where = f"`{c['scenario']}`{_mark(c['scenario'])}"
    return f"{where}: {c['reference']} vs {c['baseline']}" if c["baseline"] else where


def _verdict(c: dict) -> str:
    return f"**{c['verdict']}**" if c["edition"] == "fourth" else c["verdict"]


#: The family-wise error of the table's Holm column.
FAMILY_ALPHA = 0.10


def _key(c: dict) -> tuple[str, str | None]:
    return c["scenario"], c["baseline"]


def family(docs: Path, rows: tuple[Row, ...] = ROWS) -> dict[tuple[str, str | None], float | None]:
    """Holm's adjusted p-value of every fourth-edition comparison of the table of ``rows``
    (a comparison in two rows counts once; :func:`jaxnigt.analysis.verdicts.holm_adjusted`),
    from each comparison's Bonferroni-over-looks p-value: the table's rows are one family."""
    found = [c for row in rows for s in row.scenarios for c in cells(docs, s)]
    ps = {_key(c): c["p"] for c in found if c["edition"] == "fourth"}
    return verdicts.holm_adjusted(ps)


def _holm(c: dict) -> str:
    """The Holm column's cell: whether a decided comparison holds family-wise (at
    :data:`FAMILY_ALPHA`), with its adjusted p-value (``p_holm``, :func:`family`)."""
    p = c.get("p_holm")
    if p is None:
        return "–"
    decided = c["verdict"] in ("confirmed", "refuted")
    text = "p < 0.001" if p < 0.001 else f"p = {p:.2g}"
    if not decided:
        return text
    return f"holds ({text})" if p <= FAMILY_ALPHA else f"not family-wise ({text})"


def _adastop(c: dict) -> str:
    """The AdaStop column's cell: whether AdaStop's decision on the same per-seed values and
    stages (``docs/results/fourth/adastop.json``, ``c["adastop"]``) agrees with the
    verdict, and AdaStop's decision where it does not."""
    a = c.get("adastop")
    if a is None:
        return "–"
    if a["decision"] == "equal":
        said = "no difference"
    else:
        said = f"{c['reference'] if a['ahead'] == 'reference' else c['baseline']} ahead"
    return "agrees" if a["agree"] else f"**differs**: {said} ({a['seeds']} seeds)"


# The opening table: what a reader needs on the first screen. One more column is one more
# entry here (the other table, :func:`settings`, holds each row's setting and the paper's
# observation).
OPENING = (
    # the paper's row, named on its first comparison and marked ″ (ditto) below it
    Column("the paper's row", lambda r, c, first: f"**{r.name}**" if first else "″"),
    Column("comparison", lambda r, c, first: comparison_name(c)),
    Column("verdict", lambda r, c, first: _verdict(c)),
    Column("effect [interval]", lambda r, c, first: _effect(c)),
    Column("seeds", lambda r, c, first: "–" if c["seeds"] is None else str(c["seeds"]), "---:"),
    Column("Holm, family-wise 10 %", lambda r, c, first: _holm(c)),
    Column("AdaStop", lambda r, c, first: _adastop(c)),
)


def markdown(headers: list[str], aligns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the header row, the alignment row, then ``rows``."""
    lines = [headers, aligns, *rows]
    return "\n".join(f"| {' | '.join(line)} |" for line in lines)


# The outage rows' table (paper.claims.OUTAGE_ROWS): the opening table's columns but AdaStop
# (not run on them), its rows named as theirs.
OUTAGE_COLUMNS = (
    Column("row", lambda r, c, first: f"**{r.name}**" if first else "″"),
    *OPENING[1:-1],
)


def table(docs: Path, columns: tuple[Column, ...] = OPENING, rows: tuple[Row, ...] = ROWS) -> str:
    """The opening table (or another table of ``rows``, e.g. the outage rows): one line per
    comparison of each row, with this project's verdict and effect (Markdown)."""
    adjusted = family(docs, rows)
    ada = (_load(docs / "fourth" / "adastop.json") or {}).get("scenarios", {})
    checked = lambda c: ada.get(c["scenario"], {}).get("comparisons", {}).get(c["baseline"])
    lines = []
    for row in rows:
        found = [c for scenario in row.scenarios for c in cells(docs, scenario)]
        found = [{**c, "p_holm": adjusted.get(_key(c)), "adastop": checked(c)} for c in found]
        lines += [[col.cell(row, c, i == 0) for col in columns] for i, c in enumerate(found)]
    return markdown([c.header for c in columns], [c.align for c in columns], lines)


def _scenario(docs: Path, scenario: str) -> str:
    """A scenario of a row as the settings table names it, with its edition where that is
    not the fourth."""
    if scenario.endswith("_gap"):
        env = scenario.removesuffix("_gap")
        small, large = GROWTH.settings
        text = f"lead growth `{env}_{small}` → `{env}_{large}`"
    else:
        text = f"`{scenario}`{_mark(scenario)}"
    found = cells(docs, scenario)
    edition = found[0]["edition"] if found else None
    if edition != "fourth":  # the same edition for every comparison of a scenario
        text += " (not run at CPU scale)" if edition is None else f" ({edition} edition)"
    return text


_SETTINGS_HEADERS = ("the paper's row", "setting", "the paper observed", "scenarios")
#: The outage rows' settings table: what the clock predicted stands where the paper's
#: observation does.
OUTAGE_HEADERS = ("row", "setting", "predicted before the runs (slowdown)", "scenarios")


def settings(docs: Path, rows: tuple[Row, ...] = ROWS, headers=_SETTINGS_HEADERS) -> str:
    """The paper's rows (or other ``rows``) as the opening table names them: each one's
    setting, what the paper observed there (``headers[2]``) and the scenarios that test it
    (Markdown)."""
    lines = [
        [
            f"**{row.name}**",
            row.setting,
            row.paper,
            ", ".join(_scenario(docs, s) for s in row.scenarios),
        ]
        for row in rows
    ]
    return markdown(list(headers), ["---"] * len(headers), lines)


def editions(docs: Path) -> str:
    """The table's legend of editions: which verdicts are the fourth edition's (bold), which
    an earlier edition's, and how many comparisons are not run."""
    found = [c for row in ROWS for scenario in row.scenarios for c in cells(docs, scenario)]
    earlier = sum(c["edition"] not in (None, "fourth") for c in found)
    missing = sum(c["edition"] is None for c in found)
    if not earlier and not missing:
        return f"Every verdict (all {len(found)}, in bold) is the fourth edition's."
    text = "A **bold** verdict is the fourth edition's"
    if earlier:
        text += (
            f"; a plain one ({earlier} of {len(found)}) is an earlier edition's at 5 seeds, "
            "not yet rerun under the rule"
        )
    return text + (f"; {missing} of {len(found)} are not run at CPU scale." if missing else ".")


def _x(c: dict) -> tuple[float, float, float] | None:
    """The effect on the plot's scale: log ratio for times, difference / improvement for
    returns (so every margin is ±log 1.25, or ±0.1)."""
    iv = c["effect"]
    if c["statistic"] in ("time_to_80", "lead_growth"):
        f = (
            (lambda v: math.log(v) if v > 0 else -math.inf)
            if c["statistic"] == "time_to_80"
            else float
        )
        return tuple(f(iv[k]) for k in ("estimate", "low", "high"))
    scale = c["margin"][1] / 0.1 if c["margin"] and c["margin"][1] > 0 else 1.0
    return tuple(iv[k] / scale for k in ("estimate", "low", "high"))


def forest(docs: Path, out: Path) -> Path:
    """Every fourth-edition comparison's effect with its interval, coloured by verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        c for r in ROWS for s in r.scenarios for c in cells(docs, s) if c["edition"] == "fourth"
    ]
    rows = list({(c["scenario"], c["baseline"]): c for c in rows}.values())
    time = [c for c in rows if c["statistic"] in ("time_to_80", "lead_growth")]
    ret = [c for c in rows if c not in time]
    fig, axes = plt.subplots(
        1,
        2,
        figsize=(12, 0.45 * max(len(time), len(ret), 4) + 1.6),
        dpi=100,
        gridspec_kw={"wspace": 0.9},
    )
    panels = (
        (
            axes[0],
            time,
            "log time ratio (baseline / reference; lead growth: its change)",
            math.log(1.25),
        ),
        (axes[1], ret, "return difference / improvement (reference − baseline)", 0.1),
    )
    for ax, group, label, margin in panels:
        ax.axvspan(-margin, margin, color="0.9", label="equivalence margin")
        ax.axvline(0, color="0.4", lw=0.8)
        xs = [abs(v) for c in group for v in _x(c) if math.isfinite(v)]
        lim = 1.1 * max([4 * margin, *xs])  # an infinite bound is drawn to the edge
        ax.set_xlim(-lim, lim)
        for i, c in enumerate(group):
            est, lo, hi = (min(max(v, -lim), lim) for v in _x(c))
            colour = next(
                (v for k, v in VERDICT_COLOURS.items() if c["verdict"].startswith(k)), "0.5"
            )
            ax.plot([lo, hi], [i, i], color=colour, lw=2)
            ax.plot([est], [i], "o", color=colour)
        ax.set_yticks(range(len(group)))
        names = [f"{c['scenario']} vs {c['baseline']} ({c['seeds']} seeds)" for c in group]
        ax.set_yticklabels(names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(label, fontsize=9)
    handles = [plt.Line2D([], [], color=v, lw=2, label=k) for k, v in VERDICT_COLOURS.items()]
    handles.append(plt.Line2D([], [], color="0.5", lw=2, label="open / undecided"))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle("Fourth edition: each comparison's effect and its interval at its last look")
    fig.subplots_adjust(bottom=0.12 + 0.3 / max(len(rows), 1), left=0.2, right=0.98)
    fig.savefig(out, bbox_inches="tight")  # the long labels of the left panel stay whole
    plt.close(fig)
    return out


# ------------------------------------------------- the second amendment's checks (5 Dec 2026)

BEFORE = "before_second_amendment"  # the fourth edition's JSON as it was before the amendment


def gaps_table(docs: Path) -> str:
    """Per scenario, each method's largest simulated time between two evaluations of one
    seed against the cadence ``eval.every_time`` (``docs/results/fourth/gaps.json``)."""
    found = _load(docs / "fourth" / "gaps.json") or {}
    rows = []
    for name, g in sorted(found.items()):
        every = g["every_time"]
        cells_ = [
            f"{a}: {m['largest_gap']:,.4g} ({m['largest_gap'] / every:.2f}×)"
            for a, m in g["methods"].items()
        ]
        rows.append([f"`{name}`", f"{every:g}", "; ".join(cells_)])
    headers = ["scenario", "eval.every_time", "largest gap between evaluations (× cadence)"]
    return markdown(headers, ["---", "---:", "---"], rows)


def null_table(docs: Path) -> str:
    """Per scenario and method, the rule's "a side ahead" rate under nulls split from the
    method's real per-seed values (``docs/results/fourth/null.json``)."""
    found = _load(docs / "fourth" / "null.json") or {}
    rows = []
    for name, r in sorted(found.items()):
        for a, m in r["methods"].items():
            never = "" if m["never_reached"] is None else f"{m['never_reached']} of {m['seeds']}"
            rate = f"{100 * m['ahead_either_side']:.1f} % ± {100 * m['monte_carlo_se']:.1f} %"
            looks = ", ".join(map(str, m["looks"]))
            rows.append([f"`{name}`", a, r["statistic"], never, looks, rate])
    headers = ["scenario", "method", "statistic", "never reach 80 %", "looks", "a side ahead"]
    return markdown(headers, ["---", "---", "---", "---:", "---", "---:"], rows)


def moved(docs: Path) -> str:
    """The comparisons whose verdict the second amendment changed: before → after."""
    lines = []
    for row in ROWS:
        for scenario in row.scenarios:
            for c in cells(docs, scenario):
                if c["edition"] != "fourth":
                    continue
                old = _old_verdict(docs, c)
                if old is not None and old != c["verdict"]:
                    lines.append(f"- {comparison_name(c)}: {old} → **{c['verdict']}**")
    return "\n".join(dict.fromkeys(lines)) or "- none: every verdict stands as it was."


def _old_verdict(docs: Path, c: dict) -> str | None:
    before = docs / "fourth" / BEFORE
    if c["statistic"] == "lead_growth":
        g = _load(before / f"{c['env']}_gap_{c['baseline']}.json")
        return None if g is None else g["verdict"]
    a = _load(before / f"{c['scenario']}.json")
    return None if a is None else a["comparisons"][c["baseline"]]["verdict"]


def adastop_summary(docs: Path) -> str:
    """AdaStop's agreement with the verdicts in words (``docs/results/fourth/adastop.json``)."""
    a = _load(docs / "fourth" / "adastop.json")
    if a is None:
        return "not run yet."
    rows = [(n, b, c) for n, sc in a["scenarios"].items() for b, c in sc["comparisons"].items()]
    differ = [
        f"`{n}` vs {b} (stability {c['stability']:.2f})" for n, b, c in rows if not c["agree"]
    ]
    text = f"AdaStop agrees with the verdict on {len(rows) - len(differ)} of {len(rows)}"
    text += " comparisons" + (f"; it differs on {', '.join(differ)}." if differ else ".")
    return text
