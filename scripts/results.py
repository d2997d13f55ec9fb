"""docs/results.md: the scenario catalogue, the runs it needs and the page (resumable).

    python scripts/results.py tune [FAMILY ...]      # `jaxnigt tune` per family, seeds 100, 101
    python scripts/results.py run [SCENARIO ...]     # report runs: seeds 0..4 (hetero 0..14), tuned
    python scripts/results.py analyze                # `jaxnigt compare` per run; JSON and plots
    python scripts/results.py page                   # DOCS/../results.md and its tables from JSON
    python scripts/results.py all                    # the four in order
    python scripts/results.py list                   # families and scenarios

Options: ``--out DIR`` (run directories, default ``runs/results``), ``--docs DIR`` (where the
analysis writes JSON, Markdown tables and plots, default ``docs/results``), ``--quick``
(tiny budgets and grids: a smoke test of the pipeline, numbers meaningless), ``--models
shared/all,independent/all`` (``run``: only those cluster models of each scenario),
``--variants default,contributors`` (``tune``: only those tunings of each family; default: the
family's own and every model variant its scenarios need).

This script holds no statistic: the tuning protocol is :mod:`jaxnigt.studies.tuning` (score, tie
rule, grid extension), every statistic is :mod:`jaxnigt.analysis.stats` and every interval, outcome
and verdict :mod:`jaxnigt.analysis.verdicts` (the comparison: :mod:`jaxnigt.analysis`).  What is
here: which families share tuned step sizes, which scenarios and cluster models run, which
claim each scenario tests (its reference, its baselines, ``ahead`` or ``tie``), and the page.

**Evaluation** is by simulated time: ``EVALS`` evaluations per budget (``eval.every_time``),
whatever the length of an algorithm's step.

**Tuning** (per family, on seeds the report never uses: base seed 100, two seeds): the
family's base config at its budget through :func:`jaxnigt.studies.tuning.tune`.  A cluster-model
variant (``link: independent``, ``allreduce: contributors``) retunes only the algorithms
whose ``Traits.cluster_options`` include that option.  The winners go to
``configs/cpu/<scenario>.yaml`` (the report configs) and ``DOCS/tuning_<family>.json``.

**Analysis** (per scenario and cluster model): :func:`jaxnigt.analysis.compare` of the
claim's reference (Rennala NIGT; Malenia NIGT for heterogeneous environments) against every
baseline, the claim's verdict over its baselines, and :func:`jaxnigt.analysis.verdicts.lead_growth`
from ``<env>_sqrt`` to ``<env>_sqrt_dim``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import shlex
import sys
from pathlib import Path

import yaml

from jaxnigt import analysis
from jaxnigt import config as config_lib
from jaxnigt.algorithms import traits
from jaxnigt.analysis import report_text, run_data, verdicts
from jaxnigt.studies import tuning

ROOT = Path(__file__).resolve().parent.parent
MODELS = (("shared", "all"), ("shared", "contributors"), ("independent", "all"))
MODELS += (("independent", "contributors"),)
DEFAULT_MODEL = ("shared", "all")
TUNE_SEED = 100
# Evaluations per budget, by simulated time (``eval.every_time``): a Rennala round and a block
# of asynchronous arrivals differ in length by up to n×, so a cadence in steps would leave the
# asynchronous methods with a handful of evaluations.
EVALS = 64


def merge(base: dict, extra: dict) -> dict:
    """``base`` with the (nested) entries of ``extra`` put over it (neither is changed)."""
    out = json.loads(json.dumps(base))
    for k, v in extra.items():
        out[k] = merge(out.get(k) or {}, v) if isinstance(v, dict) else v
    return out


@dataclasses.dataclass(frozen=True)
class Family:
    """Scenarios that share tuned hyperparameters, tuned on ``base`` at ``budget``."""

    name: str
    base: dict
    algorithms: tuple[str, ...]
    budget: float
    lr_exp: tuple[int, ...]
    eta: tuple[float, ...] = (0.01, 0.1)
    tune_seeds: int = 2
    # shape hyperparameters tuned too (``jaxnigt tune --M/--msync-m/--ringmaster-R``), each
    # for the algorithms whose ``Traits.tuned_shapes`` name it: ((name, values), ...)
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # algorithms whose tuning is one column of another's grid, by an exact equivalence:
    # ((algorithm, source algorithm, shape, value), ...); they run beside the family's own
    derived: tuple[tuple[str, str, str, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A report run: the family's config with ``overrides``, ``seeds`` seeds from 0."""

    name: str
    family: str
    overrides: dict
    budget: float
    claim: str
    seeds: int = 5
    models: tuple[tuple[str, str], ...] = (DEFAULT_MODEL,)
    # (family, algorithms) run beside the family's own, with that family's tuned values
    include: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def algorithms(self) -> list[str]:
        fam = FAMILIES[self.family]
        derived = [d[0] for d in fam.derived]
        return [a for _, algs in self.include for a in algs] + [*fam.algorithms, *derived]

    def model_dir(self, model: tuple[str, str]) -> str:
        return self.name if model == DEFAULT_MODEL else f"{self.name}__{model[0]}_{model[1]}"


def _base(env: str, extra: dict | None = None) -> dict:
    raw = {
        "env": {"name": env},
        "cluster": {"n": 10, "h": "sqrt", "kappa": "sqrt", "scale_by_dim": True},
        "hparams": {"M": 20, "M_init": 20, "gamma": 0.99, "eta": 0.1},
        "eval": {"every": 25, "episodes": 8},
        "checkpoint_every": 0,
    }
    return merge(raw, extra or {})


HOMOGENEOUS = ("rennala_nigt", "sync_nigt", "afedpg")
HETEROGENEOUS = ("malenia_nigt", "afedpg", "rennala_nigt")
_N100 = {"cluster": {"n": 100}}
_HET = {
    "env": {"heterogeneous": "sign_flip"},
    "cluster": {"n": 2, "h": [1.0, 10.0], "kappa": 0.0, "scale_by_dim": False},
    "eval": {"episodes": 16},
}
_HOPPER = {"env": {"horizon": 1000, "solver_iterations": 1, "ls_iterations": 4}}
_GRID = (-14, -12, -10, -8, -6)
# The actor-critic family: Adam's learning rate (η is not used; one value keeps the grid small)
ACTOR_CRITIC = ("a2c", "a3c", "impala")
_R = ("rennala_nigt",)
# IMPALA's and A3C's exchanges queue on a shared server link; an independent link lets them
# overlap, which is where actor-learner designs are meant to shine: both are run.
_AC_MODELS = (DEFAULT_MODEL, ("independent", "all"))
# SEED RL (central inference): its own family, tuned as the actor-critic family is (Adam's
# learning rate on the same grid and seeds), run beside IMPALA and Rennala NIGT with their
# families' tuned values, under both links (its step exchanges queue on a shared one).
SEED_RL = ("seed_rl",)
# The asynchronous baselines beyond the paper (issue 33): bounded delay, m-synchronous rounds,
# AFedPG without its lookahead; run beside Rennala NIGT and AFedPG (their family's tuned
# values) under both links. R = 40 is above every delay of these clusters (`jaxnigt clock
# --rule async`: at most 31 over 3,000 arrivals), so the grid's top is plain asynchronous
# SGD; m = 10 = n
# is Sync NIGT with one trajectory per worker (m = 8 won point_mass's first grid, which
# ended there: the grid runs up to n).
BEYOND = ("ringmaster_pg", "msync_nigt", "afedpg_vanilla")
_BEYOND_SHAPES = (("ringmaster_R", (5, 10, 20, 40)), ("msync_m", (2, 4, 6, 8, 10)))
# reacher's first tuning chose R = 5, the grid's lower edge: its grid goes down to 2
_BEYOND_SHAPES_REACHER = (("ringmaster_R", (2, 3, 5, 10, 20, 40)), _BEYOND_SHAPES[1])
# asgd (what bounding the delay is measured against) is Ringmaster with R above every delay,
# exactly (tests/test_algorithms.py): its tuning is the R = 40 column of Ringmaster's grid.
_ASGD = (("asgd", "ringmaster_pg", "ringmaster_R", 40),)

FAMILIES = {
    f.name: f
    for f in (
        Family("point_mass", _base("point_mass"), HOMOGENEOUS, 32000, _GRID),
        Family("point_mass_n100", _base("point_mass", _N100), HOMOGENEOUS, 88000, _GRID),
        Family("point_mass_hetero", _base("point_mass", _HET), HETEROGENEOUS, 60000, _GRID),
        Family("reacher", _base("reacher"), HOMOGENEOUS, 32000, _GRID),
        Family("reacher_n100", _base("reacher", _N100), HOMOGENEOUS, 88000, _GRID),
        Family("reacher_hetero", _base("reacher", _HET), HETEROGENEOUS, 30000, _GRID),
        Family("hopper", _base("hopper", _HOPPER), HOMOGENEOUS, 3100, (-10, -8, -6), eta=(0.1,)),
        Family("point_mass_ac", _base("point_mass"), ACTOR_CRITIC, 32000, _GRID, eta=(0.1,)),
        Family("reacher_ac", _base("reacher"), ACTOR_CRITIC, 32000, _GRID, eta=(0.1,)),
        Family("point_mass_seed", _base("point_mass"), SEED_RL, 32000, _GRID, eta=(0.1,)),
        Family("reacher_seed", _base("reacher"), SEED_RL, 32000, _GRID, eta=(0.1,)),
        *(
            Family(
                f"{env}_beyond",
                _base(env),
                BEYOND,
                32000,
                _GRID,
                shapes=_BEYOND_SHAPES_REACHER if env == "reacher" else _BEYOND_SHAPES,
                derived=_ASGD,
            )
            for env in ("point_mass", "reacher")
        ),
    )
}

_EQUAL = {"cluster": {"h": "equal", "kappa": 0.0, "scale_by_dim": False}}
_SQRT = {"cluster": {"scale_by_dim": False}}
_EXP = {"cluster": {"noise": "exponential"}}
_STRAGGLER = {"cluster": {"noise": "straggler:0.1:10"}}


def _env_scenarios(env: str) -> list[Scenario]:
    return [
        Scenario(f"{env}_equal", env, _EQUAL, 2000, "equal"),
        Scenario(f"{env}_sqrt", env, _SQRT, 7500, "fastest"),
        Scenario(f"{env}_sqrt_dim", env, {}, 32000, "fastest", models=MODELS),
        Scenario(f"{env}_exponential", env, _EXP, 32000, "fastest"),
        Scenario(f"{env}_straggler", env, _STRAGGLER, 32000, "fastest"),
        Scenario(f"{env}_n100", f"{env}_n100", {}, 88000, "fastest", models=MODELS),
        # 15 seeds: with 5 the interval of Malenia NIGT vs AFedPG was too wide to decide
        # (first pass: 1.90 [-1.26, 4.78], about 13 seeds needed)
        Scenario(
            f"{env}_hetero", f"{env}_hetero", {}, FAMILIES[f"{env}_hetero"].budget, "hetero", 15
        ),
    ]


SCENARIOS = {
    s.name: s
    for s in (
        *_env_scenarios("point_mass"),
        *_env_scenarios("reacher"),
        # Locomotion at H = 1000: a Rennala NIGT round takes ~32 time units here, so ~190
        # updates (twice the tuning budget); episodes lengthen as the hopper learns, and longer
        # budgets did not fit the CPU time of this edition.
        Scenario("hopper_sqrt_dim", "hopper", {}, 6200, "fastest"),
        *(
            Scenario(
                f"{env}_ac",
                f"{env}_ac",
                {},
                32000,
                "actor_critic",
                models=_AC_MODELS,
                include=((env, _R),),
            )
            for env in ("point_mass", "reacher")
        ),
        *(
            Scenario(
                f"{env}_seed",
                f"{env}_seed",
                {},
                32000,
                "central_inference",
                models=_AC_MODELS,
                include=((env, _R), (f"{env}_ac", ("impala",))),
            )
            for env in ("point_mass", "reacher")
        ),
        *(
            Scenario(
                f"{env}_beyond{tag}",
                f"{env}_beyond",
                overrides,
                32000,
                "beyond_paper",
                models=_AC_MODELS,
                include=((env, ("rennala_nigt", "afedpg")),),
            )
            for env in ("point_mass", "reacher")
            for tag, overrides in (("", {}), ("_straggler", _STRAGGLER))
        ),
    )
}


# ------------------------------------------------------------------------------ tuning


def _quick(f: Family) -> Family:
    return dataclasses.replace(f, budget=f.budget / 20, lr_exp=(-8, -6), tune_seeds=1)


# The cluster-model variants a scenario may need: the option and its value.  A variant's
# tuning retunes only the algorithms that option affects (their ``Traits.cluster_options``).
VARIANTS = {"independent": ("link", "independent"), "contributors": ("allreduce", "contributors")}


def affected(algorithms, variant: str | None) -> list[str]:
    """The algorithms whose runs a cluster-model ``variant`` changes (all without one)."""
    if variant is None:
        return list(algorithms)
    return [a for a in algorithms if VARIANTS[variant][0] in traits(a).cluster_options]


SECOND_EDITION = {  # the pinned batch of each algorithm that reads one
    "sync_nigt": {"per_worker_batch": "match_M"},
    "sync_pg": {"per_worker_batch": "match_M"},
    "a2c": {"per_worker_batch": "match_M"},
    "admm_pg": {"admm_local_batch": "match_M"},
}


def second_edition(raw: dict, *, per_algorithm: bool = False) -> dict:
    """The second edition's synchronous batches: b = ceil(M/n) (``match_M``, the default
    until the paper's one trajectory per worker became it), so its pages stay reproducible.
    In ``hparams`` (what a tuning reads), or per algorithm (the report configs: then
    ``--set algorithms=[...]`` without a synchronous method still loads)."""
    pins = {a: SECOND_EDITION[a] for a in raw["algorithms"] if a in SECOND_EDITION}
    if per_algorithm:
        per = dict(raw.get("per_algorithm") or {})
        per.update({a: {**per.get(a, {}), **pin} for a, pin in pins.items()})
        return {**raw, "per_algorithm": per}
    merged = {k: v for pin in pins.values() for k, v in pin.items()}
    return {**raw, "hparams": {**raw["hparams"], **merged}}


def tune_family(
    fam: Family, out: Path, docs: Path, variant: str | None = None, jobs: int = 1
) -> dict:
    """Tunes the algorithms of ``fam`` (those a cluster-model ``variant`` affects) with
    :func:`jaxnigt.studies.tuning.tune` (``jobs`` programs at once) and writes
    ``DOCS/tuning_<family>[__<variant>].json``."""
    algorithms = affected(fam.algorithms, variant)
    raw = merge(fam.base, {"name": f"tune_{fam.name}", "algorithms": list(fam.algorithms)})
    raw = second_edition(raw)
    if variant:
        key, value = VARIANTS[variant]
        raw["cluster"] = {**raw["cluster"], key: value}
    raw.update(budget=float(fam.budget), target_return=None)
    raw["eval"] = {**raw["eval"], "every_time": fam.budget / EVALS}
    seeds = tuple(range(TUNE_SEED, TUNE_SEED + fam.tune_seeds))
    grid = tuning.Grid(lr_exp=fam.lr_exp, eta=fam.eta, shapes=dict(fam.shapes))
    tag = f"__{variant}" if variant else ""
    where = out / "tune" / f"{fam.name}{tag}"
    report = tuning.tune(
        raw, where, algorithms=algorithms, grid=grid, seeds=seeds,
        resume=(where / tuning.RECORD).is_file(), progress=False,
        command=" ".join(map(shlex.quote, sys.argv)), jobs=jobs,
    )  # fmt: skip
    per = report["algorithms"]
    family = {"family": fam.name, "variant": variant, "budget": fam.budget}
    family.update(seeds=fam.tune_seeds, seed=TUNE_SEED, eta=list(fam.eta))
    family["chosen"] = {a: r["chosen"] for a, r in per.items()}
    family["lr_exp"] = {a: r["lr_exp"] for a, r in per.items()}
    family["interior"] = {a: r["interior"] for a, r in per.items()}
    family["points"] = {a: r["points"] for a, r in per.items()}
    for name, source, shape, value in fam.derived:
        if source not in per:  # a variant that does not retune the source
            continue
        points = [p for p in per[source]["points"] if p[shape] == value]
        best, exps = tuning.choose(points), sorted({p["lr_exp"] for p in points})
        family["chosen"][name] = best and {k: v for k, v in best.items() if k != shape}
        family["lr_exp"][name] = exps
        family["interior"][name] = best is not None and exps[0] < best["lr_exp"] < exps[-1]
        family["points"][name] = points
        family.setdefault("derived", {})[name] = f"{source} at {shape} = {value}"
    if fam.shapes:  # the hparams each algorithm's tuned shapes set (as tuned.yaml has them)
        family["shapes"] = {name: list(values) for name, values in fam.shapes}
        family["shape_hparams"] = {
            a: {k: r["chosen"][s] for s in r["tuned_shapes"] for k in tuning.SHAPES[s].keys}
            for a, r in per.items()
            if r["chosen"] is not None
        }
    family.update(command=report["command"], tie_rule=report["tie_rule"], score=report["score"])
    docs.mkdir(parents=True, exist_ok=True)
    (docs / _tuning_file(fam.name, variant)).write_text(json.dumps(family, indent=2) + "\n")
    print(tuning.table(report))
    return family


def _tuning_file(family: str, variant: str | None = None) -> str:
    return f"tuning_{family}{'__' + variant if variant else ''}.json"


def tuned_values(docs: Path, family: str, model=DEFAULT_MODEL) -> dict:
    """The chosen hyperparameters per algorithm for ``family`` under cluster ``model``: the
    family's tuning, with the algorithms a non-default model component affects retuned."""
    path = docs / _tuning_file(family)
    if not path.is_file():
        raise SystemExit(f"results: tune family {family!r} first ({path} missing)")
    chosen = _chosen(path)
    for variant in (model[0], model[1]):
        if variant in VARIANTS:
            path = docs / _tuning_file(family, variant)
            if not path.is_file():
                raise SystemExit(f"results: tune {family!r} under {variant!r} first ({path})")
            chosen.update(_chosen(path))
    return chosen


def _chosen(path: Path) -> dict:
    """A tuning file's winners, each with the hparams of its tuned shapes (``hparams``)."""
    t = json.loads(path.read_text())
    shapes = t.get("shape_hparams", {})
    return {a: c and {**c, "hparams": shapes.get(a, {})} for a, c in t["chosen"].items()}


# --------------------------------------------------------------------------------- runs


def scenario_raw(sc: Scenario, chosen: dict, model=DEFAULT_MODEL, quick: bool = False) -> dict:
    fam = FAMILIES[sc.family]
    raw = merge(fam.base, sc.overrides)
    raw.update(name=sc.model_dir(model), algorithms=sc.algorithms, seed=0)
    raw.update(seeds=2 if quick else sc.seeds, budget=sc.budget / (20 if quick else 1))
    raw["eval"] = {**raw["eval"], "every_time": raw["budget"] / EVALS}
    raw["cluster"] = {**raw["cluster"], "link": model[0], "allreduce": model[1]}
    per = {}
    for a, c in chosen.items():
        if c is not None:
            per[a] = {"learning_rate": c["learning_rate"], "eta": c["eta"], **c.get("hparams", {})}
    raw["per_algorithm"] = per
    return second_edition(raw, per_algorithm=True)


def write_config(sc: Scenario, raw: dict) -> None:
    families = [sc.family, *(f for f, _ in sc.include)]
    files = ", ".join(f"docs/results/{_tuning_file(f)}" for f in families)
    header = (
        f"# {sc.name}: written by scripts/results.py (claim '{sc.claim}'); hyperparameters\n"
        f"# from the tuning of family {' and '.join(map(repr, families))} on seeds "
        f"{TUNE_SEED}.. ({files}).\n"
    )
    path = ROOT / "configs" / "cpu" / f"{sc.name}.yaml"
    path.write_text(header + yaml.safe_dump(raw, sort_keys=False))


def run_scenario(
    sc: Scenario, out: Path, docs: Path, quick: bool, models: list | None = None
) -> None:
    for model in sc.models:
        if models is not None and model not in models:
            continue
        chosen = {}
        for family, algorithms in sc.include:
            values = tuned_values(docs, family, model)
            chosen.update({a: values[a] for a in algorithms})
        chosen.update(tuned_values(docs, sc.family, model))
        raw = scenario_raw(sc, chosen, model, quick)
        if model == DEFAULT_MODEL and not quick:
            write_config(sc, raw)
        print(f"[results] {sc.model_dir(model)}", flush=True)
        tuning.run_program(
            config_lib.from_dict(raw), out / sc.model_dir(model), progress=False, log=print
        )


def families_needing(variant: str) -> set[str]:
    """Families with a scenario whose cluster models include ``variant``."""
    return {sc.family for sc in SCENARIOS.values() for m in sc.models if variant in m}


# ----------------------------------------------------------------------------- analysis

# Each claim: its reference, the kind of claim (verdicts.CLAIMS) and the baselines it is
# about (None: every other algorithm of the run); None for a comparison that is no claim.
CLAIMS = {
    "equal": ("rennala_nigt", "tie", ("sync_nigt",)),
    "fastest": ("rennala_nigt", "ahead", None),
    "hetero": ("malenia_nigt", "ahead", ("afedpg",)),
    "actor_critic": ("rennala_nigt", None, None),
    # SEED RL against IMPALA (per-step messages against one per trajectory) and Rennala NIGT
    "central_inference": ("seed_rl", None, None),
    # the asynchronous baselines beyond the paper, each against Rennala NIGT (issue 33)
    "beyond_paper": ("rennala_nigt", None, None),
}
GAP_BASELINES = ("sync_nigt", "afedpg")


def claim_verdict(a: dict) -> dict | None:
    """``{"verdict", "needed_seeds"}`` of the scenario's claim over its baselines (the
    analysis JSON ``a``); None when the scenario tests no claim."""
    _, kind, baselines = CLAIMS[a["claim"]]
    if kind is None:
        return None
    rows = [row(a, b) for b in baselines or a["comparisons"]]
    return verdicts.verdict(rows, kind)


def row(a: dict, baseline: str) -> dict:
    """A comparison of the JSON ``a`` with its outcome (JSON written before outcomes were
    stored: derived from the average-return interval by the same rule)."""
    c = dict(a["comparisons"][baseline])
    if "outcome" not in c:
        c["outcome"] = verdicts.outcome(c["average_return_difference"], identical=c["identical"])
    return c


def analyze_run(sc: Scenario, model, run_dir: Path) -> tuple[dict, run_data.Run]:
    run = run_data.load_run(run_dir)
    reference, kind, _ = CLAIMS[sc.claim]
    result = analysis.compare(run, reference, claim=kind or "ahead")
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
    """Analyzes the finished runs of the scenarios ``names`` (default every one), then
    rewrites the tables from every analysis JSON in ``docs``."""
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
    for env in ("point_mass", "reacher"):
        small, large = analyses.get(f"{env}_sqrt"), analyses.get(f"{env}_sqrt_dim")
        if small and large:
            for baseline in GAP_BASELINES:
                g = gap_growth(small, large, baseline)
                (docs / f"{env}_gap_{baseline}.json").write_text(json.dumps(g, indent=2) + "\n")
    write_tables(docs)


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


# ------------------------------------------------------------------------------ the page

PAGE_TEMPLATE = ROOT / "scripts" / "results_page.md"
_CLUSTER = {
    "equal": "h = 1, κ = 0",
    "sqrt": "h = √i, κ = √i",
    "sqrt_dim": "h = √i, κ = √i·d^{1/4}",
    "exponential": "h = √i, `noise: exponential`, κ = √i·d^{1/4}",
    "straggler": "h = √i, `noise: straggler:0.1:10`, κ = √i·d^{1/4}",
    "n100": "n = 100, h = √i, κ = √i·d^{1/4}",
    "hetero": "n = 2, h = (1, 10), κ = 0, sign_flip",
    "ac": "h = √i, κ = √i·d^{1/4}",
    "seed": "h = √i, κ = √i·d^{1/4} (a step exchange: √i·(o + a)^{1/4})",
    "beyond": "h = √i, κ = √i·d^{1/4}",
    "beyond_straggler": "h = √i, `noise: straggler:0.1:10`, κ = √i·d^{1/4}",
}
GAP_CLAIM = "bigger gap with more communication"


def _load(docs: Path, name: str) -> dict | None:
    path = docs / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _analyses(docs: Path):
    """``(scenario, model, analysis JSON)`` of every run analysed in ``docs``, in order."""
    for sc in SCENARIOS.values():
        for model in sc.models:
            a = _load(docs, sc.model_dir(model))
            if a is not None:
                yield sc, model, a


def _command(sc: Scenario, model) -> str:
    command = f"`python scripts/results.py run {sc.name}"
    if tuple(model) != DEFAULT_MODEL:
        command += f" --models {model[0]}/{model[1]}"
    return command + "`"


def _claim_text(a: dict) -> str:
    reference, kind, baselines = CLAIMS[a["claim"]]
    if kind is None:
        return "– (not a paper claim)"
    names = ", ".join(baselines or a["comparisons"])
    return f"{reference} {'ahead of' if kind == 'ahead' else 'tied with'} {names}"


def _gaps(docs: Path):
    """``(env, baseline, gap JSON)`` of every lead-growth analysis in ``docs``."""
    for env in ("point_mass", "reacher"):
        for baseline in GAP_BASELINES:
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
            print(f"[results] {sc.model_dir(model)}: stored verdict {a['verdict']!r}; the "
                  f"rule gives {decision['verdict']!r} (shown)")  # fmt: skip
        rows.append(
            f"| {a['claim']} | `{sc.name}` | {model[0]} / {model[1]} | {_claim_text(a)} | {text} "
            f"| {a['improvement_over_spread']:.0f} | {_command(sc, model)} |"
        )
    for env, baseline, g in _gaps(docs):
        rows.append(
            f"| {GAP_CLAIM} | `{env}_sqrt` → `{env}_sqrt_dim` | shared / all | rennala_nigt's "
            f"lead over {baseline} grows | **{report_text.verdict_text(g)}** | – "
            f"| `python scripts/results.py analyze` |"
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
            f"| `{env}_sqrt` → `{env}_sqrt_dim` | shared / all | growth of the lead over "
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
                else (f"2^{c['lr_exp']}", f"{c['eta']:g}", f"{c['score']:.2f}")
            )
            rows.append(
                f"| {t['family']} | {t['variant'] or 'default'} | {a} | {min(grid)} … {max(grid)} "
                f"| {', '.join(f'{e:g}' for e in t['eta'])} | {' | '.join(what)} "
                f"| {'yes' if t['interior'][a] else '**no**'} "
                f"| [{path.name}](results/{path.name}) |"
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


THIRD = "third"  # DOCS/third: the third edition's analysis JSON (scripts/third_edition.py)
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
    catalogue's order (scripts/third_edition.py), sensitivity runs after their scenario."""
    import third_edition

    where = docs / sub
    for sc in third_edition.SCENARIOS.values():
        for name in [sc.model_dir(m) for m in sc.models] + [f"{sc.name}__match_M"]:
            a = _load(where, name)
            if a is not None:
                yield name, a


def _tuned_text(a: dict) -> str:
    parts = []
    for alg, v in a["tuned"].items():
        text = f"{alg} 2^{round(math.log2(v['learning_rate']))}, η {v['eta']:g}"
        if alg in ("rennala_nigt", "malenia_nigt"):
            text += f", M {v['M']}"
        elif v.get("per_worker_batch") == "match_M":  # the sensitivity's batch: its own M
            text += f", b = ⌈{v['M']}/n⌉"
        parts.append(text)
    return "; ".join(parts)


def _batch(a: dict) -> int | None:
    """The M behind the matched Sync NIGT's b = ⌈M/n⌉ of a sensitivity run's analysis."""
    return a["tuned"].get("sync_nigt", {}).get("M")


def third_rows(docs: Path, sub: str = THIRD) -> list[str]:
    """The third edition's claims table from ``DOCS/<sub>``: one row per comparison of every
    run, its claim's statistic with the interval, the second view, the verdict, and the
    verdict of the same scenario and model one step back (:data:`_BEFORE`) — the second
    edition's for the third edition itself, the third edition's (the paper's η grid) for its
    η variant, the η variant's (the paper's M grid) for the variant that widens M too."""
    back, label = _BEFORE[sub]
    before = docs if back is None else docs / back
    rows = [
        "| scenario | model (link / allreduce) | comparison | primary statistic [90 % CI] "
        "| Δ average return [90 % CI] | median times to 80 % (reference / baseline) "
        f"| verdict | {label} | budget | tuned (α, η, M) |",
        "|---|---|---|---|---|---|---|---|---:|---|",
    ]
    for name, a in _third(docs, sub):
        suffix = name.removeprefix(a["scenario"]).removeprefix("__")
        matched = suffix == "match_M"
        model = "shared / all" if matched or not suffix else suffix.replace("_", " / ", 1)
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
                f"| `{a['scenario']}` | {model} | {a['reference']} vs {b} "
                f"| {_STATISTIC[a['statistic']]}: **{report_text.fmt(c['effect'])}** "
                f"({report_text.outcome_text(c, a['reference'], b)}) "
                f"| {report_text.fmt(c['average_return_difference'])} "
                f"| {_num(ref)} / {_num(other)} | {decision} | {old_text} "
                f"| {a['budget']:,.0f} | {_tuned_text(a)} |"
            )
            decision = "〃"
    for env in ("point_mass", "reacher"):
        for baseline in GAP_BASELINES:
            g = _load(docs / sub, f"{env}_gap_{baseline}")
            if g is not None:
                iv = report_text.fmt(g["log_lead_difference"])
                rows.append(
                    f"| `{env}_sqrt` → `{env}_sqrt_dim` | shared / all | growth of the log "
                    f"time-to-80 % ratio over {baseline} | **{iv}** | – | – "
                    f"| **{report_text.verdict_text(g)}** | – | – | – |"
                )
    return rows


def _num(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "∞"
    return f"{v:,.0f}"


def page(docs: Path, template: Path = PAGE_TEMPLATE) -> str:
    """``template`` with its placeholders filled from the analysis JSON in ``docs``:
    ``{{VERDICTS}}``, ``{{COMPARISONS}}``, ``{{TUNING}}``, ``{{SCENARIOS}}``,
    ``{{MATRIX:<env>}}`` (the four cluster models of ``<env>_sqrt_dim`` and ``<env>_n100``)
    and ``{{HETERO:<scenario>}}`` (per-type second-half returns)."""
    text = template.read_text()
    if text.startswith("<!--"):  # the template's own note
        text = text.split("\n", 1)[1]
    note = "<!-- Written by `python scripts/results.py page` from scripts/results_page.md. -->"
    text = f"{note}\n{text}"
    text = text.replace("{{VERDICTS}}", "\n".join(verdict_rows(docs)))
    text = text.replace("{{COMPARISONS}}", "\n".join(comparison_rows(docs)))
    text = text.replace("{{TUNING}}", "\n".join(tuning_rows(docs)))
    text = text.replace("{{THIRD}}", "\n".join(third_rows(docs)))
    text = text.replace("{{THIRD_ETA}}", "\n".join(third_rows(docs, THIRD_ETA)))
    text = text.replace("{{THIRD_ETA_M}}", "\n".join(third_rows(docs, THIRD_ETA_M)))
    text = text.replace("{{SCENARIOS}}", "\n".join(_scenario_rows(docs)))
    for env in ("point_mass", "reacher"):
        rows = []
        for m in MODELS:
            small = _load(docs, SCENARIOS[f"{env}_sqrt_dim"].model_dir(m))
            large = _load(docs, SCENARIOS[f"{env}_n100"].model_dir(m))
            cells = [_cell(a, b) for a in (small, large) for b in GAP_BASELINES]
            rows.append(f"| {m[0]} / {m[1]} | {' | '.join(cells)} |")
        text = text.replace(f"{{{{MATRIX:{env}}}}}", "\n".join(rows))
    for sc in SCENARIOS.values():
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
    for sc in SCENARIOS.values():
        a = _load(docs, sc.name)
        if a is None:
            continue
        env = FAMILIES[sc.family].base["env"]
        where = env["name"] + (f", H = {env['horizon']}" if "horizon" in env else "")
        key = sc.name.removeprefix(env["name"] + "_")
        updates = " / ".join(f"{d['updates_median']:,.0f}" for d in a["algorithms"].values())
        rows.append(
            f"| `{sc.name}` | {where}, {_CLUSTER.get(key, key)} | {a['budget']:,.0f} | "
            f"{updates} ({' / '.join(a['algorithms'])}) | [{sc.name}.png](results/{sc.name}.png) |"
        )
    return rows


# --------------------------------------------------------------------------------- main


def parse_models(text: str) -> list[tuple[str, ...]]:
    """``--models shared/all,independent/all``: (link, allreduce) pairs."""
    return [tuple(m.split("/")) for m in text.split(",")]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["tune", "run", "analyze", "page", "all", "list"])
    p.add_argument(
        "names", nargs="*", help="families (tune) or scenarios (run, analyze); default all"
    )
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "results")
    p.add_argument("--docs", type=Path, default=ROOT / "docs" / "results")
    p.add_argument("--quick", action="store_true", help="tiny budgets: a smoke test")
    p.add_argument(
        "--models",
        type=parse_models,
        help="run: only these cluster models, e.g. shared/all,independent/all",
    )
    p.add_argument(
        "--variants",
        type=lambda s: s.split(","),
        help=f"tune: only these tunings, from default,{','.join(VARIANTS)}",
    )
    p.add_argument("--jobs", type=int, default=1,
                   help="tune: programs at once, in separate processes (one per core)")  # fmt: skip
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs: got {args.jobs}; expected >= 1")
    unknown = set(args.variants or ()) - {"default", *VARIANTS}
    if unknown:
        p.error(f"--variants: unknown {sorted(unknown)}; allowed: default, {', '.join(VARIANTS)}")
    global FAMILIES
    if args.quick:
        FAMILIES = {k: _quick(f) for k, f in FAMILIES.items()}
    if args.command == "list":
        for f in FAMILIES.values():
            print(f"family {f.name}: {', '.join(f.algorithms)}; budget {f.budget:g}")
        for sc in SCENARIOS.values():
            print(f"scenario {sc.name} ({sc.family}, claim {sc.claim}): {len(sc.models)} model(s)")
        return 0
    args.docs.mkdir(parents=True, exist_ok=True)
    if args.command in ("tune", "all"):
        names = args.names if args.command == "tune" and args.names else list(FAMILIES)
        wanted = args.variants or ["default", *VARIANTS]
        for name in names:
            if "default" in wanted:
                tune_family(FAMILIES[name], args.out, args.docs, jobs=args.jobs)
            for variant in VARIANTS:
                if variant in wanted and name in families_needing(variant):
                    tune_family(FAMILIES[name], args.out, args.docs, variant, args.jobs)
    if args.command in ("run", "all"):
        names = args.names if args.command == "run" and args.names else list(SCENARIOS)
        for name in names:
            run_scenario(SCENARIOS[name], args.out, args.docs, args.quick, args.models)
    if args.command in ("analyze", "all"):
        analyze_all(args.out, args.docs, args.names if args.command == "analyze" else None)
    if args.command in ("page", "all"):
        write_tables(args.docs)
        target = args.docs.parent / "results.md"
        target.write_text(page(args.docs))
        print(f"[results] wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
