"""Experiment runner: a whole scenario (algorithms × seeds × optional grid) → a run directory.

For each algorithm the seeds (and grid points) run as ONE vmapped, jitted program: ``init``
then chunks of ``eval.every`` steps as a ``lax.scan``; between chunks the deploy params are
evaluated, a progress bar advances, and the stop criteria (simulated-time budget, round cap,
non-finite values, Malenia capacity overflow) are checked. The run directory holds:

* ``config.yaml`` — the resolved config;
* ``metrics.csv`` — one row per algorithm, grid point, seed and round (rewritten atomically
  after every algorithm, so a crash loses at most the algorithm in progress);
* ``summary.json`` — per algorithm (and grid point): final and best median evaluation
  return, and simulated time to reach ``target_return`` if the config names one;
* ``curves.png`` — return against simulated time, median and 20/80% band across seeds.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import config as config_lib
from jaxnigt import parallel
from jaxnigt.config import ExperimentConfig
from jaxnigt.distributed import is_writer, to_host
from jaxnigt.trainer import Trainer, make_trainer

# Columns written for every row; per-type evaluation columns are appended when V > 1.
BASE_COLUMNS = (
    "algorithm",
    "grid",
    "learning_rate",
    "eta",
    "seed",
    "round",
    "sim_time",
    "env_steps",
    "env_steps_wasted",
    "comms",
    "grads",
    "round_time",
    "train_return",
    "eval_return",
    "counts_min",
    "counts_mean",
    "counts_max",
    "staleness_min",
    "staleness_mean",
    "staleness_max",
    "link_util",
)


class RunError(RuntimeError):
    """A run stopped for a reason the user must see (divergence, capacity overflow, ...)."""


def atomic_write_text(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` via a temporary file and ``os.replace`` (never half-written)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
        # mkstemp creates 0600; give the result the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def grid_points(config: ExperimentConfig, algorithm: str) -> list[dict[str, float]]:
    """The (learning_rate, eta) points of the config's grid (one point without a grid)."""
    hp = config.hparams_for(algorithm)
    lrs = config.grid.learning_rate or (hp.learning_rate,)
    etas = config.grid.eta or (hp.eta,)
    return [{"learning_rate": a, "eta": e} for a, e in itertools.product(lrs, etas)]


def seed_keys(config: ExperimentConfig, num_seeds: int) -> jax.Array:
    """Seed s uses ``fold_in(key(config.seed), s)``: the same seed gives the same run."""
    base = jax.random.key(config.seed)
    return jax.vmap(lambda s: jax.random.fold_in(base, s))(jnp.arange(num_seeds))


def _eval_keys(keys: jax.Array, round_index: int) -> jax.Array:
    # Evaluation randomness is separate from training randomness (fold_in a large tag).
    return jax.vmap(lambda k: jax.random.fold_in(jax.random.fold_in(k, 1 << 30), round_index))(keys)


class _Progress:
    """tqdm bar over simulated time (or rounds), disabled when not wanted."""

    def __init__(self, enabled: bool, total: float, desc: str):
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=round(total, 2), desc=desc, unit="t", leave=True, dynamic_ncols=True
            )

    def update(self, value: float, **postfix: Any) -> None:
        if self.bar is not None:
            self.bar.n = round(min(value, self.bar.total), 2)
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def device_plan(config: ExperimentConfig, batch: int):
    """``(mesh, slot_mesh)``: shard the batch axis if it divides the devices, else the slots.

    Returns ``(None, None)`` on a single device.
    """
    mesh = parallel.make_mesh(config.devices)
    if mesh.size == 1:
        return None, None
    if parallel.batch_sharding(mesh, batch) is not None:
        return mesh, None
    return None, mesh


def run_algorithm(
    config: ExperimentConfig,
    algorithm: str,
    *,
    num_seeds: int | None = None,
    progress: bool = True,
    trainer: Trainer | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, np.ndarray]:
    """Runs one algorithm for all seeds and grid points; returns stacked metrics.

    With ``run_dir``, a checkpoint is written every ``config.checkpoint_every`` chunks (and
    kept when the run stops on non-finite values); ``resume=True`` continues from the newest
    checkpoint there, giving the same metrics as an uninterrupted run.

    Returns:
      A dict of numpy arrays with shape ``[B, R]`` (B = grid points × seeds, R = rounds
      including round 0) plus ``eval_return`` (NaN where not evaluated), ``eval_type{v}``
      for heterogeneous tasks, and ``[B]`` arrays ``grid``, ``seed``, ``learning_rate``,
      ``eta``, ``diverged``.
    """
    from jaxnigt import checkpoint

    num_seeds = num_seeds or config.seeds
    points = grid_points(config, algorithm)
    mesh, slot_mesh = device_plan(config, num_seeds * len(points))
    tr = trainer or make_trainer(config, algorithm, mesh=slot_mesh)
    keys1 = seed_keys(config, num_seeds)
    keys = jnp.concatenate([keys1] * len(points))
    batch = len(keys)
    hyper = {
        k: jnp.asarray([p[k] for p in points for _ in range(num_seeds)], jnp.float32)
        for k in ("learning_rate", "eta")
    }
    hyper["gamma"] = jnp.full((batch,), tr.hparams.gamma, jnp.float32)
    every = config.eval.every
    budget = config.budget if config.budget is not None else math.inf
    max_rounds = config.max_rounds if config.max_rounds is not None else math.inf
    checkpoint_every = config.checkpoint_every
    mark_diverged = config.on_nonfinite == "mark"
    num_types = tr.setup.task.num_types
    init = jax.jit(jax.vmap(tr.init))
    # Per-seed budgets: a diverged seed (on_nonfinite: mark) gets -inf and stops stepping.
    program = jax.jit(
        jax.vmap(
            lambda s, k, train, b: tr.chunk_and_evaluate(
                s, k, train, every, budget=b, max_rounds=max_rounds
            ),
            in_axes=(0, 0, None, 0),
        )
    )
    keys, hyper = parallel.shard_batch((keys, hyper), mesh, batch)
    budgets = np.full(batch, budget, np.float32)
    diverged = np.zeros(batch, bool)

    history: list[dict[str, np.ndarray]] = []
    evals: list[tuple[np.ndarray, np.ndarray]] = []  # ([B] column of each seed's eval, [B, E])
    bar = _Progress(progress, budget if math.isfinite(budget) else max_rounds, algorithm)
    t_start = time.perf_counter()
    try:
        state = init(keys, hyper)
        found = checkpoint.latest(run_dir, algorithm) if (resume and run_dir) else None
        if found is not None:
            state, restored, evals, chunks = checkpoint.restore(found, state)
            state = parallel.shard_batch(state, mesh, batch)
            history.append(restored)
            diverged = np.asarray(restored.pop("diverged_flag", np.zeros((batch, 1))))[:, 0] > 0
            budgets[diverged] = -np.inf
            log(f"[jaxnigt] {algorithm}: resumed from {found}")
        else:
            chunks = 0
            # Evaluation of x_0 at time 0 (the training part of the program is skipped).
            state, _, returns = program(state, _eval_keys(keys, 0), False, budgets)
            history.append(_initial_metrics(state))
            evals.append((np.zeros(batch, np.int64), to_host(returns)))
            if tr.first_step is not None:  # round 0 with M_init != M: its own compiled shape
                state, m0 = jax.jit(jax.vmap(tr.first_step))(state)
                m0 = {**m0, "active": np.ones(batch, bool)}
                history.append(jax.tree.map(lambda x: x[:, None], to_host(m0)))
        columns = sum(h["sim_time"].shape[1] for h in history)
        while True:
            bad = _check_health(history[-1], algorithm, points, num_seeds, raise_=not mark_diverged)
            if bad.any():
                newly = bad & ~diverged
                for b in np.nonzero(newly)[0]:
                    seed = b % num_seeds
                    log(f"[jaxnigt] {algorithm}: seed {seed} diverged (marked, others go on)")
                diverged |= bad
                budgets[diverged] = -np.inf
            running = ~diverged
            if not running.any():
                break
            clock_time, clock_round = to_host((state.clock.time, state.round))
            times = clock_time[running]
            sim_time = float(np.min(times))
            rounds_done = int(np.min(clock_round[running]))
            done_value = sim_time if math.isfinite(budget) else rounds_done
            last_return = _last_active(history[-1], "train_return")
            median = float(np.nanmedian(last_return)) if rounds_done else math.nan
            bar.update(done_value, round=rounds_done, median_return=f"{median:.2f}")
            if sim_time >= budget or rounds_done >= max_rounds:
                break
            if (
                run_dir is not None
                and checkpoint_every
                and chunks
                and chunks % checkpoint_every == 0
            ):
                checkpoint.save(run_dir, algorithm, state, _stack(history, diverged), evals, chunks)
            chunks += 1
            state, ms, returns = program(state, _eval_keys(keys, chunks), True, budgets)
            ms = to_host(ms)
            history.append(ms)
            # Each seed's evaluation belongs to its last active round of the chunk.
            active = ms["active"]
            last = np.where(
                active.any(axis=1), active.shape[1] - 1 - np.argmax(active[:, ::-1], axis=1), -1
            )
            evals.append((np.where(last >= 0, columns + last, -1), to_host(returns)))
            columns += active.shape[1]
    finally:
        bar.close()
    wall = time.perf_counter() - t_start

    out = _stack(history)
    num_rounds = out["sim_time"].shape[1]
    ev = np.full((len(keys), num_rounds), np.nan, np.float32)
    ev_types = np.full((num_types, len(keys), num_rounds), np.nan, np.float32)
    for column, returns in evals:
        b = np.nonzero(column >= 0)[0]
        ev[b, column[b]] = returns[b].mean(axis=1)
        for v in range(num_types if num_types > 1 else 0):
            ev_types[v, b, column[b]] = returns[b, v::num_types].mean(axis=1)
    out["eval_return"] = ev
    if num_types > 1:
        for v in range(num_types):
            out[f"eval_type{v}"] = ev_types[v]
    out["grid"] = np.repeat(np.arange(len(points)), num_seeds)
    out["seed"] = np.tile(np.arange(num_seeds), len(points))
    out["learning_rate"] = to_host(hyper["learning_rate"])
    out["eta"] = to_host(hyper["eta"])
    out["wall_seconds"] = np.asarray(wall)
    out["diverged"] = diverged
    return out


def _stack(history: list[dict[str, np.ndarray]], diverged: np.ndarray | None = None):
    """Concatenates chunk metrics along the round axis (optionally with the divergence flags)."""
    out = {k: np.concatenate([h[k] for h in history], axis=1) for k in history[0]}
    if diverged is not None:
        out["diverged_flag"] = diverged.astype(np.float32)[:, None]
    return out


def _initial_metrics(state) -> dict[str, np.ndarray]:
    """The row of round 0 before any update: clock at zero, no training statistics."""
    batch = state.round.shape[0]
    nan = np.full((batch, 1), np.nan, np.float32)
    zero = np.zeros((batch, 1), np.float32)
    row = {c: nan for c in BASE_COLUMNS[6:] if c != "eval_return"}
    row.update(
        round=np.zeros((batch, 1), np.int32),
        sim_time=zero,
        env_steps=zero,
        env_steps_wasted=zero,
        comms=zero,
        grads=zero,
        overflow=np.zeros((batch, 1), bool),
        nonfinite=np.zeros((batch, 1), bool),
        active=np.ones((batch, 1), bool),
    )
    return row


def _last_active(metrics: dict[str, np.ndarray], key: str) -> np.ndarray:
    """Per seed, ``metrics[key]`` at its last active column (NaN if none)."""
    active = metrics.get("active", np.ones_like(metrics["sim_time"], bool))
    vals = np.where(active, metrics[key], np.nan)
    out = np.full(vals.shape[0], np.nan)
    for b in range(vals.shape[0]):
        ok = np.nonzero(~np.isnan(vals[b]))[0]
        if ok.size:
            out[b] = vals[b, ok[-1]]
    return out


def _check_health(last, algorithm, points, num_seeds, raise_: bool = True) -> np.ndarray:
    """Per batch element, whether a step of ``last`` saw non-finite values or an overflow.

    Raises :class:`RunError` naming algorithm, seed and round when ``raise_``; a capacity
    overflow always raises (it would silently drop trajectories).
    """
    found = np.zeros(np.asarray(last["sim_time"]).shape[0], bool)
    for flag, what in (
        ("overflow", "Malenia capacity overflow (raise hparams.malenia_capacity)"),
        ("nonfinite", "non-finite parameters, gradients or returns"),
    ):
        flags = np.asarray(last[flag]) & np.asarray(last.get("active", True))
        bad = flags.any(axis=1)
        if bad.any() and (raise_ or flag == "overflow"):
            b = int(np.argmax(bad))
            rnd = int(last["round"][b][np.argmax(flags[b])])
            p = points[b // num_seeds]
            raise RunError(
                f"{algorithm}: {what} at round {rnd}, seed {b % num_seeds} "
                f"(learning_rate={p['learning_rate']}, eta={p['eta']})"
            )
        found |= bad
    return found


def metric_rows(algorithm: str, m: dict[str, np.ndarray]) -> list[dict]:
    """Flattens :func:`run_algorithm` output into CSV rows (inactive rounds, i.e. no-op
    steps after a seed crossed the budget, are dropped)."""
    rows = []
    extra = sorted(k for k in m if k.startswith("eval_type"))
    B, R = m["sim_time"].shape
    for b in range(B):
        for r in range(R):
            if not m["active"][b, r]:
                continue
            row = {
                "algorithm": algorithm,
                "grid": int(m["grid"][b]),
                "learning_rate": float(m["learning_rate"][b]),
                "eta": float(m["eta"][b]),
                "seed": int(m["seed"][b]),
            }
            for c in BASE_COLUMNS[5:]:
                row[c] = _scalar(m[c][b, r])
            for c in extra:
                row[c] = _scalar(m[c][b, r])
            rows.append(row)
    return rows


def _scalar(x):
    x = np.asarray(x).item()
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.6g}"
    return x


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    cols = list(BASE_COLUMNS)
    for row in rows:
        for k in row:
            if k not in cols:
                cols.append(k)
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, restval="")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def summarize(rows: Sequence[dict], target: float | None) -> dict[str, Any]:
    """Per algorithm and grid point: final/best median eval return, time to target."""
    from jaxnigt.plotting import group_curves

    summary: dict[str, Any] = {}
    for (algorithm, grid), seeds in group_curves(rows, x="sim_time", y="eval_return").items():
        finals = [ys[-1] for _, ys in seeds.values() if len(ys)]
        medians_over_time = _median_curve(seeds)
        entry = {
            "seeds": len(seeds),
            "final_median_return": float(np.median(finals)) if finals else None,
            "best_median_return": (
                float(np.max(medians_over_time[1])) if medians_over_time[1].size else None
            ),
        }
        entry["learning_rate"] = next(
            (
                float(r["learning_rate"])
                for r in rows
                if r["algorithm"] == algorithm and int(r["grid"]) == grid
            ),
            None,
        )
        entry["eta"] = next(
            (
                float(r["eta"])
                for r in rows
                if r["algorithm"] == algorithm and int(r["grid"]) == grid
            ),
            None,
        )
        if target is not None:
            xs, med = medians_over_time
            hit = np.nonzero(med >= target)[0]
            entry["target_return"] = target
            entry["time_to_target"] = float(xs[hit[0]]) if hit.size else None
        summary[algorithm if grid == 0 else f"{algorithm}[grid={grid}]"] = entry
    return summary


def _median_curve(seeds: dict[int, tuple[np.ndarray, np.ndarray]]):
    from jaxnigt.plotting import resample

    xs = np.unique(np.concatenate([x for x, _ in seeds.values()]))
    ys = np.stack([resample(x, y, xs) for x, y in seeds.values()])
    return xs, np.nanmedian(ys, axis=0)


def prepare_run_dir(out: Path, overwrite: bool) -> None:
    """Creates ``out``; refuses an existing non-empty directory unless ``overwrite``."""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"--out {str(out)!r} exists and is not empty; pass --overwrite")
    out.mkdir(parents=True, exist_ok=True)


def check_resumable(config: ExperimentConfig, run_dir: str | Path) -> None:
    """Raises ConfigError unless ``run_dir`` holds a run of exactly this config."""
    run_dir = Path(run_dir)
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise config_lib.ConfigError(
            f"--resume: {str(run_dir)!r} is not a run directory (no config.yaml)"
        )
    previous = config_lib.from_dict(config_lib.read_yaml(path))
    if previous != config:
        old, new = previous.to_dict(), config.to_dict()
        differs = sorted(k for k in new if old.get(k) != new.get(k))
        raise config_lib.ConfigError(
            f"--resume: {str(run_dir)!r} was written by a different config "
            f"(differs in: {', '.join(differs)})"
        )


def run_experiment(
    config: ExperimentConfig,
    out: str | Path,
    *,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    plot: bool = True,
) -> dict[str, Any]:
    """Runs every algorithm of ``config`` and writes the run directory; returns the summary.

    With ``resume=True`` (``out`` must hold a run of the same config), algorithms already
    finished keep their rows in ``metrics.csv`` and the one in progress continues from its
    newest checkpoint.
    """
    from jaxnigt import checkpoint
    from jaxnigt.plotting import read_metrics_raw

    out = Path(out)
    if resume:
        check_resumable(config, out)
        done = checkpoint.done_algorithms(out)
        rows = [r for r in read_metrics_raw(out) if r["algorithm"] in done]
    else:
        if is_writer():
            prepare_run_dir(out, overwrite)
            atomic_write_text(out / "config.yaml", config_lib.dump(config))
        done, rows = [], []
    timings = {}
    for algorithm in config.algorithms:
        if algorithm in done:
            log(f"[jaxnigt] {algorithm}: finished in an earlier run; kept")
            continue
        _, slot_mesh = device_plan(config, config.seeds * len(grid_points(config, algorithm)))
        tr = make_trainer(config, algorithm, mesh=slot_mesh)
        log(
            f"[jaxnigt] {algorithm}: env={config.env.name} n={config.cluster.n} "
            f"d={tr.dim} seeds={config.seeds} grid={len(grid_points(config, algorithm))}"
        )
        m = run_algorithm(
            config, algorithm, progress=progress, trainer=tr, run_dir=out, resume=resume, log=log
        )
        rows.extend(metric_rows(algorithm, m))
        timings[algorithm] = float(m["wall_seconds"])
        if is_writer():  # only process 0 writes; the others hold the same gathered rows
            write_csv(out / "metrics.csv", rows)
            checkpoint.mark_done(out, algorithm)
        if m["diverged"].any():
            log(f"[jaxnigt] {algorithm}: diverged seeds {np.nonzero(m['diverged'])[0].tolist()}")
    summary = summarize(rows, config.target_return)
    for name, wall in timings.items():
        if name in summary:
            summary[name]["wall_seconds"] = round(wall, 2)
    if not is_writer():
        return summary
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    if plot:
        from jaxnigt.plotting import plot_runs

        plot_runs([out], x="time", out=out / "curves.png", budget=config.budget)
    return summary
