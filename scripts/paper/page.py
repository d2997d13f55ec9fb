"""docs/results.md: the page, filled from the analysis JSON of every edition.

``scripts/paper/page.md`` is the page's prose with placeholders; :func:`page` fills them
with tables made from the JSON in ``docs/results`` (the second edition's), ``docs/results/
third*`` (the third edition and its labelled variants); :func:`write_tables` writes the
second edition's tables on their own (``verdicts.md``, ``tuning.md``).  Nothing here
computes a statistic: every number is read from the JSON, every verdict text is
:mod:`jaxnigt.analysis.report_text`'s.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from jaxnigt.analysis import report_text, verdicts
from paper import claims, fifth_page, fourth_page, second, third_scenarios
from paper import store as results_store
from paper.claims import CLAIMS, GROWTH, claim_verdict, cluster_text, row
from paper.scenarios import DEFAULT_MODEL, MODELS, Scenario

HERE = Path(__file__).resolve().parent
PAGE_TEMPLATE = HERE / "page.md"  # docs/results.md: the fifth edition, then the fourth
# The earlier editions' pages, in docs/results/: (file, template)
EDITIONS = (
    ("third_edition.md", HERE / "third_page.md"),
    ("second_edition.md", HERE / "second_page.md"),
)


def _load(docs: Path, name: str) -> dict | None:
    path = docs / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _analyses(docs: Path):
    """``(scenario, model, analysis JSON)`` of every run analysed in ``docs``, in order."""
    for sc in second.SCENARIOS.values():
        for model in sc.models:
            a = _load(docs, sc.model_dir(model))
            if a is not None:
                yield sc, model, a


def _command(sc: Scenario, model) -> str:
    command = f"`python scripts/paper second run {sc.name}"
    if tuple(model) != DEFAULT_MODEL:
        command += f" --models {model[0]}/{model[1]}"
    return command + "`"


def _claim_text(a: dict) -> str:
    return CLAIMS[a["claim"]].text(a["comparisons"])


def _growth(env: str) -> str:
    """The lead-growth claim's two scenarios on ``env``, e.g. ``point_mass_sqrt`` → ``…_dim``."""
    small, large = GROWTH.settings
    return f"`{env}_{small}` → `{env}_{large}`"


def _gaps(docs: Path):
    """``(env, baseline, gap JSON)`` of every lead-growth analysis in ``docs``."""
    for env in GROWTH.envs:
        for baseline in GROWTH.baselines:
            g = _load(docs, f"{env}_gap_{baseline}")
            if g is not None:
                yield env, baseline, g


def verdict_rows(docs: Path) -> list[str]:
    """One row per scenario and cluster model: the claim and its verdict (JSON written
    before verdicts were recomputed is decided again by the same rule; a stored verdict that
    disagrees is reported)."""
    rows = [
        "| claim | scenario | model (link / allreduce) | what is claimed | verdict "
        "| improvement / spread | command |",
        "|---|---|---|---|---|---:|---|",
    ]
    for sc, model, a in _analyses(docs):
        decision = claim_verdict(a)
        text = "–" if decision is None else f"**{report_text.verdict_text(decision)}**"
        if decision is not None and a.get("verdict") not in (None, decision["verdict"]):
            print(
                f"[results] {sc.model_dir(model)}: stored verdict {a['verdict']!r}; the "
                f"rule gives {decision['verdict']!r} (shown)"
            )
        rows.append(
            f"| {a['claim']} | `{sc.name}` | {model[0]} / {model[1]} | {_claim_text(a)} | {text} "
            f"| {a['improvement_over_spread']:.0f} | {_command(sc, model)} |"
        )
    for env, baseline, g in _gaps(docs):
        rows.append(
            f"| {GROWTH.text} | {_growth(env)} | shared / all | {GROWTH.reference}'s "
            f"lead over {baseline} grows | **{report_text.verdict_text(g)}** | – "
            f"| `python scripts/paper second analyze` |"
        )
    return rows


def comparison_rows(docs: Path) -> list[str]:
    """One row per comparison: its effects with their intervals and the row's outcome."""
    rows = [
        "| scenario | model (link / allreduce) | comparison | Δ average return [90 % CI] "
        "| time to 50 %: ratio [90 % CI] | outcome of the row |",
        "|---|---|---|---|---|---|",
    ]
    for sc, model, a in _analyses(docs):
        for b in a["comparisons"]:
            c = row(a, b)
            rows.append(
                f"| `{sc.name}` | {model[0]} / {model[1]} | {a['reference']} vs {b} "
                f"| {report_text.fmt(c['average_return_difference'])} "
                f"| {report_text.fmt(c['time_to_target_ratio']['0.5'])} "
                f"| {report_text.outcome_text(c, a['reference'], b)} |"
            )
    for env, baseline, g in _gaps(docs):
        c = {"outcome": verdicts.outcome(g["lead_difference"]), "needed_seeds": g["needed_seeds"]}
        text = report_text.outcome_text(c, "the lead grows", "the lead shrinks")
        rows.append(
            f"| {_growth(env)} | shared / all | growth of the lead over "
            f"{baseline} (per unit of improvement) | {report_text.fmt(g['lead_difference'], 3)} "
            f"| – | {text.replace(' ahead', '')} |"
        )
    return rows


def tuning_rows(docs: Path) -> list[str]:
    """One Markdown row per tuned (family, cluster-model variant, algorithm)."""
    rows = [
        "| family | model variant | algorithm | α grid (log2) | η grid | chosen α | chosen η "
        "| score | interior | tuning file |",
        "|---|---|---|---|---|---|---|---:|---|---|",
    ]
    for path in sorted(docs.glob("tuning_*.json")):
        t = json.loads(path.read_text())
        for a, c in t["chosen"].items():
            grid = t["lr_exp"][a]
            what = (
                ("–",) * 3
                if c is None
                else (f"$2^{{{c['lr_exp']}}}$", f"{c['eta']:g}", f"{c['score']:.2f}")
            )
            rows.append(
                f"| {t['family']} | {t['variant'] or 'default'} | {a} | {min(grid)} … {max(grid)} "
                f"| {', '.join(f'{e:g}' for e in t['eta'])} | {' | '.join(what)} "
                f"| {'yes' if t['interior'][a] else '**no**'} "
                f"| [JSON](results/{path.name}) |"
            )
    return rows


def write_tables(docs: Path) -> None:
    """``DOCS/verdicts.md`` (verdicts, then comparisons) and ``DOCS/tuning.md``."""
    text = "\n".join(verdict_rows(docs)) + "\n\n" + "\n".join(comparison_rows(docs)) + "\n"
    (docs / "verdicts.md").write_text(text)
    (docs / "tuning.md").write_text("\n".join(tuning_rows(docs)) + "\n")


def _cell(a: dict | None, baseline: str) -> str:
    if a is None:
        return "not run"
    c = row(a, baseline)
    diff = report_text.fmt(c["average_return_difference"])
    return f"{diff}: {report_text.outcome_text(c, a['reference'], baseline)}"


THIRD = "third"  # DOCS/third: the third edition's analysis JSON (paper.third)
THIRD_ETA = "third_eta"  # DOCS/third_eta: its labelled variant with η ∈ {0.001 … 1}
THIRD_ETA_M = "third_eta_M"  # DOCS/third_eta_M: that variant with M ∈ {20 … 200} too
# Each third-edition table's column "one step back": the directory and the column's label
# (None: the second edition's analysis JSON in DOCS itself).
_BEFORE = {
    THIRD: (None, "second edition"),
    THIRD_ETA: (THIRD, "paper's η grid"),
    THIRD_ETA_M: (THIRD_ETA, "M ∈ {20, 30, 50}"),
}
_STATISTIC = {
    "time_to_80": "time to 80 %: ratio, baseline / reference",
    "average": "Δ average return",
    "second_half": "Δ second-half return",
}


def _third(docs: Path, sub: str = THIRD):
    """``(name, analysis JSON)`` of every third-edition run in ``DOCS/<sub>``, in the
    catalogue's order (:data:`paper.third_scenarios.SCENARIOS`), sensitivity runs after their
    scenario."""
    where = docs / sub
    for sc in third_scenarios.SCENARIOS.values():
        for name in [sc.model_dir(m) for m in sc.models] + [f"{sc.name}__match_M"]:
            a = _load(where, name)
            if a is not None:
                yield name, a


def _tuned_text(a: dict) -> str:
    parts = []
    for alg, v in a["tuned"].items():
        text = f"{alg} $2^{{{round(math.log2(v['learning_rate']))}}}$, η {v['eta']:g}"
        if alg in ("rennala_nigt", "malenia_nigt"):
            text += f", M {v['M']}"
        elif v.get("per_worker_batch") == "match_M":  # the sensitivity's batch: its own M
            text += f", $b = \\lceil {v['M']}/n \\rceil$"
        parts.append(text)
    return "; ".join(parts)


def _batch(a: dict) -> int | None:
    """The M behind the matched Sync NIGT's b = ⌈M/n⌉ of a sensitivity run's analysis."""
    return a["tuned"].get("sync_nigt", {}).get("M")


def _model(name: str, a: dict) -> str:
    """The cluster model (link / allreduce) of a third-edition run, from its directory name."""
    suffix = name.removeprefix(a["scenario"]).removeprefix("__")
    return "shared / all" if suffix in ("", "match_M") else suffix.replace("_", " / ", 1)


def _matched(name: str, a: dict) -> bool:
    """Whether a third-edition run is the sensitivity with Sync NIGT's matched batch."""
    return name.removeprefix(a["scenario"]).removeprefix("__") == "match_M"


def third_rows(docs: Path, sub: str = THIRD) -> list[str]:
    """The third edition's claims table from ``DOCS/<sub>``: one row per comparison of every
    run, its claim's statistic with the interval, the second view, the verdict, and the
    verdict of the same scenario and model one step back (:data:`_BEFORE`) — the second
    edition's for the third edition itself, the third edition's (the paper's η grid) for its
    η variant, the η variant's (the paper's M grid) for the variant that widens M too. Each
    run's budget and tuned values are :func:`third_runs`'s."""
    back, label = _BEFORE[sub]
    before = docs if back is None else docs / back
    rows = [
        "| scenario | model (link / allreduce) | comparison | primary statistic [90 % CI] "
        "| Δ average return [90 % CI] | median times to 80 % (reference / baseline) "
        f"| verdict | {label} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, a in _third(docs, sub):
        matched = _matched(name, a)
        old = _load(before, name)
        if matched and old is not None and _batch(old) != _batch(a):
            old = None  # a sensitivity row is comparable one step back only at the same batch
        old_text = "–" if old is None or old.get("verdict") is None else old["verdict"]
        decision = f"**{report_text.verdict_text(a)}**"
        if matched:
            decision = "sensitivity: Sync NIGT with `per_worker_batch: match_M`"
        ref = a["algorithms"][a["reference"]]["time_to_target"].get("0.8")
        for b, c in a["comparisons"].items():
            other = a["algorithms"][b]["time_to_target"].get("0.8")
            rows.append(
                f"| `{a['scenario']}` | {_model(name, a)} | {a['reference']} vs {b} "
                f"| {_STATISTIC[a['statistic']]}: **{report_text.fmt(c['effect'])}** "
                f"({report_text.outcome_text(c, a['reference'], b)}) "
                f"| {report_text.fmt(c['average_return_difference'])} "
                f"| {_num(ref)} / {_num(other)} | {decision} | {old_text} |"
            )
            decision = "″"  # ditto: the run's verdict covers its comparisons
    for env in GROWTH.envs:
        for baseline in GROWTH.baselines:
            g = _load(docs / sub, f"{env}_gap_{baseline}")
            if g is not None:
                iv = report_text.fmt(g["log_lead_difference"])
                rows.append(
                    f"| {_growth(env)} | shared / all | growth of the log "
                    f"time-to-80 % ratio over {baseline} | **{iv}** | – | – "
                    f"| **{report_text.verdict_text(g)}** | – |"
                )
    return rows


def third_runs(docs: Path, sub: str = THIRD) -> list[str]:
    """The budget and tuned values of every run of :func:`third_rows`'s table, one row per
    run."""
    rows = [
        "| scenario | model (link / allreduce) | budget | tuned (α, η, M) |",
        "|---|---|---:|---|",
    ]
    for name, a in _third(docs, sub):
        model = _model(name, a) + (", matched batch" if _matched(name, a) else "")
        rows.append(f"| `{a['scenario']}` | {model} | {a['budget']:,.0f} | {_tuned_text(a)} |")
    return rows


def _third_tables(docs: Path, sub: str) -> str:
    """A third-edition placeholder: the claims table, then its runs' budgets and tunings."""
    return "\n\n".join(
        (
            "\n".join(third_rows(docs, sub)),
            "Each run's budget and tuned values (step size α, η, and M for the NIGT methods):",
            "\n".join(third_runs(docs, sub)),
        )
    )


def _num(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "∞"
    return f"{v:,.0f}"


def page(docs: Path, template: Path = PAGE_TEMPLATE) -> str:
    """``template`` with its placeholders filled from the analysis JSON in ``docs``:
    ``{{VERDICTS}}``, ``{{COMPARISONS}}``, ``{{TUNING}}``, ``{{SCENARIOS}}``, the third
    edition's ``{{THIRD…}}`` (claims, then each run's budget and tuning), the fourth edition's
    ``{{FOURTH_TABLE}}`` (its opening table) and ``{{FOURTH_SETTINGS}}`` (the rows' settings),
    ``{{MATRIX:<env>}}`` (the four cluster models of ``<env>_sqrt_dim`` and ``<env>_n100``)
    and ``{{HETERO:<scenario>}}`` (per-type second-half returns); the fifth edition's
    ``{{FIFTH_…}}`` (:func:`paper.fifth_page.fill`)."""
    text = template.read_text()
    if text.startswith("<!--"):  # the template's own note
        text = text.split("\n", 1)[1]
    note = f"<!-- Written by `python scripts/paper page` from scripts/paper/{template.name}. -->"
    text = f"{note}\n{text}"
    text = text.replace("{{VERDICTS}}", "\n".join(verdict_rows(docs)))
    text = text.replace("{{COMPARISONS}}", "\n".join(comparison_rows(docs)))
    text = text.replace("{{TUNING}}", "\n".join(tuning_rows(docs)))
    for tag, sub in (("THIRD", THIRD), ("THIRD_ETA", THIRD_ETA), ("THIRD_ETA_M", THIRD_ETA_M)):
        text = text.replace(f"{{{{{tag}}}}}", _third_tables(docs, sub))
    text = text.replace("{{SCENARIOS}}", "\n".join(_scenario_rows(docs)))
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
    for env in ("point_mass", "reacher"):
        rows = []
        for m in MODELS:
            small = _load(docs, second.SCENARIOS[f"{env}_sqrt_dim"].model_dir(m))
            large = _load(docs, second.SCENARIOS[f"{env}_n100"].model_dir(m))
            cells = [_cell(a, b) for a in (small, large) for b in GROWTH.baselines]
            rows.append(f"| {m[0]} / {m[1]} | {' | '.join(cells)} |")
        text = text.replace(f"{{{{MATRIX:{env}}}}}", "\n".join(rows))
    for sc in second.SCENARIOS.values():
        tag = f"{{{{HETERO:{sc.name}}}}}"
        if tag in text:
            a = _load(docs, sc.name)
            rows = [
                f"| {alg} | {d['eval_type0']:.2f} | {d['eval_type1']:.2f} | "
                f"{d['second_half_median']:.2f} |"
                for alg, d in (a["algorithms"].items() if a else ())
            ]
            text = text.replace(tag, "\n".join(rows) or "| not run | | | |")
    left = re.findall(r"\{\{[^}]*\}\}", text)
    if left:
        raise SystemExit(f"results: unknown placeholders in {template}: {left}")
    return text


def _scenario_rows(docs: Path) -> list[str]:
    rows = []
    for sc in second.SCENARIOS.values():
        a = _load(docs, sc.name)
        if a is None:
            continue
        env = second.FAMILIES[sc.family].base["env"]
        where = env["name"] + (f", $H = {env['horizon']}$" if "horizon" in env else "")
        updates = " / ".join(f"{d['updates_median']:,.0f}" for d in a["algorithms"].values())
        rows.append(
            f"| `{sc.name}` | {where}, {cluster_text(sc.setting)} | {a['budget']:,.0f} | "
            f"{updates} ({' / '.join(a['algorithms'])}) | [{sc.name}.png](results/{sc.name}.png) |"
        )
    return rows


# --------------------------------------------------------------------------------- main


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
    inv = results_store.inventory(docs / "fourth" / "store")
    text = f"{inv.blocks} seed blocks and {inv.tuning} tuning programs"
    text += f", {inv.reports} report run{'s' * (inv.reports != 1)}" if inv.reports else ""
    text += f", {inv.finished_mb:.1f} MB"
    if inv.unfinished:
        plural = "s" * (inv.unfinished != 1)
        text += (
            f", and the newest checkpoints of {inv.unfinished} unfinished program{plural}, "
            f"{inv.unfinished_mb:.1f} MB"
        )
    return f"{text}; budget {results_store.BUDGET_MB} MB"


def _in_results(text: str) -> str:
    """A page of docs/ moved into docs/results/: its links to ``results/...`` lose the
    prefix."""
    return text.replace("](results/", "](")


def pages(docs: Path) -> dict[Path, str]:
    """Every page the JSON in ``docs`` (docs/results) gives: the opening page and each
    earlier edition's."""
    out = {docs.parent / "results.md": page(docs)}
    for name, template in EDITIONS:
        out[docs / name] = _in_results(page(docs, template))
    return out
