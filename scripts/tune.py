"""Hyperparameter tuning on the SPEC §8 grid, and time-to-target tables of run directories.

Tuning (default mode)::

  python scripts/tune.py CONFIG --algorithms rennala_nigt sync_nigt afedpg \
      --budget 4000 --seeds 3 --out runs/tune_reacher --write configs/cpu/tuned.yaml \
      [--lr-exp -10 -8 -6] [--eta 0.01 0.1] [--M 20] [--set key=value ...]

For every algorithm and every M (M_init = M) one run directory ``OUT/<algorithm>_M<M>`` is
written by ONE vmapped program over the (learning rate × η) grid and the seeds (the config's
``grid:`` section). Defaults are the full paper grid: α ∈ {2^-10, …, 2^-1},
η ∈ {0.001, 0.01, 0.1}, M ∈ {20, 30, 50}; restrict it with the flags for time.

Selection rule, per algorithm: for each (α, η, M) take each seed's last evaluation return
(the evaluation at or just past the budget), then the median over seeds ("final median
return"); grid points where a seed stopped early (diverged) are excluded. The largest final
median wins; ties (equal within 1e-6) go to the smaller α, then the larger η, then the
smaller M. The winners are written into a copy of CONFIG (``per_algorithm`` section, keys
``learning_rate``, ``eta``, ``M``, ``M_init``; other per-algorithm keys are kept) and a
table of every grid point goes to ``OUT/tuning.json``.

Time to target (``ttt`` mode)::

  python scripts/tune.py ttt RUN_DIR [--fraction 0.5 0.8] [--reference rennala_nigt] [--json F]

Per algorithm of a run directory: the median curve across seeds of ``eval_return`` against
simulated time (each seed's evaluations as a step function, as in the plots), its first
point at or above the target, and the ratio to the reference algorithm. Returns are negative
on reacher, so the target is a fraction of the *improvement*:
``target = R0 + fraction · (R_best − R0)``, with R0 the median over all seeds and algorithms
of the evaluation at time 0 (the common initial policy) and R_best the best final median
return over the algorithms. Heterogeneous runs also report the final median per type.
"2nd-half mean" is the median over seeds of each seed's mean evaluation return over the
second half of the run (less noisy than the last evaluation).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path

import numpy as np
import yaml

from jaxnigt.results import median_curve, read_metrics

PAPER_LR_EXP = list(range(-10, 0))
PAPER_ETA = [0.001, 0.01, 0.1]
PAPER_M = [20, 30, 50]
TIE_TOL = 1e-6


# ----------------------------------------------------------------------------- analysis


def seed_curves(rows, algorithm, y="eval_return", grid=None):
    """``{(grid, seed): (times, values)}`` of one algorithm's evaluations (NaN cells skipped)."""
    out: dict[tuple[int, int], tuple[list, list]] = {}
    for r in rows:
        if r["algorithm"] != algorithm or (grid is not None and int(r["grid"]) != grid):
            continue
        v = r.get(y, float("nan"))
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        xs, ys = out.setdefault((int(r["grid"]), int(r["seed"])), ([], []))
        xs.append(float(r["sim_time"]))
        ys.append(float(v))
    return {k: (np.asarray(a), np.asarray(b)) for k, (a, b) in out.items()}


def last_times(rows, algorithm):
    """``{(grid, seed): last simulated time}`` over all rows of one algorithm."""
    out: dict[tuple[int, int], float] = {}
    for r in rows:
        if r["algorithm"] == algorithm:
            k = (int(r["grid"]), int(r["seed"]))
            out[k] = max(out.get(k, -math.inf), float(r["sim_time"]))
    return out


def final_median(curves):
    """Median over seeds of each seed's last evaluation."""
    return float(np.median([y[np.argmax(x)] for x, y in curves.values()]))


def work_counts(rows, algorithm):
    """Medians over seeds at the end of the run: parameter updates and environment steps.

    Updates are rounds for the round-based methods and arrivals (= vector exchanges) for
    the asynchronous ones (``afedpg``, ``asgd``), which update the server on every arrival.
    """
    last: dict[int, dict] = {}
    for r in rows:
        if r["algorithm"] == algorithm and int(r["grid"]) == 0:
            s = int(r["seed"])
            if s not in last or r["round"] >= last[s]["round"]:
                last[s] = r
    per_arrival = algorithm in ("afedpg", "asgd")
    updates = [r["comms"] if per_arrival else r["round"] for r in last.values()]
    return {
        "median_updates": float(np.median(updates)),
        "median_env_steps": float(np.median([r["env_steps"] for r in last.values()])),
    }


def time_to_target(run_dir, fractions=(0.5,), reference="rennala_nigt"):
    """Time-to-target table of one run directory (see the module docstring)."""
    rows = read_metrics(run_dir)
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
    types = sorted(k for k in rows[0] if k.startswith("eval_type"))
    initial, table, curves_of = [], {}, {}
    for a in algorithms:
        curves = seed_curves(rows, a, grid=0)
        initial += [float(y[np.argmin(x)]) for x, y in curves.values() if x.min() == 0.0]
        xs, med = median_curve(curves)
        curves_of[a] = (xs, med)
        horizon = max(float(x.max()) for x, _ in curves.values())
        entry = {
            "seeds": len(curves),
            "final_median_return": final_median(curves),
            # less noisy than the last evaluation: each seed's mean over the second half
            "second_half_median_return": float(
                np.median([y[x >= horizon / 2].mean() for x, y in curves.values()])
            ),
            "best_median_return": float(np.nanmax(med)),
        }
        for t in types:
            entry[f"final_median_{t}"] = final_median(seed_curves(rows, a, y=t, grid=0))
        entry.update(work_counts(rows, a))
        table[a] = entry
    r0 = float(np.median(initial))
    best = max(e["final_median_return"] for e in table.values())
    targets = {f: r0 + f * (best - r0) for f in fractions}
    for a, e in table.items():
        xs, med = curves_of[a]
        e["time_to_target"] = {}
        for f, target in targets.items():
            hit = np.nonzero(med >= target)[0]
            e["time_to_target"][f] = float(xs[hit[0]]) if hit.size else None
    for e in table.values():
        e["ratio_to_reference"] = {}
        for f in fractions:
            t = e["time_to_target"][f]
            ref = table.get(reference, {}).get("time_to_target", {}).get(f)
            ok = t is not None and ref is not None and ref > 0
            e["ratio_to_reference"][f] = t / ref if ok else None
    return {
        "run_dir": str(run_dir),
        "initial_median_return": r0,
        "best_final_median_return": best,
        "targets": targets,
        "reference": reference,
        "algorithms": table,
    }


def markdown_table(result):
    """The time-to-target result as a Markdown table."""
    types = sorted(
        {k for e in result["algorithms"].values() for k in e if k.startswith("final_median_eval")}
    )
    head = ["algorithm", "seeds", "updates", "env steps", "final median return"]
    head += ["2nd-half mean"]
    head += [f"final {t.removeprefix('final_median_')}" for t in types]
    for f, target in result["targets"].items():
        head += [f"time to {target:.3g} ({f:g})", "ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a, e in result["algorithms"].items():
        cells = [f"`{a}`", str(e["seeds"]), f"{e['median_updates']:.0f}"]
        cells += [f"{e['median_env_steps']:.3g}", f"{e['final_median_return']:.2f}"]
        cells += [f"{e['second_half_median_return']:.2f}"]
        cells += [f"{e[t]:.2f}" for t in types]
        for f in result["targets"]:
            t, q = e["time_to_target"][f], e["ratio_to_reference"][f]
            cells += ["not reached" if t is None else f"{t:.0f}", "–" if q is None else f"{q:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- tuning


def tuning_config(raw, algorithm, M, lrs, etas, budget, seeds):
    """The raw config of one tuning program: one algorithm, one M, the (α × η) grid."""
    cfg = json.loads(json.dumps(raw))
    cfg["name"] = f"tune_{algorithm}_M{M}"
    cfg["algorithms"] = [algorithm]
    cfg["budget"] = float(budget)
    cfg["seeds"] = int(seeds)
    cfg["target_return"] = None
    cfg["on_nonfinite"] = "mark"  # a diverging grid point must not stop the others
    cfg["checkpoint_every"] = 0
    hp = dict(cfg.get("hparams") or {})
    hp.update(M=int(M), M_init=int(M))
    cfg["hparams"] = hp
    per = dict(cfg.get("per_algorithm") or {})
    own = {k: v for k, v in dict(per.get(algorithm) or {}).items() if k not in ("M", "M_init")}
    per = {algorithm: own} if own else {}
    cfg["per_algorithm"] = per
    cfg["grid"] = {"learning_rate": [float(x) for x in lrs], "eta": [float(x) for x in etas]}
    return cfg


def score_points(run_dir, algorithm, budget):
    """Per grid point of one tuning run: α, η, final median return, whether it diverged."""
    rows = read_metrics(run_dir)
    ends = last_times(rows, algorithm)
    curves = seed_curves(rows, algorithm)
    points = {}
    for (g, s), (x, y) in curves.items():
        points.setdefault(g, {})[s] = (x, y)
    out = []
    for g, seeds in sorted(points.items()):
        first = next(r for r in rows if r["algorithm"] == algorithm and int(r["grid"]) == g)
        stopped = [s for s in seeds if ends[(g, s)] < budget]
        out.append(
            {
                "grid": g,
                "learning_rate": float(first["learning_rate"]),
                "eta": float(first["eta"]),
                "final_median_return": final_median(seeds),
                "diverged_seeds": stopped,
            }
        )
    return out


def choose(points):
    """The winner of the selection rule (module docstring) among scored grid points."""
    ok = [p for p in points if not p["diverged_seeds"] and math.isfinite(p["final_median_return"])]
    if not ok:
        return None
    best = max(p["final_median_return"] for p in ok)
    tied = [p for p in ok if p["final_median_return"] >= best - TIE_TOL]
    return min(tied, key=lambda p: (p["learning_rate"], -p["eta"], p["M"]))


def same_run(run_dir, cfg):
    """Whether ``run_dir`` holds a finished run of exactly ``cfg`` (then it is reused)."""
    from jaxnigt import config as config_lib

    if not (run_dir / "summary.json").is_file():
        return False
    try:
        return config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml")) == cfg
    except config_lib.ConfigError:
        return False


def tune(args):
    from jaxnigt import config as config_lib
    from jaxnigt import runner

    raw = config_lib.apply_overrides(config_lib.read_yaml(args.config), args.set or [])
    config_lib.from_dict(raw)  # validate early
    algorithms = args.algorithms or list(raw.get("algorithms") or [])
    lrs = [2.0**e for e in args.lr_exp]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"config": str(args.config), "command": " ".join(map(shlex.quote, sys.argv))}
    report.update(budget=args.budget, seeds=args.seeds, lr_exp=args.lr_exp, eta=args.eta, M=args.M)
    report["points"], report["chosen"] = {}, {}
    for algorithm in algorithms:
        scored = []
        for M in args.M:
            run_dir = out / f"{algorithm}_M{M}"
            cfg = config_lib.from_dict(
                tuning_config(raw, algorithm, M, lrs, args.eta, args.budget, args.seeds)
            )
            if same_run(run_dir, cfg) and not args.overwrite:
                print(f"[tune] {run_dir}: finished earlier with this config; reused", flush=True)
            else:
                print(f"[tune] {algorithm} M={M}: {len(lrs) * len(args.eta)} points", flush=True)
                runner.run_experiment(
                    cfg, run_dir, overwrite=True, progress=False, plot=False, log=print
                )
            for p in score_points(run_dir, algorithm, args.budget):
                # metrics hold float32 values: report the requested grid values
                p["learning_rate"] = min(lrs, key=lambda v: abs(v - p["learning_rate"]))
                p["eta"] = min(args.eta, key=lambda v: abs(v - p["eta"]))
                scored.append({**p, "M": M})
        report["points"][algorithm] = scored
        best = choose(scored)
        report["chosen"][algorithm] = best
        for p in scored:
            mark = " <- chosen" if p is best else ""
            print(
                f"[tune] {algorithm:13s} M={p['M']:3d} lr=2^{math.log2(p['learning_rate']):+.0f} "
                f"eta={p['eta']:<6g} final median={p['final_median_return']:9.3f}"
                f"{' diverged ' + str(p['diverged_seeds']) if p['diverged_seeds'] else ''}{mark}",
                flush=True,
            )
    (out / "tuning.json").write_text(json.dumps(report, indent=2) + "\n")
    if args.write:
        written = json.loads(json.dumps(raw))
        written.pop("grid", None)
        per = dict(written.get("per_algorithm") or {})
        for algorithm, best in report["chosen"].items():
            if best is None:
                continue
            own = dict(per.get(algorithm) or {})
            own.update(
                learning_rate=best["learning_rate"], eta=best["eta"], M=best["M"], M_init=best["M"]
            )
            per[algorithm] = own
        written["per_algorithm"] = per
        config_lib.from_dict(written)
        header = (
            f"# Tuned by: {report['command']}\n"
            f"# Grid: lr = 2^{args.lr_exp}, eta = {args.eta}, M = M_init = {args.M}; "
            f"budget {args.budget}, {args.seeds} seeds.\n"
            "# Rule: best median over seeds of the last evaluation; ties -> smaller lr.\n"
        )
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(header + yaml.safe_dump(written, sort_keys=False))
        print(f"[tune] wrote {args.write}")
    return 0


def ttt(argv):
    p = argparse.ArgumentParser(prog="tune.py ttt", description="time-to-target table")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--fraction", type=float, nargs="+", default=[0.5, 0.8])
    p.add_argument("--reference", default="rennala_nigt")
    p.add_argument("--json", help="also write the results (a list) to this file")
    args = p.parse_args(argv)
    results = []
    for d in args.run_dirs:
        r = time_to_target(d, args.fraction, args.reference)
        results.append(r)
        print(
            f"\n{d}: R0 = {r['initial_median_return']:.2f}, best final median R_best = "
            f"{r['best_final_median_return']:.2f}; target = R0 + fraction (R_best - R0)\n"
        )
        print(markdown_table(r))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "ttt":
        return ttt(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("--algorithms", nargs="+", help="default: the config's list")
    p.add_argument("--budget", type=float, required=True, help="simulated-time budget")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", required=True, help="directory for the tuning runs")
    p.add_argument("--write", help="write the tuned copy of CONFIG here")
    p.add_argument("--lr-exp", type=int, nargs="+", default=PAPER_LR_EXP, help="α = 2^e")
    p.add_argument("--eta", type=float, nargs="+", default=PAPER_ETA)
    p.add_argument("--M", type=int, nargs="+", default=PAPER_M, help="M = M_init values")
    p.add_argument("--set", action="append", help="config override key=value (repeatable)")
    p.add_argument("--overwrite", action="store_true", help="rerun finished tuning programs")
    return tune(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
