"""docs/results.md: the page, filled from the analysis JSON of the editions it shows.

``scripts/paper/page.md`` is the page's prose with placeholders; :func:`page` fills them
with tables made from the JSON in ``docs/results/fourth`` and ``docs/results/fifth`` (and,
for a row no later edition ran, the earlier editions' JSON there).  Nothing here computes a
statistic: every number is read from the JSON, every verdict text is
:mod:`jaxnigt.analysis.report_text`'s.

The earlier editions' pages are frozen: ``docs/results/second_edition.md`` (with its tables
``verdicts.md`` and ``tuning.md``) and ``docs/results/third_edition.md`` are committed text,
no longer generated; their templates, ``scripts/paper/second_page.md`` and ``third_page.md``,
and the code that filled them are in the git history (``git log --diff-filter=D --
scripts/paper/third_page.md`` names the commit whose parent has them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from paper import claims, fifth_page, fourth_page, heavy, hetero
from paper import store as paper_store

HERE = Path(__file__).resolve().parent
PAGE_TEMPLATE = HERE / "page.md"  # docs/results.md: the fifth edition, then the fourth


def page(docs: Path, template: Path = PAGE_TEMPLATE) -> str:
    """``template`` with its placeholders filled from the analysis JSON in ``docs``: the
    fourth edition's ``{{FOURTH_TABLE}}`` (its opening table) and ``{{FOURTH_SETTINGS}}`` (the
    rows' settings), the outage rows' ``{{OUTAGE_…}}``; the fifth edition's ``{{FIFTH_…}}``
    (:func:`paper.fifth_page.fill`)."""
    text = template.read_text()
    if text.startswith("<!--"):  # the template's own note
        text = text.split("\n", 1)[1]
    note = f"<!-- Written by `python scripts/paper page` from scripts/paper/{template.name}. -->"
    text = f"{note}\n{text}"
    text = fifth_page.fill(text, docs)  # the fifth edition's {{FIFTH_…}} and the prose's numbers
    if "{{FOURTH_TABLE}}" in text:
        text = text.replace("{{FOURTH_TABLE}}", fourth_page.table(docs))
        text = text.replace("{{FOURTH_SETTINGS}}", fourth_page.settings(docs))
        text = text.replace("{{FOURTH_EDITIONS}}", fifth_page.fourth_legend(docs))
        text = text.replace("{{FOURTH_SIM}}", _simulation(docs))
        text = text.replace("{{FOURTH_SIM_SUITE}}", _simulation(docs, "simulation_suite.jsonl"))
        text = text.replace("{{STORE_SIZE}}", _store_size(docs))
        text = text.replace("{{FOURTH_GAPS}}", fourth_page.gaps_table(docs))
        text = text.replace("{{FOURTH_NULL}}", fourth_page.null_table(docs))
        text = text.replace("{{FOURTH_MOVED}}", fourth_page.moved(docs))
        text = text.replace("{{FOURTH_ADASTOP}}", fourth_page.adastop_summary(docs))
    if "{{OUTAGE_TABLE}}" in text:  # the outage rows: a table and a Holm family of their own
        rows = claims.OUTAGE_ROWS
        table = fourth_page.table(docs, fourth_page.OUTAGE_COLUMNS, rows)
        text = text.replace("{{OUTAGE_TABLE}}", table)
        settings = fourth_page.settings(docs, rows, fourth_page.OUTAGE_HEADERS)
        text = text.replace("{{OUTAGE_SETTINGS}}", settings)
    if "{{PHYSICS_ROW}}" in text:
        text = text.replace("{{PHYSICS_ROW}}", physics_row(docs))
    for module in (heavy, hetero):  # pages of registered rows: {{HEAVY_ROWS}}, {{HETERO_ROWS}}
        key = "{{" + module.SPEC.name.upper() + "_ROWS}}"
        if key in text:
            text = text.replace(key, rows_table(docs, module.SPEC))
    left = re.findall(r"\{\{[^}]*\}\}", text)
    if left:
        raise SystemExit(f"results: unknown placeholders in {template}: {left}")
    return text


PHYSICS = "physics/compare.json"  # `jaxnigt compare`'s JSON of the physics row


def physics_row(docs: Path) -> str:
    """The heterogeneous-physics row (docs/results/physics.md) from its comparison's JSON:
    the effect with its interval, p beside the smallest p its seeds allow, the verdict, and
    each method's median second-half return per worker type (``types.json``)."""
    path = docs / PHYSICS
    if not path.is_file():
        return "*Not run yet.*"
    a = json.loads(path.read_text())
    (name, c), *_ = a["comparisons"].items()
    e = c["effect"]
    seeds = next(int(m["seeds"]) for m in a["algorithms"].values())
    typed = json.loads((path.parent / "types.json").read_text())
    per_type = "; ".join(
        f"{m} " + " / ".join(f"{v['median']:.2f}" for v in per.values()) for m, per in typed.items()
    )
    head = (
        "| comparison | second-half return: difference [90 % CI] | p (smallest) | seeds | verdict |"
    )
    return "\n".join([
        head,
        "|---|---|---|---:|---|",
        f"| {a['reference']} − {name} | {e['estimate']:.2f} [{e['low']:.2f}, {e['high']:.2f}] "
        f"| {c['p']:.3g} ({c['p_min']:.2g}) | {seeds} | {a['verdict']} |",
        "",
        f"Median second-half return of type 0 / type 1 (not decided on): {per_type}.",
    ])  # fmt: skip


def _effect(statistic: str, e: dict | None) -> str:
    """A comparison's effect with its interval; with ``e`` None, what the effect is: a time
    ratio (baseline over reference) or a difference of returns."""
    if e is None:
        return "time ratio" if "time" in statistic else "Δ return"
    return f"{e['estimate']:.2f} [{e['low']:.2f}, {e['high']:.2f}]"


def rows_table(docs: Path, spec) -> str:
    """A page of registered rows (:class:`paper.rows.Rows`) from its analysis JSON: per row
    and baseline, the rule's last look (effect, interval, p beside the smallest p its seeds
    allow, seeds, verdict), Holm's adjusted p over the family, and the first side statistic
    (effect over every stored seed); the rows not analyzed yet are named under it."""
    base = docs / spec.name
    family = (
        json.loads((base / "family.json").read_text()) if (base / "family.json").is_file() else {}
    )
    holm = {k: v for f in family.values() for k, v in f["holm_p"].items()}
    side = spec.beside[0] if spec.beside else None
    kind = _effect(spec.statistic, None)
    head = f"| row | baseline | {kind} [interval] | p (smallest) | seeds | verdict | Holm p |"
    lines = [
        head + (f" {side}: {_effect(side, None)} |" if side else ""),
        "|---|---|---|---|---:|---|---|" + ("---|" if side else ""),
    ]
    missing = []
    for row in spec.rows:
        path = base / row / "sequential.json"
        if not path.is_file():
            missing.append(f"`{row}`")
            continue
        found = json.loads(path.read_text())
        beside = base / row / f"beside_{side}.json"
        other = json.loads(beside.read_text())["comparisons"] if side and beside.is_file() else {}
        for b, c in found["comparisons"].items():
            last = c["looks"][-1]
            h = holm.get(f"{row}/{b}")
            cells = [
                f"`{row}`",
                b,
                _effect(spec.statistic, last["interval"]),
                f"{last['p']:.2g} ({last['p_min']:.2g})",
                str(c["seeds"]),
                f"**{c['verdict']}**",
                "–" if h is None else f"{h:.2g}",
            ]
            if side:
                cells.append(_effect(side, other[b]["effect"]) if b in other else "–")
            lines.append("| " + " | ".join(cells) + " |")
    if missing:
        lines += ["", f"Not run yet: {', '.join(missing)}."]
    return "\n".join(lines)


def _simulation(docs: Path, name: str = "simulation.jsonl") -> str:
    """The simulation's numbers (``docs/results/fourth/<name>``) in words."""
    path = docs / "fourth" / name
    if not path.is_file():
        return "(not run yet)"
    parts = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        kind = "difference of means" if r["statistic"] == "average" else "ratio of median times"
        regime = r.get("regime", "plain")
        kind += "" if regime == "plain" else f" ({regime.replace('_', ' ')})"
        what = "under the null" if r["effect"] == 0 else f"under an effect of {r['effect']:g}"
        rate = f"{100 * r['ahead_either_side']:.1f} % ± {100 * r['monte_carlo_se']:.1f} %"
        parts.append(f"{kind}, {what}: a side ahead in {rate} of {r['experiments']:,}")
    effects = r"(the effects: 0.8 standard deviations; a time factor $e^{0.4} \approx 1.5$)."
    return "; ".join(parts) + " " + effects


def _store_size(docs: Path) -> str:
    inv = paper_store.inventory(docs / "fourth" / "store")
    n = lambda kind: inv.finished.get(kind, 0)
    text = f"{n('blocks')} seed blocks and {n('tuning')} tuning programs"
    text += f", {n('reports')} report run{'s' * (n('reports') != 1)}" if n("reports") else ""
    text += f", {inv.finished_mb:.1f} MB"
    if inv.unfinished:
        plural = "s" * (inv.unfinished != 1)
        text += (
            f", and the newest checkpoints of {inv.unfinished} unfinished program{plural}, "
            f"{inv.unfinished_mb:.1f} MB"
        )
    return f"{text}; budget {paper_store.BUDGET_MB} MB"


def pages(docs: Path) -> dict[Path, str]:
    """Every page the JSON in ``docs`` (docs/results) gives: the opening page,
    ``docs/results.md`` (the earlier editions' pages are frozen: the module docstring)."""
    return {docs.parent / "results.md": page(docs)}
