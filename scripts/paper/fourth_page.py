"""The opening screen of docs/results.md: the paper's experiment table, row by row, with what
jaxnigt finds, and one figure of every decided effect (a forest plot).

Each row of the paper's table names its scenarios; a scenario's cell comes from the newest
edition that ran it: the fourth edition's sequential JSON (``docs/results/fourth``), else the
third edition's analysis (``docs/results/third``, 5 seeds, no sequential rule), else the second
edition's (``docs/results``), else "not run at CPU scale".  Nothing is computed here: every
interval and verdict is read from that JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from jaxnigt.analysis import report_text
from paper import claims, third_scenarios

VERDICT_COLOURS = {"confirmed": "tab:green", "refuted": "tab:red", "equivalent": "tab:blue"}


@dataclasses.dataclass(frozen=True)
class Row:
    """A row of the paper's experiment table: its setting, what the paper observed, and the
    scenarios (and lead-growth claims, ``<env>_gap``) that test it."""

    name: str
    setting: str
    paper: str
    scenarios: tuple[str, ...]


ROWS = (
    Row("Equal compute and communication", "n = 10, h_i = 1, κ_i = 0",
        "the three methods perform about the same", ("point_mass_equal", "reacher_equal")),
    Row("Heterogeneous compute and communication", "n = 10, h_i = √i, κ_i = √i",
        "Rennala NIGT converges faster", ("point_mass_sqrt", "reacher_sqrt")),
    Row("More expensive communication", "n = 10, h_i = √i, κ_i = √i·d^{1/4}",
        "Rennala NIGT is the most robust; its lead grows with the communication cost",
        ("point_mass_sqrt_dim", "point_mass_gap", "reacher_sqrt_dim", "reacher_gap")),
    Row("Other environments", "n = 10, h_i = √i, κ_i = √i·d^{1/4}",
        "a clear lead on Reacher, smaller gaps on Walker2d and Hopper",
        ("reacher_sqrt_dim", "hopper_sqrt_dim", "walker2d_sqrt_dim")),
    Row("n = 100 workers", "h_i = √i, κ_i = √i·d^{1/4}",
        "Rennala NIGT still fastest with heterogeneous times and costly communication",
        ("point_mass_n100", "reacher_n100")),
    Row("Heterogeneous environments", "n = 2, h = (1, 10), κ = 0, one worker's observations "
        "negated", "Malenia NIGT clearly above AFedPG", ("point_mass_hetero", "reacher_hetero")),
)  # fmt: skip
_STATISTIC = {"time_to_80": "time-to-80 % ratio", "average": "Δ average return",
              "second_half": "Δ second-half return"}  # fmt: skip


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def cells(docs: Path, scenario: str) -> list[dict]:
    """One dict per comparison of ``scenario``: baseline, verdict, effect, seeds, edition."""
    if scenario.endswith("_gap"):
        return _gap_cells(docs, scenario.removesuffix("_gap"))
    fourth = _load(docs / "fourth" / f"{scenario}.json")
    if fourth is not None:
        return [{"scenario": scenario, "reference": fourth["reference"], "baseline": b,
                 "verdict": r["verdict"],
                 "effect": r["looks"][-1]["interval"], "seeds": r["seeds"],
                 "statistic": fourth["statistic"], "edition": "fourth",
                 "margin": r["looks"][-1]["margin"]}
                for b, r in fourth["comparisons"].items()]  # fmt: skip
    for edition, where in (("third", docs / "third"), ("second", docs)):
        a = _load(where / f"{scenario}.json")
        if a is not None and "comparisons" in a:
            statistic = a.get("statistic", "average")
            # an earlier edition's comparison: its own outcome (the claim's verdict of that
            # edition spans several comparisons, and a comparison outside the claim has none)
            return [{"scenario": scenario, "reference": a["reference"], "baseline": b,
                     "verdict": report_text.outcome_text(claims.row(a, b), a["reference"], b),
                     "effect": c.get("effect", c["average_return_difference"]),
                     "seeds": a["algorithms"][a["reference"]]["seeds"], "statistic": statistic,
                     "edition": edition, "margin": None}
                    for b, c in a["comparisons"].items()]  # fmt: skip
    return [{"scenario": scenario, "baseline": None, "verdict": "not run at CPU scale",
             "effect": None, "seeds": None, "statistic": None, "edition": None,
             "margin": None}]  # fmt: skip


def _gap_cells(docs: Path, env: str) -> list[dict]:
    out = []
    for baseline in ("sync_nigt", "afedpg"):
        g = _load(docs / "fourth" / f"{env}_gap_{baseline}.json")
        edition = "fourth"
        if g is None:
            g, edition = _load(docs / "third" / f"{env}_gap_{baseline}.json"), "third"
        if g is None:
            continue
        effect = g["looks"][-1]["interval"] if "looks" in g else g["log_lead_difference"]
        verdict = g["verdict"] if edition == "fourth" else f"{g['verdict']} (5 seeds)"
        out.append({"scenario": f"{env}: √i → √i·d^{{1/4}}", "reference": "rennala_nigt",
                    "baseline": baseline, "verdict": verdict, "effect": effect,
                    "seeds": g.get("seeds", 5), "statistic": "lead_growth", "edition": edition,
                    "margin": g["looks"][-1]["margin"] if "looks" in g else None})  # fmt: skip
    return out


def _effect(c: dict) -> str:
    if c["effect"] is None:
        return "–"
    what = "growth of the log time ratio" if c["statistic"] == "lead_growth" else (
        _STATISTIC.get(c["statistic"], c["statistic"]))  # fmt: skip
    return f"{what}: {report_text.fmt(c['effect'])}"


def table(docs: Path) -> str:
    """The paper's experiment table with this project's verdicts (Markdown)."""
    lines = ["| row of the paper's table | setting | the paper observed | scenario | comparison "
             "| jaxnigt finds | effect [interval] | seeds | edition |",
             "|---|---|---|---|---|---|---|---:|---|"]  # fmt: skip
    for row in ROWS:
        first = True
        for scenario in row.scenarios:
            for c in cells(docs, scenario):
                head = (f"**{row.name}**", row.setting, row.paper) if first else ("〃", "", "")
                first = False
                vs = f"{c['reference']} vs {c['baseline']}" if c["baseline"] else "–"
                seeds = "–" if c["seeds"] is None else str(c["seeds"])
                verdict = f"**{c['verdict']}**" if c["edition"] == "fourth" else c["verdict"]
                # a scenario tuned on a reduced grid (a stated deviation) is marked with ‡
                mark = " ‡" if c["scenario"] in third_scenarios.GRIDS else ""
                lines.append(f"| {' | '.join(head)} | `{c['scenario']}`{mark} | {vs} | {verdict} "
                             f"| {_effect(c)} | {seeds} | {c['edition'] or '–'} |")  # fmt: skip
    return "\n".join(lines)


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
        text += (f"; a plain one ({earlier} of {len(found)}) is an earlier edition's at 5 seeds, "
                 "not yet rerun under the rule")  # fmt: skip
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
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * max(len(time), len(ret), 4) + 1.6),
                             dpi=100, gridspec_kw={"wspace": 0.9})  # fmt: skip
    panels = (
        (axes[0], time, "log time ratio (baseline / reference; lead growth: its change)",
         math.log(1.25)),
        (axes[1], ret, "return difference / improvement (reference − baseline)", 0.1),
    )  # fmt: skip
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
