"""The second edition of docs/results.md: families of scenarios tuned at a fixed budget.

    python scripts/paper second tune [FAMILY ...]    # `jaxnigt tune` per family, seeds 100, 101
    python scripts/paper second run [SCENARIO ...]   # report runs: seeds 0..4 (hetero 0..14), tuned
    python scripts/paper second analyze              # `jaxnigt compare` per run; JSON and plots
    python scripts/paper second all                  # the three in order
    python scripts/paper second list                 # families and scenarios

Options: ``--out DIR`` (run directories, default ``runs/results``), ``--docs DIR`` (where the
analysis writes JSON, Markdown tables and plots, default ``docs/results``), ``--quick``
(tiny budgets and grids: a smoke test of the pipeline, numbers meaningless), ``--models
shared/all,independent/all`` (``run``: only those cluster models of each scenario),
``--variants default,contributors`` (``tune``: only those tunings of each family; default: the
family's own and every model variant its scenarios need).  ``python scripts/paper page``
puts the tables on the page.

**Evaluation** is by simulated time: ``EVALS`` evaluations per budget (``eval.every_time``),
whatever the length of an algorithm's step.

**Tuning** (per family, on seeds the report never uses: base seed 100, two seeds): the
family's base config at its budget through :func:`jaxnigt.studies.tuning.tune`.  A cluster-model
variant (``link: independent``, ``allreduce: contributors``) retunes only the algorithms
whose ``Traits.cluster_options`` include that option.  The winners go to
``scripts/paper/configs/<scenario>.yaml`` (the report configs) and ``DOCS/tuning_<family>.json``.

**Analysis**: :mod:`paper.second_analysis`.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path

import yaml

from jaxnigt import config as config_lib
from jaxnigt.config import merge
from jaxnigt.studies import tuning
from paper.claims import HETEROGENEOUS, HOMOGENEOUS
from paper.scenarios import (
    DEFAULT_MODEL,
    EQUAL,
    EXPONENTIAL,
    HETERO,
    LOCOMOTION,
    MODELS,
    N100,
    SQRT,
    STRAGGLER,
    VARIANTS,
    Scenario,
    affected,
    base,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = Path(__file__).resolve().parent / "configs"  # the report configs it writes
TUNE_SEED = 100
# Evaluations per budget, by simulated time (``eval.every_time``): a Rennala round and a block
# of asynchronous arrivals differ in length by up to n×, so a cadence in steps would leave the
# asynchronous methods with a handful of evaluations.
EVALS = 64


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
        Family("point_mass", base("point_mass"), HOMOGENEOUS, 32000, _GRID),
        Family("point_mass_n100", base("point_mass", N100), HOMOGENEOUS, 88000, _GRID),
        Family("point_mass_hetero", base("point_mass", HETERO), HETEROGENEOUS, 60000, _GRID),
        Family("reacher", base("reacher"), HOMOGENEOUS, 32000, _GRID),
        Family("reacher_n100", base("reacher", N100), HOMOGENEOUS, 88000, _GRID),
        Family("reacher_hetero", base("reacher", HETERO), HETEROGENEOUS, 30000, _GRID),
        Family("hopper", base("hopper", LOCOMOTION), HOMOGENEOUS, 3100, (-10, -8, -6), eta=(0.1,)),
        Family("point_mass_ac", base("point_mass"), ACTOR_CRITIC, 32000, _GRID, eta=(0.1,)),
        Family("reacher_ac", base("reacher"), ACTOR_CRITIC, 32000, _GRID, eta=(0.1,)),
        Family("point_mass_seed", base("point_mass"), SEED_RL, 32000, _GRID, eta=(0.1,)),
        Family("reacher_seed", base("reacher"), SEED_RL, 32000, _GRID, eta=(0.1,)),
        *(
            Family(
                f"{env}_beyond",
                base(env),
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


ENVS = ("point_mass", "reacher")


def _scenario(setting, family, overrides, budget, seeds=5, **kw) -> Scenario:
    """The scenario ``<env>_<setting>`` of ``family``'s environment."""
    env = FAMILIES[family].base["env"]["name"]
    return Scenario.of(env, setting, overrides, seeds=seeds, budget=budget, family=family, **kw)


def _env_scenarios(env: str) -> list[Scenario]:
    return [
        _scenario("equal", env, EQUAL, 2000),
        _scenario("sqrt", env, SQRT, 7500),
        _scenario("sqrt_dim", env, {}, 32000, models=MODELS),
        _scenario("exponential", env, EXPONENTIAL, 32000),
        _scenario("straggler", env, STRAGGLER, 32000),
        _scenario("n100", f"{env}_n100", {}, 88000, models=MODELS),
        # 15 seeds: with 5 the interval of Malenia NIGT vs AFedPG was too wide to decide
        # (first pass: 1.90 [-1.26, 4.78], about 13 seeds needed)
        _scenario("hetero", f"{env}_hetero", {}, FAMILIES[f"{env}_hetero"].budget, 15),
    ]


def _beside(kind: str, env: str):
    """The scenarios that run a family beside other families' methods (no paper claims)."""
    if kind == "ac":
        ac = dict(models=_AC_MODELS, include=((env, _R),))
        yield _scenario("ac", f"{env}_ac", {}, 32000, **ac)
    elif kind == "seed":
        seed = dict(models=_AC_MODELS, include=((env, _R), (f"{env}_ac", ("impala",))))
        yield _scenario("seed", f"{env}_seed", {}, 32000, **seed)
    else:
        beyond = dict(models=_AC_MODELS, include=((env, ("rennala_nigt", "afedpg")),))
        for setting, overrides in (("beyond", {}), ("beyond_straggler", STRAGGLER)):
            yield _scenario(setting, f"{env}_beyond", overrides, 32000, **beyond)


SCENARIOS = {
    s.name: s
    for s in (
        *_env_scenarios("point_mass"),
        *_env_scenarios("reacher"),
        # Locomotion at H = 1000: a Rennala NIGT round takes ~32 time units here, so ~190
        # updates (twice the tuning budget); episodes lengthen as the hopper learns, and longer
        # budgets did not fit the CPU time of this edition.
        _scenario("sqrt_dim", "hopper", {}, 6200),
        *(s for kind in ("ac", "seed", "beyond") for env in ENVS for s in _beside(kind, env)),
    )
}


def scenario_algorithms(sc: Scenario) -> list[str]:
    """A second-edition scenario's methods: the included families', then its family's."""
    fam = FAMILIES[sc.family]
    derived = [d[0] for d in fam.derived]
    return [a for _, algs in sc.include for a in algs] + [*fam.algorithms, *derived]


# ------------------------------------------------------------------------------ tuning


def quick(f: Family) -> Family:
    """``f`` as a smoke test's: a twentieth of the budget, two step sizes, one seed."""
    return dataclasses.replace(f, budget=f.budget / 20, lr_exp=(-8, -6), tune_seeds=1)


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
        raw,
        where,
        algorithms=algorithms,
        grid=grid,
        seeds=seeds,
        resume=(where / tuning.RECORD).is_file(),
        progress=False,
        command=" ".join(map(shlex.quote, sys.argv)),
        jobs=jobs,
    )
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
    raw.update(name=sc.model_dir(model), algorithms=scenario_algorithms(sc), seed=0)
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
        f"# {sc.name}: written by `python scripts/paper second run` (claim '{sc.claim}'); "
        f"hyperparameters\n# from the tuning of family {' and '.join(map(repr, families))} on "
        f"seeds {TUNE_SEED}.. ({files}).\n"
    )
    path = CONFIGS / f"{sc.name}.yaml"
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


def tune_all(names, out: Path, docs: Path, variants=None, jobs: int = 1) -> None:
    """Tunes the families ``names``: their own tuning and each cluster-model variant their
    scenarios need (``variants``: only those of ``default``, ``independent``, ...)."""
    wanted = variants or ["default", *VARIANTS]
    for name in names:
        if "default" in wanted:
            tune_family(FAMILIES[name], out, docs, jobs=jobs)
        for variant in VARIANTS:
            if variant in wanted and name in families_needing(variant):
                tune_family(FAMILIES[name], out, docs, variant, jobs)


def list_all() -> None:
    for f in FAMILIES.values():
        print(f"family {f.name}: {', '.join(f.algorithms)}; budget {f.budget:g}")
    for sc in SCENARIOS.values():
        print(f"scenario {sc.name} ({sc.family}, claim {sc.claim}): {len(sc.models)} model(s)")


def families_needing(variant: str) -> set[str]:
    """Families with a scenario whose cluster models include ``variant``."""
    return {sc.family for sc in SCENARIOS.values() for m in sc.models if variant in m}
