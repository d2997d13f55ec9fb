"""The second edition's analysis (``python scripts/paper second analyze``): per scenario and
cluster model, :func:`jaxnigt.analysis.compare` of the claim's reference (Rennala NIGT;
Malenia NIGT for heterogeneous environments) against every baseline, the claim's verdict over
its baselines (:mod:`paper.claims`), and :func:`jaxnigt.analysis.verdicts.lead_growth` from
``<env>_sqrt`` to ``<env>_sqrt_dim`` (:data:`paper.claims.GROWTH`); JSON and plots.
"""

from __future__ import annotations

import json
from pathlib import Path

from jaxnigt import analysis
from jaxnigt import config as config_lib
from jaxnigt.analysis import run_data, verdicts
from paper.claims import CLAIMS, GROWTH, claim_verdict
from paper.scenarios import Scenario
from paper.second import SCENARIOS


def analyze_run(sc: Scenario, model, run_dir: Path) -> tuple[dict, run_data.Run]:
    run = run_data.load_run(run_dir)
    claim = CLAIMS[sc.claim]
    result = analysis.compare(run, claim.reference, claim=claim.kind or "ahead")
    result.update(scenario=sc.name, model={"link": model[0], "allreduce": model[1]})
    result.update(claim=sc.claim, run=sc.model_dir(model))
    decision = claim_verdict(result)
    result["verdict"] = None if decision is None else decision["verdict"]
    result["needed_seeds"] = None if decision is None else decision["needed_seeds"]
    return result, run


def gap_growth(small: tuple, large: tuple, baseline: str) -> dict:
    """Does the reference's lead over ``baseline`` (in average return, per unit of
    improvement) grow from scenario ``small`` to ``large``?  Each is ``(analysis, run)``."""

    def groups(a, run):
        methods = run.algorithms()
        values = [methods[m].statistic("average", run.budget) for m in (a["reference"], baseline)]
        return (*values, a["best_second_half_median"] - a["initial_median_return"])

    return verdicts.lead_growth(groups(*small), groups(*large))


def analyze_all(out: Path, docs: Path, names: list[str] | None = None) -> None:
    """Analyzes the finished runs of the scenarios ``names`` (default every one); the
    tables are :func:`paper.page.write_tables`'s."""
    from jaxnigt.run.plots import plot_runs

    analyses = {}
    for sc in SCENARIOS.values():
        if names and sc.name not in names:
            continue
        for model in sc.models:
            name, run_dir = sc.model_dir(model), out / sc.model_dir(model)
            if not (run_dir / "summary.json").is_file():
                continue
            a, run = analyze_run(sc, model, run_dir)
            analyses[name] = (a, run)
            (docs / f"{name}.json").write_text(json.dumps(a, indent=2) + "\n")
            title = f"{sc.name} (link {model[0]}, allreduce {model[1]})"
            plot_runs([run_dir], out=docs / f"{name}.png", budget=run.budget, title=title)
            for t in (k for k in next(iter(a["algorithms"].values())) if k.startswith("eval_type")):
                plot_runs([run_dir], y=t, out=docs / f"{name}_{t}.png", title=f"{title}: {t}")
        model_matrix(out, sc, docs)
    for env in GROWTH.envs:
        small, large = (analyses.get(f"{env}_{key}") for key in GROWTH.settings)
        if small and large:
            for baseline in GROWTH.baselines:
                g = gap_growth(small, large, baseline)
                (docs / f"{env}_gap_{baseline}.json").write_text(json.dumps(g, indent=2) + "\n")


def model_matrix(out: Path, sc: Scenario, docs: Path) -> Path | None:
    """The four cluster models of ``sc`` side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxnigt.run.plots import draw_curves

    dirs = [(m, out / sc.model_dir(m)) for m in sc.models]
    if len(dirs) != 4 or not all((d / "metrics.csv").is_file() for _, d in dirs):
        return None
    budget = config_lib.from_dict(config_lib.read_yaml(dirs[0][1] / "config.yaml")).budget
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), dpi=100, sharex=True, sharey=True)
    for ax, (model, d) in zip(axes.ravel(), dirs, strict=False):
        draw_curves(ax, d, x="sim_time", y="eval_return")
        ax.set_title(f"link {model[0]}, allreduce {model[1]}", fontsize=10)
        ax.axvline(budget, color="0.5", lw=0.8, ls=":")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("simulated time")
    for ax in axes[:, 0]:
        ax.set_ylabel("eval return")
    fig.suptitle(f"{sc.name}: the four cluster models (median, 20/80 % band over seeds)")
    fig.tight_layout()
    path = docs / f"{sc.name}_models.png"
    fig.savefig(path)
    plt.close(fig)
    return path
