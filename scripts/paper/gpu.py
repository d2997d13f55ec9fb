"""The paper's Humanoid scenarios at paper size on one GPU, within a time limit.

    python scripts/paper gpu OUT SECONDS [--tiny] [--rate STEPS_PER_S] [--compile S]

Called by ``scripts/gpu/results.sh`` (the hook of ``scripts/gpu/run.sh``).  The scenarios, in
order (the paper's, docs/results.md): Humanoid n = 10 with h_i = √i and κ_i = √i·d^{1/4}, then
κ_i = √i, then equal times, then the heterogeneous n = 2 (h = (1, 10), sign-flipped rewards).
Each is the third edition's pipeline (:mod:`paper.third`): the paper's grid on the tuning
seeds 100, 101 (α = 2^-10 … 2^-1, η ∈ {0.001, 0.01, 0.1}, M = M_init ∈ {20, 30, 50}; at most
one grid extension, where the CPU editions allow four), then the report run, 5 seeds
vmapped, then ``jaxnigt compare`` with the claim's statistic and a plot.

**Sizing.** There is no time for a first look here, so the budget comes from the time: each
scenario gets an equal share of the time left when it starts; :func:`jaxnigt.run.plan.
plan_algorithm` gives the environment steps a run takes per unit of simulated time, and the
budget is the largest (at most the paper's) for which every program of the scenario fits
its share at ``--rate`` environment steps per second plus ``--compile`` seconds per program.
The rate and the compile time come from the GPU benchmark that ``run.sh`` runs first
(``JAXNIGT_BENCH_JSON``: its fastest rollout on the env, each algorithm's multi-seed training
program where it measured one, twice its slowest compile), else from
the package's plan figures for this backend, else from the flags' defaults.  A scenario whose
budget would fall below :data:`MIN_ROUNDS` Rennala rounds is skipped, not shrunk further.
``OUT/manifest.json`` says, after every step, what ran, what was shrunk (budget against the
paper's, grid extensions) and what was skipped and why.

``--tiny``: the same path on the CPU in about a minute: point_mass, n = 4, one scenario with
Rennala and Sync NIGT only, one tuning seed, a grid of two step sizes; for the test suite
(numbers meaningless).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from pathlib import Path

from jaxnigt import config as config_lib
from jaxnigt.config import merge
from jaxnigt.run import plan
from jaxnigt.studies import tuning
from paper import sizing, third, third_scenarios
from paper.scenarios import EQUAL, HETERO, SQRT, Scenario

PAPER_BUDGET = {"sqrt_dim": 40000.0, "sqrt": 40000.0, "equal": 40000.0, "hetero": 20000.0}
MIN_ROUNDS = 20
# Without a benchmark or plan figure (env steps/s; seconds per compiled program): a guess for
# one H200 on Humanoid (MJX solver 1/4; PERF-NOTES has CPU figures only) and point_mass's CPU.
DEFAULT_RATE = {"humanoid": 2e5, "point_mass": 2e4}
DEFAULT_COMPILE_S = {"humanoid": 60.0, "point_mass": 8.0}
TINY_BUDGET = 600.0  # the tiny mode's "paper" budget
_HUMANOID = {"env": {"name": "humanoid", "solver_iterations": 1, "ls_iterations": 4}}
# The cluster settings, in order (each one's claim: paper.claims), and their overlays.
_CLUSTERS = {"sqrt_dim": {}, "sqrt": SQRT, "equal": EQUAL, "hetero": HETERO}
GRID = dataclasses.replace(third_scenarios.PAPER_GRID, max_extensions=1)
TINY_GRID = tuning.Grid(lr_exp=(-7, -5), eta=(0.1,), shapes={"M": (4,)}, max_extensions=0)
_TINY = {"env": {"name": "point_mass"}, "cluster": {"n": 4}, "hparams": {"M": 4, "M_init": 4}}


def scenarios(tiny: bool) -> list[Scenario]:
    keys = ("sqrt_dim",) if tiny else tuple(_CLUSTERS)
    out = []
    for key in keys:
        overrides = merge(_TINY if tiny else _HUMANOID, _CLUSTERS[key])
        seeds = 2 if tiny else 5
        name = f"{'point_mass_tiny' if tiny else 'humanoid'}_{key}"
        paper = TINY_BUDGET if tiny else PAPER_BUDGET[key]
        only = ("rennala_nigt", "sync_nigt") if tiny else ()
        env = overrides["env"]["name"]
        out.append(Scenario(name, env, overrides, key, seeds, look=paper, only=only))
    return out


def device_figures(env: str, rate: float | None, compile_s: float | None) -> dict:
    """The rate (env steps/s) and compile time (s per program) the sizing assumes, and where
    each came from; ``per_algorithm``: the rate of an algorithm's own multi-seed training
    program where the benchmark measured one (the first H200 run: 3,000 alive steps/s for
    AFedPG's, 32,000 for Sync NIGT's, against 285,000 for the fastest bare rollout)."""
    source = "the command line"
    per_algorithm: dict[str, float] = {}
    bench = Path(os.environ.get("JAXNIGT_BENCH_JSON") or "")
    if rate is None and bench.name and bench.is_file():
        table = json.loads(bench.read_text()).get("results", {}).get("gpu", {})
        rows = [
            r for r in table.get("rows", []) if r.get("env") == env and r.get("alive_steps_per_s")
        ]
        if rows:
            rate = max(r["alive_steps_per_s"] for r in rows)
            slowest = max(r.get("compile_s", 0.0) + r.get("lower_s", 0.0) for r in rows)
            compile_s = compile_s if compile_s is not None else 2.0 * slowest
            source = f"{bench} (fastest rollout; twice the slowest compile)"
            for r in rows:
                if r.get("rounds_per_s") and (r.get("seeds") or 1) > 1:
                    a = r["algorithm"]
                    per_algorithm[a] = max(per_algorithm.get(a, 0.0), r["alive_steps_per_s"])
            if per_algorithm:
                source += "; each algorithm's multi-seed program where measured"
    if rate is None:
        figure = plan.figures().get(env, {})
        rate = figure.get("steps_per_s")
        source = figure.get("source", "")
    if rate is None:
        rate, source = DEFAULT_RATE.get(env, DEFAULT_RATE["humanoid"]), "this script's default"
    if compile_s is None:
        compile_s = DEFAULT_COMPILE_S.get(env, DEFAULT_COMPILE_S["humanoid"])
    return {
        "steps_per_s": float(rate),
        "compile_s": float(compile_s),
        "source": source,
        "per_algorithm": per_algorithm,
    }


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
    raw = third.timed(third.scenario_raw(pipe.sc), pipe.sc.look, pipe.sc.look / 100)
    cfg = config_lib.from_dict(raw)
    rows = {a: plan.plan_algorithm(cfg, a, memory=False) for a in pipe.sc.algorithms}
    per_time = {a: r["env_steps_per_run"] / cfg.budget for a, r in rows.items()}
    progs = programs(pipe)
    steps_per_time = sum(per_time[a] * runs for a, runs in progs)
    rates = figures.get("per_algorithm") or {}
    # seconds of device time per unit of simulated time, each program at its algorithm's rate
    seconds_per_time = sum(
        per_time[a] * runs / rates.get(a, figures["steps_per_s"]) for a, runs in progs
    )
    free = seconds - len(progs) * figures["compile_s"]
    budget = min(pipe.sc.look, free / seconds_per_time)
    round_time = rows.get("rennala_nigt", next(iter(rows.values())))["step_time"]
    return {
        "paper_budget": pipe.sc.look,
        "budget": float(sizing.round_down(budget)) if budget > 0 else 0.0,
        "programs": len(progs),
        "env_steps_per_time": steps_per_time,
        "device_seconds_per_time": seconds_per_time,
        "rennala_round_time": round_time,
        "enough": budget >= MIN_ROUNDS * round_time,
    }


def run(out: Path, seconds: float, *, tiny: bool = False, rate=None, compile_s=None) -> dict:
    """Every scenario in order within ``seconds``; ``OUT/manifest.json`` after every step."""
    start = time.monotonic()
    docs = out / "docs"
    manifest = {
        "seconds": seconds,
        "tiny": tiny,
        "scenarios": {},
        "shrunk": [
            "no first look: the budget is sized from the time (module docstring)",
            f"at most {GRID.max_extensions} grid extension per algorithm (CPU editions: "
            f"{tuning.MAX_EXTENSIONS})",
        ],
    }

    def save():
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")

    out.mkdir(parents=True, exist_ok=True)
    todo = scenarios(tiny)
    for i, sc in enumerate(todo):
        pipe = third.Pipeline(sc, out / "runs", docs, grid=TINY_GRID if tiny else GRID)
        if tiny:
            pipe.seeds = third_scenarios.TUNE_SEEDS[:1]
        left = seconds - (time.monotonic() - start) - 30  # analysis and packing
        figures = device_figures(sc.env, rate, compile_s)
        fit = size(pipe, left / (len(todo) - i), figures)
        entry = manifest["scenarios"][sc.name] = {"claim": sc.claim, "device": figures, **fit}
        if not fit["enough"]:
            entry["skipped"] = f"budget {fit['budget']:g} < {MIN_ROUNDS} Rennala rounds"
            print(f"[gpu-results] {sc.name}: skipped ({entry['skipped']})", flush=True)
            save()
            continue
        budget = fit["budget"]
        pipe.size(
            budget, sizing.round_down(budget / sizing.MIN_EVALS), f"sized from the time: {fit}"
        )
        print(f"[gpu-results] {sc.name}: budget {budget:g} (paper {sc.look:g})", flush=True)
        t0 = time.monotonic()
        for stage in ("tune", "run", "analyze"):
            getattr(pipe, stage)()
            entry[f"{stage}_s"] = round(time.monotonic() - t0, 1)
            save()
    third.gap_growth(out / "runs", docs, "point_mass_tiny" if tiny else "humanoid")
    manifest["wall_s"] = round(time.monotonic() - start, 1)
    save()
    print(f"[gpu-results] done in {manifest['wall_s']:.0f}s: {out / 'manifest.json'}")
    return manifest
