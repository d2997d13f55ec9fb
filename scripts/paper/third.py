"""The third edition of docs/results.md: every claim under the paper's protocol (resumable).

    python scripts/paper third look [SCENARIO ...]     # a first look: sizes the budget
    python scripts/paper third tune [SCENARIO ...]     # the paper's grid at that budget
    python scripts/paper third run [SCENARIO ...]      # report runs, seeds 0.. (tuned)
    python scripts/paper third analyze [SCENARIO ...]  # `jaxnigt compare`; JSON, plots
    python scripts/paper third all [SCENARIO ...]      # the four in order
    python scripts/paper third list                    # the scenarios and their state

Options: ``--out DIR`` (default ``runs/results/third``), ``--docs DIR`` (default
``docs/results/third``), ``--models shared/all,...`` (``tune``/``run``: only those cluster
models), ``--quick`` (tiny budgets and grid, one tuning seed: a smoke test of the pipeline,
numbers meaningless), ``--eta 0.001,0.01,0.1,0.3,1`` and ``--M 20,30,50,80,120,200`` (η
values, or M = M_init values for Rennala and Malenia NIGT, other than the paper's: a labelled
variant, with its own ``--out`` and ``--docs``).  ``python scripts/paper page``
puts the tables on the page.  The scenarios, their grids and looks:
:mod:`paper.third_scenarios`; how a look sizes the budget: :mod:`paper.sizing`.

**The protocol** (docs/results.md, "The third edition's statistics, fixed before its runs";
issue "Results, third edition").  Sync NIGT computes one trajectory per worker and round
(the default ``per_worker_batch: 1``).  Every method is tuned by :func:`jaxnigt.studies.tuning.tune`
over the paper's grid, α = 2^e, e = −10 … −1 (extended while a winner sits at an edge),
η ∈ {0.001, 0.01, 0.1}, and M = M_init ∈ {20, 30, 50} for Rennala and Malenia NIGT, on the
seeds 100 and 101, which no reported run uses; the tuning score is the average return over
the scenario's budget.

**The budget** of a scenario comes from a first look: the same tuning at a generous
``look`` budget, whose ``speed`` (the winners' per-seed times to the 80 % target, pooled
over every program of the look) gives the slowest winner's upper median S (the rules:
:mod:`paper.sizing`).  The budget is :func:`~paper.sizing.budget_for` (about 2 S, rounded up to a
round number; the look's budget when a winner's median never reaches the target), the
evaluation cadence :func:`~paper.sizing.cadence` (at least 100 evaluations per budget and 20
before the fastest winner's median time).  When the budget is the look's, the look is the
tuning (:meth:`Pipeline.look_is_tuning`: the same grid, seeds and budget; its cadence, the
look's budget / 64, is the only difference); scenarios tuned before 2026-12-02 13:30 UTC reran
it at the finer cadence.

**The claims** (:data:`paper.claims.THIRD_CLAIMS`): each has its primary statistic, fixed
before the runs, and is decided by :func:`jaxnigt.analysis.compare` on the report seeds; the
lead-growth claim by :func:`jaxnigt.analysis.verdicts.speed_lead_growth` from ``<env>_sqrt``
to ``<env>_sqrt_dim``. A scenario with ``sensitivity`` also runs the matched-batch Sync NIGT
(``per_worker_batch: match_M``, b = ⌈M/n⌉ with M the reference's tuned M:
:meth:`Pipeline.matched`), tuned the same way, beside its reference. (Before 2026-12-02 the
sensitivity runs left M at the base config's 20, so their b was 2, the second edition's
batch, whatever M the reference had won; the JSON of those runs record it in ``tuned``.)
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path

from jaxnigt import analysis
from jaxnigt import config as config_lib
from jaxnigt.analysis import run_data, verdicts
from jaxnigt.config import merge
from jaxnigt.run import checkpoint, signals
from jaxnigt.studies import store as results_store
from jaxnigt.studies import tuning
from paper import sizing
from paper import store as paper_store
from paper.claims import GROWTH, THIRD_CLAIMS
from paper.scenarios import DEFAULT_MODEL, VARIANTS, Scenario, affected, base
from paper.third_scenarios import GRIDS, PAPER_GRID, QUICK_GRID, TUNE_SEEDS, quick_scenario

ROOT = Path(__file__).resolve().parents[2]
MATCH_M = {"per_worker_batch": "match_M"}

# ------------------------------------------------------------------------------ configs


def scenario_raw(sc: Scenario, model=DEFAULT_MODEL) -> dict:
    raw = merge(base(sc.env), sc.overrides)
    raw["cluster"] = {**raw["cluster"], "link": model[0], "allreduce": model[1]}
    raw.update(name=sc.model_dir(model), algorithms=list(sc.algorithms), target_return=None)
    return raw


def timed(raw: dict, budget: float, every: float) -> dict:
    """``raw`` at ``budget`` with an evaluation every ``every`` units of simulated time."""
    raw = dict(raw, budget=float(budget))
    raw["eval"] = {**raw["eval"], "every_time": float(every)}
    return raw


class Pipeline:
    """The stages of one scenario, in ``out/<scenario>``; ``docs`` gets the JSON."""

    def __init__(
        self,
        sc: Scenario,
        out: Path,
        docs: Path,
        quick: bool = False,
        grid=None,
        jobs: int = 1,
        store: Path | None = None,
    ):
        self.sc = quick_scenario(sc) if quick else sc
        self.jobs = jobs
        # the results store's folder of the scenario (None: nothing kept, e.g. a smoke test)
        self.store = None if store is None else store / sc.name
        self.where = out / sc.name
        self.docs, self.quick = docs, quick
        self.grid = grid or (QUICK_GRID if quick else GRIDS.get(sc.name, PAPER_GRID))
        self.seeds = TUNE_SEEDS[:1] if quick else TUNE_SEEDS

    def _tune(self, raw: dict, where: Path, algorithms) -> dict:
        """One tuning stage into ``where``; with a store, the programs it holds are restored
        first (not run again) and every finished one is kept there, also when interrupted.
        A SIGTERM or Ctrl-C stops the running programs after their chunk (they checkpoint:
        ``signals.stop_on_signals``) and raises ``signals.Interrupted`` after the finished
        ones are kept; without it, SIGTERM's default action ended the process before that."""
        kept = None if self.store is None else self.store / where.name
        if kept is not None and (restored := results_store.bring_stage(kept, where)):
            print(
                f"[third] {self.sc.name} {where.name}: restored from the store (not run): "
                f"{', '.join(restored)}",
                flush=True,
            )
        with signals.stop_on_signals() as stop:
            try:
                return tuning.tune(
                    raw,
                    where,
                    algorithms=list(algorithms),
                    grid=self.grid,
                    seeds=self.seeds,
                    resume=(where / tuning.RECORD).is_file(),
                    progress=False,
                    command=" ".join(map(shlex.quote, sys.argv)),
                    jobs=self.jobs,
                    stop=stop,
                )
            finally:
                packed, partial = (
                    ([], []) if kept is None else results_store.keep_stage(where, kept)
                )
                if packed:
                    print(
                        f"[third] {self.sc.name} {where.name}: kept in the store: "
                        f"{', '.join(packed)}",
                        flush=True,
                    )
                if partial:
                    print(
                        f"[third] {self.sc.name} {where.name}: unfinished, newest checkpoint "
                        f"kept in the store: {', '.join(partial)}",
                        flush=True,
                    )

    # -- look: the budget and the cadence
    def look(self) -> dict:
        raw = timed(scenario_raw(self.sc), self.sc.look, self.sc.look / sizing.LOOK_EVALS)
        report = self._tune(raw, self.where / "look", self.sc.algorithms)
        speed = report["speed"]
        sizing.check_look(speed, self.sc.name, self.sc.look)
        budget = sizing.budget_for(speed, self.sc.look)
        sized = {
            "look_budget": self.sc.look,
            "look_target": speed["target"],
            "look_median_times": sizing.medians(speed),
            "look_chosen": {a: r["chosen"] for a, r in report["algorithms"].items()},
            "budget": budget,
            "every_time": sizing.cadence(speed, budget),
            "rule": sizing.rule(),
        }
        (self.where / "sizing.json").write_text(json.dumps(sized, indent=2) + "\n")
        print(f"[third] {self.sc.name}: budget {budget:g}, every {sized['every_time']:g}")
        return sized

    def size(self, budget: float, every: float, rule: str) -> dict:
        """Sets the budget and the cadence without a look (``rule``: how they were chosen)."""
        sized = {"budget": float(budget), "every_time": float(every), "rule": rule}
        self.where.mkdir(parents=True, exist_ok=True)
        (self.where / "sizing.json").write_text(json.dumps(sized, indent=2) + "\n")
        return sized

    def sizing(self) -> dict:
        path = self.where / "sizing.json"
        if not path.is_file():
            raise SystemExit(f"third: look at {self.sc.name} first ({path} missing)")
        return json.loads(path.read_text())

    def _raw(self, model=DEFAULT_MODEL) -> dict:
        s = self.sizing()
        return timed(scenario_raw(self.sc, model), s["budget"], s["every_time"])

    # -- tune: the paper's grid at the sized budget (and what the variants change)
    def tuning_tags(self, models=None):
        """``(tag, algorithms)`` of every tuning the scenario needs."""
        yield "tune", self.sc.algorithms
        variants = {v for m in self.sc.models for v in m if v in VARIANTS}
        for variant in sorted(variants):
            if models is not None and not any(variant in m for m in models):
                continue
            algorithms = affected(self.sc.algorithms, variant)
            if algorithms:
                yield f"tune__{variant}", algorithms
        if self.sc.sensitivity:
            yield "tune__match_M", ("sync_nigt",)

    def tunings(self, models=None):
        """``(tag, algorithms, raw)`` of every tuning the scenario needs."""
        for tag, algorithms in self.tuning_tags(models):
            raw = self._raw()
            variant = tag.removeprefix("tune__")
            if variant in VARIANTS:
                key, value = VARIANTS[variant]
                raw["cluster"] = {**raw["cluster"], key: value}
            elif variant == "match_M":
                raw["hparams"] = {**raw["hparams"], **self.matched()}
            yield tag, algorithms, raw

    def matched(self) -> dict:
        """Sync NIGT's hparams in the sensitivity runs: ``per_worker_batch: match_M`` with M =
        the reference's tuned M (from the ``tune`` stage), so b = ⌈M/n⌉ matches the gradients
        of one of its rounds (M = M_init: Rennala's and Malenia's own M)."""
        reference = THIRD_CLAIMS[self.sc.claim].reference
        return {**MATCH_M, "M": int(self.chosen("tune")[reference]["M"])}

    def look_is_tuning(self) -> bool:
        """Whether the look already is the tuning: the sized budget is the look's (a winner
        never reached the target, or only late), so the ``tune`` stage would rerun the same
        grid on the same seeds at the same budget, only with a finer evaluation cadence."""
        s = self.sizing()
        return (
            s.get("look_budget") == s["budget"] and (self.where / "look" / "tuning.json").is_file()
        )

    def tune(self, models=None) -> None:
        tune = self.where / "tune"
        if not tune.exists() and self.look_is_tuning():
            tune.symlink_to("look", target_is_directory=True)  # relative: the tree can move
            print(
                f"[third] {self.sc.name}: the look is the tuning "
                f"(budget {self.sizing()['budget']:g}: the look's)"
            )
        for tag, algorithms, raw in self.tunings(models):
            print(f"[third] {self.sc.name}: {tag} ({', '.join(algorithms)})", flush=True)
            if tag == "tune" and tune.is_symlink():  # the look's report, not rerun
                print(tuning.table(json.loads((tune / "tuning.json").read_text())))
                continue
            print(tuning.table(self._tune(raw, self.where / tag, algorithms)))

    def chosen(self, tag: str) -> dict:
        path = self.where / tag / "tuning.json"
        if not path.is_file():
            raise SystemExit(f"third: tune {self.sc.name} first ({path} missing)")
        out = tuning.tuned_values(json.loads(path.read_text()))
        for a, values in out.items():
            if values is None:
                raise SystemExit(f"third: {path}: no finite score for {a}")
        return out

    def values(self, model=DEFAULT_MODEL) -> dict:
        values = self.chosen("tune")
        for variant in model:
            if variant in VARIANTS and (self.where / f"tune__{variant}").is_dir():
                values.update(self.chosen(f"tune__{variant}"))
        return values

    # -- run: the report seeds with the tuned values
    def runs(self, models=None):
        """``(name, raw)`` of every report run."""
        for model in self.sc.models:
            if models is not None and model not in models:
                continue
            raw = self._raw(model)
            raw.update(seed=0, seeds=self.sc.seeds, per_algorithm=self.values(model))
            yield self.sc.model_dir(model), raw
        if self.sc.sensitivity and (models is None or DEFAULT_MODEL in models):
            raw = self._raw()
            reference = THIRD_CLAIMS[self.sc.claim].reference
            per = {reference: self.values()[reference]}
            per["sync_nigt"] = {**self.chosen("tune__match_M")["sync_nigt"], **self.matched()}
            raw.update(name=f"{self.sc.name}__match_M", algorithms=[reference, "sync_nigt"])
            raw.update(seed=0, seeds=self.sc.seeds, per_algorithm=per)
            yield f"{self.sc.name}__match_M", raw

    def run(self, models=None) -> None:
        """Every report run; with a store, each finished one is kept there (and restored on a
        fresh clone), and one stopped mid-way keeps its newest checkpoint there."""
        kept = None if self.store is None else self.store / paper_store.REPORT
        for name, raw in self.runs(models):
            print(f"[third] {name}", flush=True)
            cfg = config_lib.from_dict(raw)
            finished = None if kept is None else kept / results_store.PROGRAMS / name
            partial = None if kept is None else kept / results_store.PARTIAL / name
            what = results_store.run_kept(cfg, self.where / name, finished, partial)
            print(f"[third] {name}: {what}", flush=True)

    # -- analyze: the claim's statistic and the second views
    def analyze(self) -> list[dict]:
        from jaxnigt.run.plots import plot_runs

        claim = THIRD_CLAIMS[self.sc.claim]
        reference, kind, baselines, statistic = (
            claim.reference,
            claim.kind,
            claim.baselines,
            claim.statistic,
        )
        done = []
        self.docs.mkdir(parents=True, exist_ok=True)
        for name, _ in self.runs():
            run_dir = self.where / name
            if not (run_dir / "summary.json").is_file():
                continue
            run = run_data.load_run(run_dir)
            matched = name.endswith("__match_M")
            a = analysis.compare(
                run,
                reference,
                statistic=statistic,
                claim=kind,
                baselines=None if matched else baselines,
            )
            a.update(scenario=self.sc.name, name=name, claim=self.sc.claim)
            a.update(sizing=self.sizing(), tuned=self._tuned(run_dir))
            a["sensitivity"] = "sync_nigt: per_worker_batch match_M" if matched else None
            a = paper_store.relative_paths(a)  # the docs name runs relative to the repository
            (self.docs / f"{name}.json").write_text(json.dumps(a, indent=2) + "\n")
            plot_runs(
                [run_dir],
                out=self.docs / f"{name}.png",
                budget=run.budget,
                title=f"{name} (third edition)",
            )
            done.append(a)
        return done

    @staticmethod
    def _tuned(run_dir: Path) -> dict:
        """Each algorithm's α, η and M as the run used them (its config's ``hparams`` under
        its ``per_algorithm`` entry)."""
        raw = config_lib.read_yaml(run_dir / "config.yaml")
        hp = {k: raw["hparams"][k] for k in ("learning_rate", "eta", "M") if k in raw["hparams"]}
        per = raw.get("per_algorithm") or {}
        return {a: {**hp, **per.get(a, {})} for a in raw["algorithms"]}


def gap_growth(out: Path, docs: Path, env: str) -> list[dict]:
    """The lead-growth claim (:data:`paper.claims.GROWTH`) on ``env``: speed_lead_growth from
    ``<env>_sqrt`` to ``<env>_sqrt_dim`` for each baseline (their report runs, default model)."""
    runs = []
    for key in GROWTH.settings:
        run_dir = out / f"{env}_{key}" / f"{env}_{key}"
        path = docs / f"{env}_{key}.json"
        if not (run_dir / "summary.json").is_file() or not path.is_file():
            return []
        runs.append((run_data.load_run(run_dir), json.loads(path.read_text())))
    done = []
    for baseline in GROWTH.baselines:
        groups = []
        for run, a in runs:
            methods, target = run.algorithms(), a["targets"]["0.8"]
            pair = (GROWTH.reference, baseline)
            groups.append(tuple(methods[m].statistic("time", run.budget, target) for m in pair))
        g = verdicts.speed_lead_growth(*groups)
        g.update(env=env, baseline=baseline, scenarios=[f"{env}_{k}" for k in GROWTH.settings])
        (docs / f"{env}_gap_{baseline}.json").write_text(json.dumps(g, indent=2) + "\n")
        done.append(g)
    return done


def state(p: Pipeline) -> str:
    """A scenario's progress in one line: its budget, whether it is tuned, runs done (and
    what the results store holds of its tuning stages)."""
    held = ""
    if p.store is not None and p.store.is_dir():
        stages = sorted(d for d in p.store.iterdir() if (d / tuning.RECORD).is_file())
        report = p.store / paper_store.REPORT
        stages += [report] if report.is_dir() else []
        held = "; store: " + ", ".join(f"{d.name} {results_store.stage_state(d)}" for d in stages)
    if not (p.where / "sizing.json").is_file():
        return "not looked at" + held
    s = p.sizing()
    tuned = all((p.where / tag / "tuning.json").is_file() for tag, _ in p.tuning_tags())
    runs = [checkpoint.finished(p.where / name) for name, _ in p.runs()] if tuned else []
    return (
        f"budget {s['budget']:g}, every {s['every_time']:g}; tuned: {tuned}; "
        f"runs done {sum(runs)}/{len(runs) if tuned else '?'}{held}"
    )


def variant_grid(eta=None, m=None) -> tuning.Grid | None:
    """The paper's grid with the η and/or M values of a labelled variant (None: the paper's)."""
    if eta is None and m is None:
        return None
    grid = PAPER_GRID if eta is None else dataclasses.replace(PAPER_GRID, eta=eta)
    return grid if m is None else dataclasses.replace(grid, shapes={**grid.shapes, "M": m})
