"""Every number of docs/results.md: tuning, report runs and analysis (resumable).

    python scripts/results.py tune [FAMILY ...]      # α grid per family on seeds 100, 101
    python scripts/results.py run [SCENARIO ...]     # report runs: seeds 0..4 (hetero 0..14), tuned
    python scripts/results.py analyze                # intervals, verdicts, tables, plots
    python scripts/results.py page                   # DOCS/../results.md from its template
    python scripts/results.py all                    # the four in order
    python scripts/results.py list                   # families and scenarios

Options: ``--out DIR`` (run directories, default ``runs/results``), ``--docs DIR`` (where the
analysis writes JSON, Markdown tables and plots, default ``docs/results``), ``--quick``
(tiny budgets and grids: a smoke test of the pipeline, numbers meaningless), ``--models
shared/all,independent/all`` (``run``: only those cluster models of each scenario),
``--variants default,contributors`` (``tune``: only those tunings of each family; default: the
family's own and every model variant its scenarios need).

**Evaluation** is by simulated time: ``EVALS`` evaluations per budget (``eval.every_time``),
whatever the length of an algorithm's step.

**Tuning** (per family, on seeds the report never uses: base seed 100): one vmapped program
per algorithm over the (α × η) grid; score = median over seeds of each seed's time-averaged
evaluation return over the whole budget (the statistic the analysis compares: tuning for the
final level alone picked larger or smaller steps than the report rewards);
a grid point with a diverged seed is out; ties go to the smaller α.  If the winner's α is at
an edge of the grid, the grid is extended by two more values on that side and the new points
run; this repeats (up to four times) until every winner is interior.  The winners go to
``configs/cpu/<scenario>.yaml`` (the report configs) and ``DOCS/tuning_<family>.json``.

**Analysis** (per scenario and cluster model, seeds 0..4; 0..14 for the heterogeneous ones):
the per-seed time average of the evaluation return over the whole budget ("average return"),
its difference between Rennala NIGT (Malenia NIGT for heterogeneous environments) and each
baseline with a 90 % percentile bootstrap interval over seeds, and the ratio of times to
50 % / 80 % of the improvement (target = R0 + f (R_best − R0)) with its interval.  A claim
is *confirmed* or *refuted* only when the interval of the primary effect excludes a tie;
otherwise *inconclusive*, with the number of seeds an interval of that width would need.
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

import numpy as np
import yaml

from jaxnigt import config as config_lib
from jaxnigt import results
from jaxnigt.results import bootstrap_interval, curve_average, median_curve, time_to_target

ROOT = Path(__file__).resolve().parent.parent
MODELS = (("shared", "all"), ("shared", "contributors"), ("independent", "all"))
MODELS += (("independent", "contributors"),)
DEFAULT_MODEL = ("shared", "all")
TUNE_SEED = 100
LEVEL = 0.9
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
        return [a for _, algs in self.include for a in algs] + list(
            FAMILIES[self.family].algorithms
        )

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
    )
}


# ------------------------------------------------------------------------------ tuning


def _quick(f: Family) -> Family:
    return dataclasses.replace(f, budget=f.budget / 20, lr_exp=(-8, -6), tune_seeds=1)


def _window_average(xs, ys, start: float, end: float) -> float:
    """Time average of the step curve over ``[start, end]``."""
    return (curve_average(xs, ys, end) * end - curve_average(xs, ys, start) * start) / (end - start)


def score_run(run_dir: Path, algorithm: str, budget: float) -> list[dict]:
    """Per grid point: α, η, and the median over seeds of the average return over the whole
    budget (the statistic the report compares); a point with a seed that stopped before the
    budget (diverged) is marked."""
    rows = [r for r in results.read_metrics(run_dir) if r["algorithm"] == algorithm]
    out = []
    for (_, grid), seeds in results.group_curves(rows, x="sim_time", y="eval_return").items():
        mine = [r for r in rows if r["grid"] == grid]
        ends = {s: max(r["sim_time"] for r in mine if r["seed"] == s) for s in seeds}
        values = [curve_average(x, y, budget) for x, y in seeds.values()]
        out.append(
            {
                "learning_rate": mine[0]["learning_rate"],
                "eta": mine[0]["eta"],
                "score": float(np.median(values)),
                "diverged_seeds": [s for s, t in ends.items() if t < budget],
            }
        )
    return out


def choose(points: list[dict]) -> dict | None:
    ok = [p for p in points if not p["diverged_seeds"] and math.isfinite(p["score"])]
    if not ok:
        return None
    best = max(p["score"] for p in ok)
    return min((p for p in ok if p["score"] >= best - 1e-6), key=lambda p: p["learning_rate"])


# Which algorithms a cluster-model component affects: the server link only the asynchronous
# methods, the AllReduce participants only Rennala rounds (every worker contributes to Sync
# and Malenia rounds).  A model's tuning retunes just those.
VARIANTS = {"independent": ("link", "independent", ("afedpg", "a3c", "impala"))}
VARIANTS["contributors"] = ("allreduce", "contributors", ("rennala_nigt",))


def _tuning_run(
    fam: Family, algorithm: str, exps: list[int], out: Path, variant: str | None
) -> list[dict]:
    raw = merge(fam.base, {"name": f"tune_{fam.name}_{algorithm}", "algorithms": [algorithm]})
    if variant:
        key, value, _ = VARIANTS[variant]
        raw["cluster"] = {**raw["cluster"], key: value}
    raw.update(budget=float(fam.budget), seeds=fam.tune_seeds, seed=TUNE_SEED)
    raw.update(on_nonfinite="mark", target_return=None)
    raw["eval"] = {**raw["eval"], "every_time": fam.budget / EVALS}
    raw["grid"] = {"learning_rate": [2.0**e for e in exps], "eta": list(fam.eta)}
    cfg = config_lib.from_dict(raw)
    tag = f"__{variant}" if variant else ""
    run_dir = out / "tune" / f"{fam.name}{tag}" / f"{algorithm}_lr{min(exps)}_{max(exps)}"
    _run_once(cfg, run_dir)
    points = score_run(run_dir, algorithm, fam.budget)
    for p in points:  # report the requested grid values (metrics hold float32)
        p["lr_exp"] = min(exps, key=lambda e: abs(2.0**e - p["learning_rate"]))
        p["learning_rate"] = 2.0 ** p["lr_exp"]
    return points


def tune_algorithm(fam: Family, algorithm: str, out: Path, variant: str | None) -> tuple:
    """``(points, grid)``: the α × η grid of one algorithm, extended by two values on a side
    while the chosen α sits at that edge (at most four times)."""
    points, grid, ran = [], list(fam.lr_exp), set()
    for _ in range(5):
        new = [e for e in grid if e not in ran]
        if not new:
            break
        points += _tuning_run(fam, algorithm, new, out, variant)
        ran |= set(new)
        edge = _edge(choose(points), grid)
        if edge == "low":
            grid = [grid[0] - 4, grid[0] - 2, *grid]
        elif edge == "high" and grid[-1] < 0:
            grid = [*grid, grid[-1] + 2, min(grid[-1] + 4, 0)]
        else:
            break
    return points, sorted(ran)


def tune_family(fam: Family, out: Path, docs: Path, variant: str | None = None) -> dict:
    """Tunes α (and η) of every algorithm of ``fam`` (of those a cluster-model ``variant``
    affects) until each chosen α is interior to its grid."""
    affected = VARIANTS[variant][2] if variant else fam.algorithms
    algorithms = [a for a in fam.algorithms if a in affected]
    tuned = {a: tune_algorithm(fam, a, out, variant) for a in algorithms}
    chosen = {a: choose(points) for a, (points, _) in tuned.items()}
    report = {"family": fam.name, "variant": variant, "budget": fam.budget}
    report.update(seeds=fam.tune_seeds, seed=TUNE_SEED, eta=list(fam.eta), chosen=chosen)
    report["lr_exp"] = {a: grid for a, (_, grid) in tuned.items()}
    report["interior"] = {a: _edge(chosen[a], tuned[a][1]) is None for a in algorithms}
    report["points"] = {a: points for a, (points, _) in tuned.items()}
    report["command"] = " ".join(map(shlex.quote, sys.argv))
    docs.mkdir(parents=True, exist_ok=True)
    (docs / _tuning_file(fam.name, variant)).write_text(json.dumps(report, indent=2) + "\n")
    for a, c in chosen.items():
        what = "none finite" if c is None else f"lr=2^{c['lr_exp']} eta={c['eta']:g}"
        print(f"[results] tuned {fam.name}{'/' + variant if variant else ''}/{a}: {what}")
    return report


def _tuning_file(family: str, variant: str | None = None) -> str:
    return f"tuning_{family}{'__' + variant if variant else ''}.json"


def tuned_values(docs: Path, family: str, model=DEFAULT_MODEL) -> dict:
    """The chosen hyperparameters per algorithm for ``family`` under cluster ``model``: the
    family's tuning, with the algorithms a non-default model component affects retuned."""
    path = docs / _tuning_file(family)
    if not path.is_file():
        raise SystemExit(f"results: tune family {family!r} first ({path} missing)")
    chosen = dict(json.loads(path.read_text())["chosen"])
    for variant in (model[0], model[1]):
        if variant in VARIANTS:
            path = docs / _tuning_file(family, variant)
            if not path.is_file():
                raise SystemExit(f"results: tune {family!r} under {variant!r} first ({path})")
            chosen.update(json.loads(path.read_text())["chosen"])
    return chosen


def _edge(best: dict | None, grid: list[int]) -> str | None:
    if best is None:
        return None
    return "low" if best["lr_exp"] == min(grid) else "high" if best["lr_exp"] == max(grid) else None


# --------------------------------------------------------------------------------- runs


def _run_once(cfg, run_dir: Path) -> None:
    """Runs ``cfg`` into ``run_dir`` unless it already holds a finished run of it."""
    from jaxnigt import runner

    done = (run_dir / "summary.json").is_file() and (run_dir / "config.yaml").is_file()
    if done and config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml")) == cfg:
        print(f"[results] {run_dir}: finished earlier with this config; kept", flush=True)
        return
    print(f"[results] running {run_dir}", flush=True)
    runner.run_experiment(cfg, run_dir, overwrite=True, progress=False, plot=False, log=print)


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
            per[a] = {"learning_rate": c["learning_rate"], "eta": c["eta"]}
    raw["per_algorithm"] = per
    return raw


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
        _run_once(config_lib.from_dict(raw), out / sc.model_dir(model))


def families_needing(variant: str) -> set[str]:
    """Families with a scenario whose cluster models include ``variant``."""
    return {sc.family for sc in SCENARIOS.values() for m in sc.models if variant in m}


# ----------------------------------------------------------------------------- analysis

REFERENCE = {"equal": "rennala_nigt", "fastest": "rennala_nigt", "hetero": "malenia_nigt"}
REFERENCE["actor_critic"] = "rennala_nigt"
FRACTIONS = (0.5, 0.8)


def _algorithm_data(rows: list[dict], algorithm: str, budget: float, per_update: int = 1) -> dict:
    """One algorithm's curves and per-seed statistics; ``per_update``: trajectories per
    learner update of ``impala`` (its updates are counted from the trajectories applied)."""
    mine = [r for r in rows if r["algorithm"] == algorithm and r["grid"] == 0]
    curves = results.group_curves(mine, x="sim_time", y="eval_return")[(algorithm, 0)]
    seeds = sorted(curves)
    last = {s: max((r for r in mine if r["seed"] == s), key=lambda r: r["round"]) for s in seeds}
    per_arrival = algorithm in ("afedpg", "asgd", "a3c", "impala")
    data = {
        "curves": [curves[s] for s in seeds],
        "average": np.array([curve_average(*curves[s], budget) for s in seeds]),
        "second_half": np.array([_window_average(*curves[s], budget / 2, budget) for s in seeds]),
        "initial": [float(curves[s][1][0]) for s in seeds if curves[s][0][0] == 0.0],
        "updates": [
            float(last[s]["comms"]) / per_update if per_arrival else float(last[s]["round"])
            for s in seeds
        ],
        "env_steps": [float(last[s]["env_steps"]) for s in seeds],
    }
    for t in sorted(k for k in mine[0] if k.startswith("eval_type")):
        per_type = results.group_curves(mine, x="sim_time", y=t)[(algorithm, 0)]
        data[t] = np.array([_window_average(*per_type[s], budget / 2, budget) for s in seeds])
    return data


def _ttt(curves: list, target: float) -> float:
    xs, med = median_curve(dict(enumerate(curves)))
    t = time_to_target(xs, med, target)
    return math.inf if t is None else t


def _ratio(other: float, ref: float) -> float:
    """other / ref for times to target (inf = never reached; NaN when neither reaches it)."""
    if math.isinf(other) and math.isinf(ref):
        return math.nan
    if ref == 0:
        return 1.0 if other == 0 else math.inf
    return other / ref


def _interval(est, low, high) -> dict:
    return {"estimate": est, "low": low, "high": high}


def _needed_seeds(iv: dict, seeds: int) -> int | None:
    half = (iv["high"] - iv["low"]) / 2
    if not math.isfinite(half) or iv["estimate"] == 0:
        return None
    return math.ceil(seeds * (half / abs(iv["estimate"])) ** 2)


def compare(ref: dict, other: dict, targets: dict, seeds: int) -> dict:
    """Reference minus other in average return, and other's / reference's time to target."""
    mean_diff = lambda a, b: a.mean() - b.mean()
    diff = _interval(*bootstrap_interval(mean_diff, ref["average"], other["average"], level=LEVEL))
    out = {"average_return_difference": diff, "time_to_target_ratio": {}}
    ia, ib = np.arange(len(ref["curves"])), np.arange(len(other["curves"]))
    for f, target in targets.items():
        ratio = lambda a, b, t=target: _ratio(
            _ttt([other["curves"][i] for i in b], t), _ttt([ref["curves"][i] for i in a], t)
        )
        est, low, high = bootstrap_interval(ratio, ia, ib, level=LEVEL, reps=500)
        out["time_to_target_ratio"][str(f)] = _interval(est, low, high)
    # the same per-seed numbers (e.g. Rennala and Sync NIGT with equal times): one run twice
    out["identical"] = bool(np.array_equal(ref["average"], other["average"]))
    out["decided"] = diff["low"] > 0 or diff["high"] < 0
    out["needed_seeds"] = None if out["decided"] else _needed_seeds(diff, seeds)
    return out


def verdict(claim: str, comparisons: dict) -> str:
    diffs = {b: c["average_return_difference"] for b, c in comparisons.items()}
    if claim == "equal":
        d = diffs["sync_nigt"]
        if comparisons["sync_nigt"]["identical"]:
            return "confirmed (identical runs)"
        return "refuted" if d["low"] > 0 or d["high"] < 0 else "tie not refuted"
    wanted = ["afedpg"] if claim == "hetero" else list(diffs)
    if any(diffs[b]["high"] < 0 for b in wanted):
        return "refuted"
    if all(diffs[b]["low"] > 0 for b in wanted):
        return "confirmed"
    return "inconclusive"


def analyze_run(sc: Scenario, model, run_dir: Path, budget: float) -> dict:
    rows = results.read_metrics(run_dir)
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
    cfg = config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml"))
    per_update = {a: 1 for a in algorithms}
    if "impala" in per_update:
        per_update["impala"] = cfg.hparams_for("impala").impala_batch or cfg.cluster.n
    data = {a: _algorithm_data(rows, a, budget, per_update[a]) for a in algorithms}
    r0 = float(np.median([v for d in data.values() for v in d["initial"]]))
    best = max(float(np.median(d["second_half"])) for d in data.values())
    targets = {f: r0 + f * (best - r0) for f in FRACTIONS}
    ref = REFERENCE[sc.claim]
    comparisons = {
        a: compare(data[ref], data[a], targets, len(data[ref]["average"]))
        for a in algorithms
        if a != ref
    }
    spread = np.median(
        [np.subtract(*np.quantile(d["second_half"], [0.8, 0.2])) for d in data.values()]
    )
    summary = {
        a: {
            "seeds": len(d["average"]),
            "average_return_median": float(np.median(d["average"])),
            "second_half_median": float(np.median(d["second_half"])),
            "updates_median": float(np.median(d["updates"])),
            "env_steps_median": float(np.median(d["env_steps"])),
            "time_to_target": {str(f): _ttt(d["curves"], t) for f, t in targets.items()},
            **{k: float(np.median(v)) for k, v in d.items() if k.startswith("eval_type")},
        }
        for a, d in data.items()
    }
    return {
        "scenario": sc.name,
        "model": {"link": model[0], "allreduce": model[1]},
        "claim": sc.claim,
        "budget": budget,
        "reference": ref,
        "initial_median_return": r0,
        "best_second_half_median": best,
        "improvement_over_spread": float((best - r0) / spread) if spread > 0 else math.inf,
        "targets": {str(f): t for f, t in targets.items()},
        "algorithms": summary,
        "comparisons": comparisons,
        "verdict": verdict(sc.claim, comparisons),
        "curves": {a: d["curves"] for a, d in data.items()},
    }


def gap_growth(small: tuple, large: tuple, baseline: str) -> dict:
    """Does the reference's lead over ``baseline`` grow from scenario ``small`` to ``large``?

    Each scenario's lead is the difference in average return divided by that scenario's
    improvement (R_best − R0), so that scenarios with different returns compare; the
    statistic is lead(large) − lead(small), bootstrapped over the four groups of seeds.
    """
    (a_s, c_s), (a_l, c_l) = small, large
    scale = lambda a: a["best_second_half_median"] - a["initial_median_return"]
    ref_s, ref_l = a_s["reference"], a_l["reference"]

    def lead(ref, other, a):
        return (ref.mean() - other.mean()) / scale(a)

    groups = (c_s[ref_s], c_s[baseline], c_l[ref_l], c_l[baseline])
    stat = lambda r1, b1, r2, b2: lead(r2, b2, a_l) - lead(r1, b1, a_s)
    iv = _interval(*bootstrap_interval(stat, *groups, level=LEVEL))
    decided = iv["low"] > 0 or iv["high"] < 0
    out = {"lead_difference": iv, "needed_seeds": None if decided else _needed_seeds(iv, 5)}
    out["verdict"] = (
        "confirmed" if iv["low"] > 0 else "refuted" if iv["high"] < 0 else "inconclusive"
    )
    return out


def _fmt(iv: dict, digits: int = 2) -> str:
    f = lambda v: "∞" if v == math.inf else "−∞" if v == -math.inf else f"{v:.{digits}f}"
    return f"{f(iv['estimate'])} [{f(iv['low'])}, {f(iv['high'])}]"


def _outcome(reference: str, baseline: str, c: dict) -> str:
    """Which method the interval of the difference in average return favours, if any."""
    iv = c["average_return_difference"]
    if iv["low"] > 0:
        return f"{reference} ahead"
    if iv["high"] < 0:
        return f"{baseline} ahead"
    return "tie not excluded" + (f" (≈{c['needed_seeds']} seeds)" if c["needed_seeds"] else "")


def table_rows(analyses: dict) -> list[str]:
    rows = []
    for _name, (a, _) in analyses.items():
        model = f"{a['model']['link']} / {a['model']['allreduce']}"
        command = f"`python scripts/results.py run {a['scenario']}"
        if (a["model"]["link"], a["model"]["allreduce"]) != DEFAULT_MODEL:
            command += f" --models {a['model']['link']}/{a['model']['allreduce']}"
        command += "`"
        verdict = "– (not a paper claim)" if a["claim"] == "actor_critic" else a["verdict"]
        for b, c in a["comparisons"].items():
            ratio = c["time_to_target_ratio"]["0.5"]
            rows.append(
                f"| {a['claim']} | `{a['scenario']}` | {model} | {a['reference']} vs {b} | "
                f"{_fmt(c['average_return_difference'])} | {_fmt(ratio)} | "
                f"{_outcome(a['reference'], b, c)} | **{verdict}** | "
                f"{a['improvement_over_spread']:.0f} | {command} |"
            )
    return rows


def model_matrix(out: Path, sc: Scenario, docs: Path, budget: float) -> Path | None:
    """The four cluster models of ``sc`` side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxnigt.plotting import draw_curves

    dirs = [(m, out / sc.model_dir(m)) for m in sc.models]
    if len(dirs) != 4 or not all((d / "metrics.csv").is_file() for _, d in dirs):
        return None
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


def analyze_all(out: Path, docs: Path, quick: bool) -> None:
    from jaxnigt.plotting import plot_runs

    analyses = {}
    for sc in SCENARIOS.values():
        budget = sc.budget / (20 if quick else 1)
        for model in sc.models:
            name, run_dir = sc.model_dir(model), out / sc.model_dir(model)
            if not (run_dir / "summary.json").is_file():
                continue
            a = analyze_run(sc, model, run_dir, budget)
            per_seed = {alg: d for alg, d in a.pop("curves").items()}
            averages = {
                alg: np.array([curve_average(*c, budget) for c in cs])
                for alg, cs in per_seed.items()
            }
            analyses[name] = (a, averages)
            (docs / f"{name}.json").write_text(json.dumps(a, indent=2) + "\n")
            title = f"{sc.name} (link {model[0]}, allreduce {model[1]})"
            plot_runs([run_dir], out=docs / f"{name}.png", budget=budget, title=title)
            for t in (k for k in next(iter(a["algorithms"].values())) if k.startswith("eval_type")):
                plot_runs([run_dir], y=t, out=docs / f"{name}_{t}.png", title=f"{title}: {t}")
        model_matrix(out, sc, docs, budget)
    lines = [
        "| claim | scenario | model (link / allreduce) | comparison | Δ average return [90 % CI] "
        "| time to 50 %: ratio [90 % CI] | outcome | verdict | improvement / spread | command |",
        "|---|---|---|---|---|---|---|---|---:|---|",
        *table_rows(analyses),
    ]
    for env in ("point_mass", "reacher"):
        small, large = analyses.get(f"{env}_sqrt"), analyses.get(f"{env}_sqrt_dim")
        if small and large:
            for baseline in ("sync_nigt", "afedpg"):
                g = gap_growth(small, large, baseline)
                (docs / f"{env}_gap_{baseline}.json").write_text(json.dumps(g, indent=2) + "\n")
                lines.append(
                    f"| bigger gap with more communication | `{env}_sqrt` → `{env}_sqrt_dim` | "
                    f"shared / all | lead over {baseline} (per unit of improvement) | "
                    f"{_fmt(g['lead_difference'], 3)} | – | – | **{g['verdict']}** | – | "
                    f"`python scripts/results.py analyze` |"
                )
    (docs / "verdicts.md").write_text("\n".join(lines) + "\n")
    (docs / "tuning.md").write_text("\n".join(tuning_rows(docs)) + "\n")
    print("\n".join(lines))


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
}


def _cell(a: dict | None, baseline: str) -> str:
    if a is None:
        return "not run"
    c = a["comparisons"][baseline]
    return f"{_fmt(c['average_return_difference'])}: {_outcome(a['reference'], baseline, c)}"


def page(docs: Path, template: Path = PAGE_TEMPLATE) -> str:
    """``template`` with its placeholders filled from the analysis in ``docs``:
    ``{{VERDICTS}}``, ``{{TUNING}}``, ``{{SCENARIOS}}``, ``{{MATRIX:<env>}}`` (the four cluster
    models of ``<env>_sqrt_dim`` and ``<env>_n100``) and ``{{HETERO:<scenario>}}`` (per-type
    second-half returns)."""

    def load(name: str) -> dict | None:
        path = docs / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    text = template.read_text()
    if text.startswith("<!--"):  # the template's own note
        text = text.split("\n", 1)[1]
    note = "<!-- Written by `python scripts/results.py page` from scripts/results_page.md. -->"
    text = f"{note}\n{text}"
    text = text.replace("{{VERDICTS}}", (docs / "verdicts.md").read_text().strip())
    text = text.replace("{{TUNING}}", (docs / "tuning.md").read_text().strip())
    rows = []
    for sc in SCENARIOS.values():
        a = load(sc.name)
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
    text = text.replace("{{SCENARIOS}}", "\n".join(rows))
    for env in ("point_mass", "reacher"):
        rows = []
        for m in MODELS:
            small = load(SCENARIOS[f"{env}_sqrt_dim"].model_dir(m))
            large = load(SCENARIOS[f"{env}_n100"].model_dir(m))
            cells = [_cell(a, b) for a in (small, large) for b in ("sync_nigt", "afedpg")]
            rows.append(f"| {m[0]} / {m[1]} | {' | '.join(cells)} |")
        text = text.replace(f"{{{{MATRIX:{env}}}}}", "\n".join(rows))
    for sc in SCENARIOS.values():
        tag = f"{{{{HETERO:{sc.name}}}}}"
        if tag in text:
            a = load(sc.name)
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


# --------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["tune", "run", "analyze", "page", "all", "list"])
    p.add_argument("names", nargs="*", help="families (tune) or scenarios (run); default all")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "results")
    p.add_argument("--docs", type=Path, default=ROOT / "docs" / "results")
    p.add_argument("--quick", action="store_true", help="tiny budgets: a smoke test")
    p.add_argument(
        "--models",
        type=lambda s: [tuple(m.split("/")) for m in s.split(",")],
        help="run: only these cluster models, e.g. shared/all,independent/all",
    )
    p.add_argument(
        "--variants",
        type=lambda s: s.split(","),
        help=f"tune: only these tunings, from default,{','.join(VARIANTS)}",
    )
    args = p.parse_args(argv)
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
                tune_family(FAMILIES[name], args.out, args.docs)
            for variant in VARIANTS:
                if variant in wanted and name in families_needing(variant):
                    tune_family(FAMILIES[name], args.out, args.docs, variant)
    if args.command in ("run", "all"):
        names = args.names if args.command == "run" and args.names else list(SCENARIOS)
        for name in names:
            run_scenario(SCENARIOS[name], args.out, args.docs, args.quick, args.models)
    if args.command in ("analyze", "all"):
        analyze_all(args.out, args.docs, args.quick)
    if args.command in ("page", "all"):
        target = args.docs.parent / "results.md"
        target.write_text(page(args.docs))
        print(f"[results] wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
