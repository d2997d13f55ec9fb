"""The paper's Humanoid scenarios at paper size on one GPU, within a time limit.

    python scripts/gpu_results.py OUT SECONDS [--tiny] [--rate STEPS_PER_S] [--compile S]

Called by ``scripts/gpu/results.sh`` (the hook of ``scripts/gpu/run.sh``).  The scenarios, in
order (the paper's, SPEC §8): Humanoid n = 10 with h_i = √i and κ_i = √i·d^{1/4}, then κ_i = √i,
then equal times, then the heterogeneous n = 2 (h = (1, 10), sign-flipped rewards).  Each is
the third edition's pipeline (``scripts/third_edition.py``): the paper's grid on the tuning
seeds 100, 101 (α = 2^-10 … 2^-1, η ∈ {0.001, 0.01, 0.1}, M = M_init ∈ {20, 30, 50}; at most
one grid extension, where the CPU editions allow four), then the report run, 5 seeds
vmapped, then ``jaxnigt compare`` with the claim's statistic and a plot.

**Sizing.** There is no time for a first look here, so the budget comes from the time: each
scenario gets an equal share of the time left when it starts; :func:`jaxnigt.run.plan.
plan_algorithm` gives the environment steps a run takes per unit of simulated time, and the
budget is the largest (at most the paper's) for which every program of the scenario fits
its share at ``--rate`` environment steps per second plus ``--compile`` seconds per program.
The rate and the compile time come from the GPU benchmark that ``run.sh`` runs first
(``JAXNIGT_BENCH_JSON``: its fastest rollout on the env, twice its slowest compile), else from
the package's plan figures for this backend, else from the flags' defaults.  A scenario whose
budget would fall below :data:`MIN_ROUNDS` Rennala rounds is skipped, not shrunk further.
``OUT/manifest.json`` says, after every step, what ran, what was shrunk (budget against the
paper's, grid extensions) and what was skipped and why.

``--tiny``: the same path on the CPU in about a minute: point_mass, n = 4, one scenario with
Rennala and Sync NIGT only, one tuning seed, a grid of two step sizes; for the test suite
(numbers meaningless).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import third_edition as third  # scripts/third_edition.py

from jaxnigt import config as config_lib
from jaxnigt.run import plan
from jaxnigt.studies import tuning

PAPER_BUDGET = {"sqrt_dim": 40000.0, "sqrt": 40000.0, "equal": 40000.0, "hetero": 20000.0}
MIN_ROUNDS = 20
# Without a benchmark or plan figure (env steps/s; seconds per compiled program): a guess for
# one H200 on Humanoid (MJX solver 1/4; PERF-NOTES has CPU figures only) and point_mass's CPU.
DEFAULT_RATE = {"humanoid": 2e5, "point_mass": 2e4}
DEFAULT_COMPILE_S = {"humanoid": 60.0, "point_mass": 8.0}
TINY_BUDGET = 600.0  # the tiny mode's "paper" budget
_HUMANOID = {"env": {"name": "humanoid", "solver_iterations": 1, "ls_iterations": 4}}
_HET = {
    "env": {"heterogeneous": "sign_flip"},
    "cluster": {"n": 2, "h": [1.0, 10.0], "kappa": 0.0, "scale_by_dim": False},
    "eval": {"episodes": 16},
}
_CLUSTERS = {
    "sqrt_dim": {},
    "sqrt": {"cluster": {"scale_by_dim": False}},
    "equal": {"cluster": {"h": "equal", "kappa": 0.0, "scale_by_dim": False}},
    "hetero": _HET,
}
CLAIM = {"sqrt_dim": "fastest", "sqrt": "fastest", "equal": "equal", "hetero": "hetero"}
GRID = dataclasses.replace(third.PAPER_GRID, max_extensions=1)
TINY_GRID = tuning.Grid(lr_exp=(-7, -5), eta=(0.1,), shapes={"M": (4,)}, max_extensions=0)
_TINY = {"env": {"name": "point_mass"}, "cluster": {"n": 4}, "hparams": {"M": 4, "M_init": 4}}


def scenarios(tiny: bool) -> list[third.Scenario]:
    keys = ("sqrt_dim",) if tiny else tuple(CLAIM)
    out = []
    for key in keys:
        overrides = third.second.merge(_TINY if tiny else _HUMANOID, _CLUSTERS[key])
        seeds = 2 if tiny else 5
        name = f"{'point_mass_tiny' if tiny else 'humanoid'}_{key}"
        paper = TINY_BUDGET if tiny else PAPER_BUDGET[key]
        only = ("rennala_nigt", "sync_nigt") if tiny else ()
        out.append(third.Scenario(name, overrides["env"]["name"], overrides, paper, CLAIM[key],
                                  seeds, only=only))  # fmt: skip
    return out


def device_figures(env: str, rate: float | None, compile_s: float | None) -> dict:
    """The rate (env steps/s) and compile time (s per program) the sizing assumes, and where
    each came from."""
    source = "the command line"
    bench = Path(os.environ.get("JAXNIGT_BENCH_JSON") or "")
    if rate is None and bench.name and bench.is_file():
        table = json.loads(bench.read_text()).get("results", {}).get("gpu", {})
        rows = [r for r in table.get("rows", [])
                if r.get("env") == env and r.get("alive_steps_per_s")]  # fmt: skip
        if rows:
            rate = max(r["alive_steps_per_s"] for r in rows)
            slowest = max(r.get("compile_s", 0.0) + r.get("lower_s", 0.0) for r in rows)
            compile_s = compile_s if compile_s is not None else 2.0 * slowest
            source = f"{bench} (fastest rollout; twice the slowest compile)"
    if rate is None:
        figure = plan.figures().get(env, {})
        rate = figure.get("steps_per_s")
        source = figure.get("source", "")
    if rate is None:
        rate, source = DEFAULT_RATE.get(env, DEFAULT_RATE["humanoid"]), "this script's default"
    if compile_s is None:
        compile_s = DEFAULT_COMPILE_S.get(env, DEFAULT_COMPILE_S["humanoid"])
    return {"steps_per_s": float(rate), "compile_s": float(compile_s), "source": source}


def programs(pipe: third.Pipeline) -> list[tuple[str, int]]:
    """``(algorithm, runs)`` of every program the scenario compiles: the tunings (each M one
    program), then the report runs."""
    out = []
    for _, algorithms in pipe.tuning_tags():
        for a in algorithms:
            shapes = tuning.tuned_shapes(a, pipe.grid)
            count = math.prod(len(pipe.grid.shapes[s]) for s in shapes) if shapes else 1
            runs = len(pipe.grid.lr_exp) * len(pipe.grid.eta) * len(pipe.seeds)
            out += [(a, runs)] * count
    return out + [(a, pipe.sc.seeds) for a in pipe.sc.algorithms]


def size(pipe: third.Pipeline, seconds: float, figures: dict) -> dict:
    """The budget for which ``pipe``'s programs fit ``seconds`` (module docstring)."""
    raw = third._timed(third.scenario_raw(pipe.sc), pipe.sc.look, pipe.sc.look / 100)
    cfg = config_lib.from_dict(raw)
    rows = {a: plan.plan_algorithm(cfg, a, memory=False) for a in pipe.sc.algorithms}
    per_time = {a: r["env_steps_per_run"] / cfg.budget for a, r in rows.items()}
    progs = programs(pipe)
    steps_per_time = sum(per_time[a] * runs for a, runs in progs)
    free = seconds - len(progs) * figures["compile_s"]
    budget = min(pipe.sc.look, free * figures["steps_per_s"] / steps_per_time)
    round_time = rows.get("rennala_nigt", next(iter(rows.values())))["step_time"]
    return {
        "paper_budget": pipe.sc.look,
        "budget": float(third.round_down(budget)) if budget > 0 else 0.0,
        "programs": len(progs),
        "env_steps_per_time": steps_per_time,
        "rennala_round_time": round_time,
        "enough": budget >= MIN_ROUNDS * round_time,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("seconds", type=float)
    p.add_argument("--tiny", action="store_true", help="point_mass on the CPU: a check")
    p.add_argument("--rate", type=float, help="env steps per second the sizing assumes")
    p.add_argument("--compile", type=float, help="seconds per compiled program assumed")
    args = p.parse_args(argv)
    start = time.monotonic()
    docs = args.out / "docs"
    manifest = {"seconds": args.seconds, "tiny": args.tiny, "scenarios": {}, "shrunk": [
        "no first look: the budget is sized from the time (module docstring)",
        f"at most {GRID.max_extensions} grid extension per algorithm (CPU editions: "
        f"{tuning.MAX_EXTENSIONS})",
    ]}  # fmt: skip

    def save():
        (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")

    args.out.mkdir(parents=True, exist_ok=True)
    todo = scenarios(args.tiny)
    grid = TINY_GRID if args.tiny else GRID
    for i, sc in enumerate(todo):
        pipe = third.Pipeline(sc, args.out / "runs", docs, grid=grid)
        if args.tiny:
            pipe.seeds = third.TUNE_SEEDS[:1]
        left = args.seconds - (time.monotonic() - start) - 30  # analysis and packing
        figures = device_figures(sc.env, args.rate, args.compile)
        sizing = size(pipe, left / (len(todo) - i), figures)
        entry = {"claim": sc.claim, "device": figures, **sizing}
        manifest["scenarios"][sc.name] = entry
        if not sizing["enough"]:
            entry["skipped"] = f"budget {sizing['budget']:g} < {MIN_ROUNDS} Rennala rounds"
            print(f"[gpu-results] {sc.name}: skipped ({entry['skipped']})", flush=True)
            save()
            continue
        budget = sizing["budget"]
        pipe.size(budget, third.round_down(budget / third.MIN_EVALS),
                  f"sized from the time: {sizing}")  # fmt: skip
        print(f"[gpu-results] {sc.name}: budget {budget:g} (paper {sc.look:g})", flush=True)
        t0 = time.monotonic()
        for stage in ("tune", "run", "analyze"):
            getattr(pipe, stage)()
            entry[f"{stage}_s"] = round(time.monotonic() - t0, 1)
            save()
    third.gap_growth(args.out / "runs", docs, "point_mass_tiny" if args.tiny else "humanoid")
    manifest["wall_s"] = round(time.monotonic() - start, 1)
    save()
    print(f"[gpu-results] done in {manifest['wall_s']:.0f}s: {args.out / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
