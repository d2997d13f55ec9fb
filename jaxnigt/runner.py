"""Experiment runner: a whole scenario (algorithms × seeds × optional grid) → a run directory.

For each algorithm the seeds (and grid points) run as ONE vmapped, jitted program: ``init``
then chunks of ``eval.every`` steps (or of about ``eval.every_time`` simulated time) as a
``lax.scan``, each followed by an evaluation of the deploy params.  The loop is three pieces:
:func:`start_or_resume` (time 0 and its evaluation, or the newest checkpoint), :func:`advance`
(one chunk, its evaluation and the health checks) and :func:`evaluation_columns` (which step
of each seed an evaluation belongs to).  The run
directory holds ``config.yaml``, ``metrics.csv`` (:mod:`jaxnigt.results`), ``summary.json``
and ``curves.png``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import checkpoint, parallel, results
from jaxnigt import config as config_lib
from jaxnigt.algorithms.core import HEALTH_FLAGS, LOGGED
from jaxnigt.config import ExperimentConfig
from jaxnigt.distributed import is_writer, to_host
from jaxnigt.files import (
    RunDirError,
    atomic_write_text,
    check_resumable,
    describe,
    prepare_run_dir,
    run_lock,
)
from jaxnigt.trainer import Trainer, make_trainer

__all__ = [
    "RunError",
    "check_resumable",
    "grid_points",
    "prepare_run_dir",
    "run_algorithm",
    "run_experiment",
    "seed_keys",
]


class RunError(RuntimeError):
    """A run stopped for a reason the user must see (divergence, capacity overflow, ...)."""


class Interrupted(RuntimeError):
    """The run stopped on a signal after a checkpoint and the partial results were written."""

    def __init__(self, signum: int, algorithm: str, chunks: int):
        name = signal.Signals(signum).name
        super().__init__(f"{name} received: {algorithm} stopped after chunk {chunks}")
        self.signum, self.algorithm, self.chunks = signum, algorithm, chunks
        self.partial: dict[str, np.ndarray] = {}  # the algorithm's results so far

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class StopFlag:
    """Set by the first SIGTERM/SIGINT (see :func:`stop_on_signals`); the run loop checks it
    after every chunk."""

    def __init__(self):
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None


@contextlib.contextmanager
def stop_on_signals(signals=(signal.SIGTERM, signal.SIGINT)):
    """Yields a :class:`StopFlag`: the first signal asks the run to finish its chunk, write a
    checkpoint and the partial results and stop; a second one exits at once (files already
    written stay whole: every write is atomic)."""
    flag = StopFlag()

    def handler(signum, frame):
        del frame
        if flag.requested:
            os._exit(128 + signum)
        flag.signum = signum
        print(
            f"[jaxnigt] {signal.Signals(signum).name}: finishing the current chunk, then "
            "checkpoint and stop (again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    old = {s: signal.signal(s, handler) for s in signals}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# Tracing, lowering and XLA compilation: what "compile seconds" counts.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


@contextlib.contextmanager
def _compile_seconds(run: _Run):
    """Adds the time JAX spends tracing, lowering and compiling inside the block to
    ``run.compile_seconds`` (from JAX's own monitoring events)."""

    def listener(event: str, seconds: float, **kwargs) -> None:
        del kwargs
        if event in COMPILE_EVENTS:
            run.compile_seconds += seconds

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def _wait(tree: Any) -> Any:
    """Waits for a dispatched computation while staying responsive to signals (a blocking
    transfer would hold the main thread, and with it every signal handler, for a whole
    chunk)."""
    leaves = [x for x in jax.tree.leaves(tree) if hasattr(x, "is_ready")]
    while not all(x.is_ready() for x in leaves):
        time.sleep(0.02)
    return tree


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


def _eval_keys(keys: jax.Array, chunk: int) -> jax.Array:
    # Evaluation randomness is separate from training randomness (fold_in a large tag).
    return jax.vmap(lambda k: jax.random.fold_in(jax.random.fold_in(k, 1 << 30), chunk))(keys)


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


@dataclasses.dataclass
class _Run:
    """One algorithm's run on the host: what is fixed, and the progress so far."""

    trainer: Trainer
    points: list[dict[str, float]]
    num_seeds: int
    keys: jax.Array
    hyper: dict[str, jax.Array]
    mesh: Any
    program: Callable
    budget: float
    max_rounds: float
    budgets: np.ndarray  # [B] per-seed budgets (-inf freezes a diverged seed)
    diverged: np.ndarray  # [B] bool
    every: int = 1  # steps per chunk
    history: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list)
    chunks: int = 0
    state: Any = None
    compile_seconds: float = 0.0

    @property
    def batch(self) -> int:
        return len(self.budgets)

    def stacked(self, with_flags: bool = False) -> dict[str, np.ndarray]:
        """The history concatenated along the step axis (optionally with the divergence flags)."""
        out = {k: np.concatenate([h[k] for h in self.history], axis=1) for k in self.history[0]}
        if with_flags:
            out["diverged_flag"] = self.diverged.astype(np.float32)[:, None]
        return out


def _prepare(config: ExperimentConfig, algorithm: str, trainer: Trainer | None, num_seeds: int):
    """The vmapped program and inputs of one algorithm's run."""
    points = grid_points(config, algorithm)
    batch = num_seeds * len(points)
    mesh, slot_mesh = parallel.device_plan(config.devices, batch)
    tr = trainer or make_trainer(config, algorithm, mesh=slot_mesh)
    keys = jnp.concatenate([seed_keys(config, num_seeds)] * len(points))
    hyper = tr.hyper(
        batch=batch,
        **{k: np.asarray([p[k] for p in points for _ in range(num_seeds)]) for k in points[0]},
    )
    budget = config.budget if config.budget is not None else math.inf
    max_rounds = config.max_rounds if config.max_rounds is not None else math.inf
    every = tr.eval_every(config.eval.every, config.eval.every_time)
    program = jax.jit(
        jax.vmap(
            lambda s, k, train, b: tr.chunk_and_evaluate(
                s, k, train, every, budget=b, max_rounds=max_rounds
            ),
            in_axes=(0, 0, None, 0),
        )
    )
    keys, hyper = parallel.shard_batch((keys, hyper), mesh, batch)
    return _Run(
        trainer=tr,
        points=points,
        num_seeds=num_seeds,
        keys=keys,
        hyper=hyper,
        mesh=mesh,
        program=program,
        budget=budget,
        max_rounds=max_rounds,
        budgets=np.full(batch, budget, np.float32),
        diverged=np.zeros(batch, bool),
        every=every,
    )


def evaluation_columns(
    active: np.ndarray, returns: np.ndarray, worker_types: np.ndarray, num_types: int
) -> dict[str, np.ndarray]:
    """``evaluated``, ``eval_return`` (and ``eval_type{v}``) ``[B, L]`` of one chunk's steps.

    Each seed's evaluation belongs to its last active step of the chunk (NaN elsewhere); a
    seed with no active step was not evaluated.  Episode e of ``returns`` ``[B, E]`` ran in
    environment type ``e mod V``.  With several types, ``eval_return`` is the worker-weighted
    mean of the per-type means, the objective J = (1/n) Σ_i J_i: type v has weight
    (number of workers of type v) / n.
    """
    B, L = active.shape
    last = np.where(active.any(axis=1), L - 1 - np.argmax(active[:, ::-1], axis=1), -1)
    b = np.nonzero(last >= 0)[0]
    out = {"evaluated": np.zeros((B, L), bool)}
    out["evaluated"][b, last[b]] = True

    def at_last(values: np.ndarray) -> np.ndarray:
        col = np.full((B, L), np.nan, np.float32)
        col[b, last[b]] = values[b]
        return col

    if num_types <= 1:
        out["eval_return"] = at_last(returns.mean(axis=1))
        return out
    per_type = [returns[:, v::num_types].mean(axis=1) for v in range(num_types)]
    weights = np.bincount(worker_types, minlength=num_types) / len(worker_types)
    total = sum(np.float32(w) * t for w, t in zip(weights, per_type, strict=True))
    out["eval_return"] = at_last(np.asarray(total, np.float32))
    for v, values in enumerate(per_type):
        out[f"eval_type{v}"] = at_last(values)
    return out


def _record(run: _Run, metrics: dict[str, np.ndarray], returns: np.ndarray | None) -> None:
    """Appends a chunk's metrics with its evaluation columns (``returns`` None: the chunk
    was not evaluated, e.g. round 0 of its own shape)."""
    setup = run.trainer.setup
    if setup.n > results.MAX_COUNTED_WORKERS:  # per-worker counts kept only for small n
        metrics = {k: v for k, v in metrics.items() if k != "worker_counts"}
    evaluated = metrics["active"] if returns is not None else np.zeros_like(metrics["active"])
    if returns is None:
        returns = np.zeros((run.batch, 1), np.float32)
    evals = evaluation_columns(evaluated, returns, setup.worker_types, setup.task.num_types)
    run.history.append({**metrics, **evals})


def _initial_metrics(batch: int, n: int) -> dict[str, np.ndarray]:
    """The row of step 0 before any update: counters at zero, no training statistics."""
    nan = np.full((batch, 1), np.nan, np.float32)
    zero = np.zeros((batch, 1), np.float32)
    row: dict[str, np.ndarray] = {c: nan for c in LOGGED}
    row.update({c: zero for c in ("sim_time", "env_steps", "env_steps_wasted", "comms", "grads")})
    row.update({c: np.zeros((batch, 1), bool) for c in HEALTH_FLAGS})
    row.update(round=np.zeros((batch, 1), np.int32), active=np.ones((batch, 1), bool))
    row["worker_counts"] = np.zeros((batch, 1, n), np.float32)
    return row


def start_or_resume(run: _Run, run_dir: Path | None, resume: bool, algorithm: str, log) -> None:
    """Time 0 (evaluation of x_0, and round 0 when it has its own shape), or the newest
    checkpoint of ``algorithm`` in ``run_dir``."""
    run.state = jax.jit(jax.vmap(run.trainer.init))(run.keys, run.hyper)
    keys = _eval_keys(run.keys, 0)
    found = checkpoint.restore_latest(run_dir, algorithm, run.state, log) if resume else None
    if found is not None:
        found, state, restored, run.chunks = found
        run.state = parallel.shard_batch(state, run.mesh, run.batch)
        run.diverged = np.asarray(restored.pop("diverged_flag", np.zeros((run.batch, 1))))[:, 0] > 0
        run.budgets[run.diverged] = -np.inf
        run.history = [restored]
        steps = restored["active"].shape[1] - 1 - (run.trainer.first_step is not None)
        if steps != run.chunks * run.every:
            raise checkpoint.CheckpointError(
                f"{found}: {run.chunks} chunks of {steps / max(run.chunks, 1):g} steps, but this "
                f"run's chunks are {run.every} steps (eval.every_time is converted with the "
                "algorithm's clock, which changed); rerun without --resume"
            )
        log(f"[jaxnigt] {algorithm}: resumed from {found}")
        return
    # Evaluation of x_0 at time 0 (the training part of the program is skipped).
    run.state, _, returns = run.program(run.state, keys, np.bool_(False), run.budgets)
    _record(run, _initial_metrics(run.batch, run.trainer.setup.n), to_host(returns))
    if run.trainer.first_step is not None:  # round 0 with M_init != M: its own compiled shape
        budget = jnp.asarray(run.budgets)
        run.state, m0 = jax.jit(jax.vmap(run.trainer.first_step))(run.state, budget)
        m0 = {**m0._asdict(), "active": np.ones(run.batch, bool)}
        m0 = jax.tree.map(lambda x: x[:, None], to_host(m0))
        _record(run, m0, None)  # its gradients count towards the first evaluation interval


def advance(run: _Run) -> None:
    """One chunk of steps for every seed still running, then its evaluation."""
    run.chunks += 1
    keys = _eval_keys(run.keys, run.chunks)
    run.state, metrics, returns = run.program(run.state, keys, np.bool_(True), run.budgets)
    _record(run, to_host(_wait(metrics)), to_host(returns))


# An algorithm that raises ``overflow`` says what it means (``Traits.overflow``); one that
# raised it without saying would be a bug in that algorithm, reported as such.
OVERFLOW = "overflow flag raised (the algorithm's Traits give it no meaning: a bug)"


def _health(run: _Run, algorithm: str, mark_diverged: bool, log) -> None:
    """Flags of the last chunk: an overflow (what it means is the algorithm's
    ``Traits.overflow``) always stops the run; non-finite values stop it too, or
    (``on_nonfinite: mark``) freeze the diverged seed."""
    from jaxnigt.algorithms import traits

    last = run.history[-1]
    overflow = traits(algorithm).overflow or OVERFLOW
    for flag, what in (
        ("overflow", overflow),
        ("nonfinite", "non-finite parameters, gradients or returns"),
    ):
        flags = np.asarray(last[flag]) & np.asarray(last["active"])
        bad = flags.any(axis=1)
        if bad.any() and not (mark_diverged and flag == "nonfinite"):
            b = int(np.argmax(bad))
            rnd = int(last["round"][b][np.argmax(flags[b])])
            p = run.points[b // run.num_seeds]
            raise RunError(
                f"{algorithm}: {what} at round {rnd}, seed {b % run.num_seeds} "
                f"(learning_rate={p['learning_rate']}, eta={p['eta']})"
            )
        for b in np.nonzero(bad & ~run.diverged)[0]:
            log(f"[jaxnigt] {algorithm}: seed {b % run.num_seeds} diverged (marked, others go on)")
        run.diverged |= bad
    run.budgets[run.diverged] = -np.inf


def _finished(run: _Run, bar: _Progress) -> bool:
    """Whether every running seed has crossed the budget (or the step cap); updates the bar."""
    running = ~run.diverged
    if not running.any():
        return True
    clock_time, steps = to_host((run.state.counters.time, run.state.steps))
    sim_time = float(np.min(clock_time[running]))
    steps_done = int(np.min(steps[running]))
    last = run.history[-1]
    returns = np.where(last["active"], last["train_return"], np.nan)
    median = float(np.nanmedian(_last_finite(returns))) if steps_done else math.nan
    bar.update(
        sim_time if math.isfinite(run.budget) else steps_done,
        round=steps_done,
        median_return=f"{median:.2f}",
    )
    return sim_time >= run.budget or steps_done >= run.max_rounds


def _last_finite(values: np.ndarray) -> np.ndarray:
    """Per row, the last non-NaN value (NaN if none)."""
    ok = ~np.isnan(values)
    idx = values.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
    return np.where(ok.any(axis=1), values[np.arange(values.shape[0]), idx], np.nan)


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
    stop: StopFlag | None = None,
    on_chunk: Callable[[dict[str, np.ndarray]], None] | None = None,
) -> dict[str, np.ndarray]:
    """Runs one algorithm for all seeds and grid points; returns stacked metrics.

    With ``run_dir``, a checkpoint is written every ``config.checkpoint_every`` chunks (and
    kept when the run stops on non-finite values); ``resume=True`` continues from the newest
    readable checkpoint there, giving the same metrics as an uninterrupted run.  ``stop``
    (:func:`stop_on_signals`) ends the run after the current chunk with a checkpoint and
    :class:`Interrupted`; ``on_chunk`` receives, after every chunk, a function that returns
    the results so far (built only if called: the history is concatenated each time).

    Returns:
      A dict of numpy arrays with shape ``[B, R]`` (B = grid points × seeds, R = steps
      including step 0): the step metrics, ``active``, ``eval_return`` (NaN where not
      evaluated) and ``eval_type{v}`` for heterogeneous tasks; and ``[B]`` arrays ``grid``,
      ``seed``, ``learning_rate``, ``eta``, ``diverged``; scalars ``wall_seconds``,
      ``compile_seconds`` and ``trajectories_per_update`` (-1: a step is one update).
    """
    run = _prepare(config, algorithm, trainer, num_seeds or config.seeds)
    if config.eval.every_time is not None:
        log(f"[jaxnigt] {algorithm}: evaluating every {run.every} steps (eval.every_time)")
    total = run.budget if math.isfinite(run.budget) else run.max_rounds
    bar = _Progress(progress, total, algorithm)
    t_start = time.perf_counter()
    save = lambda: checkpoint.save(run_dir, algorithm, run.state, run.stacked(True), run.chunks)
    with _compile_seconds(run):
        try:
            start_or_resume(run, Path(run_dir) if run_dir else None, resume, algorithm, log)
            while True:
                _health(run, algorithm, config.on_nonfinite == "mark", log)
                if _finished(run, bar):
                    break
                if stop is not None and stop.requested:
                    if run_dir is not None:
                        save()
                    interrupted = Interrupted(stop.signum, algorithm, run.chunks)
                    interrupted.partial = _output(run, t_start)
                    raise interrupted
                every = config.checkpoint_every
                if run_dir is not None and every and run.chunks and run.chunks % every == 0:
                    save()
                advance(run)
                if on_chunk is not None:
                    on_chunk(functools.partial(_output, run, t_start))
        finally:
            bar.close()
    return _output(run, t_start)


def _output(run: _Run, t_start: float) -> dict[str, np.ndarray]:
    """The run's results so far (see :func:`run_algorithm`)."""
    out = run.stacked()
    out["grid"] = np.repeat(np.arange(len(run.points)), run.num_seeds)
    out["seed"] = np.tile(np.arange(run.num_seeds), len(run.points))
    out["learning_rate"] = to_host(run.hyper["learning_rate"])
    out["eta"] = to_host(run.hyper["eta"])
    out["wall_seconds"] = np.asarray(time.perf_counter() - t_start)
    out["compile_seconds"] = np.asarray(run.compile_seconds)
    per_update = run.trainer.algorithm.trajectories_per_update
    out["trajectories_per_update"] = np.asarray(-1 if per_update is None else per_update)
    out["diverged"] = run.diverged
    return out


class _Results:
    """The run directory's result files: rewritten (atomically) after every chunk, at most
    every ``config.live_every_s`` seconds (``curves.png`` every ``config.plot_every_s``), and
    always at the end; a directory is readable by ``jaxnigt plot`` while the run goes on."""

    def __init__(self, config: ExperimentConfig, out: Path, rows: list, count_rows: list):
        self.config, self.out = config, out
        self.rows, self.count_rows = rows, count_rows  # of the finished algorithms
        self.timings: dict[str, tuple[float, float, int]] = {}
        self.diverged: dict[str, list[int]] = {}  # summary key -> seeds marked diverged
        self.last_write = self.last_plot = time.monotonic()

    def add(self, algorithm: str, m: dict[str, np.ndarray]) -> None:
        """Keeps a finished algorithm's rows."""
        self.rows.extend(results.metric_rows(algorithm, m))
        self.count_rows.extend(results.worker_count_rows(algorithm, m))
        per_update = int(m["trajectories_per_update"])
        for b in np.nonzero(m["diverged"])[0]:
            grid = int(m["grid"][b])
            key = algorithm if grid == 0 else f"{algorithm}[grid={grid}]"
            self.diverged.setdefault(key, []).append(int(m["seed"][b]))
        self.timings[algorithm] = (
            float(m["wall_seconds"]),
            float(m["compile_seconds"]),
            per_update,
        )

    def due(self) -> bool:
        """Whether :meth:`partial` would write now (``config.live_every_s`` has passed)."""
        return time.monotonic() - self.last_write >= self.config.live_every_s

    def partial(self, algorithm: str, m: dict[str, np.ndarray], *, force: bool = False) -> None:
        """Writes the finished rows plus ``algorithm``'s rows so far (throttled)."""
        now = time.monotonic()
        if not force and not self.due():
            return
        rows = self.rows + results.metric_rows(algorithm, m)
        counts = self.count_rows + results.worker_count_rows(algorithm, m)
        plot = force or now - self.last_plot >= self.config.plot_every_s
        self.write(rows, counts, plot=plot)
        self.last_write = now
        self.last_plot = now if plot else self.last_plot

    def write(self, rows=None, counts=None, *, plot: bool = True) -> dict[str, Any]:
        rows = self.rows if rows is None else rows
        counts = self.count_rows if counts is None else counts
        summary = results.summarize(rows, self.config.target_return)
        for name, (wall, compile_s, per_update) in self.timings.items():
            if name in summary:
                summary[name]["wall_seconds"] = round(wall, 2)
                summary[name]["compile_seconds"] = round(compile_s, 2)
                if per_update > 0:  # updates = trajectories / this (see Algorithm)
                    summary[name]["trajectories_per_update"] = per_update
        for name, seeds in self.diverged.items():
            if name in summary:  # on_nonfinite: mark (their evaluations end at divergence)
                summary[name]["diverged_seeds"] = seeds
        if not is_writer():
            return summary
        results.write_csv(self.out / "metrics.csv", rows)
        if counts:
            results.write_csv(self.out / results.COUNTS_FILE, counts, results.COUNT_COLUMNS)
        atomic_write_text(self.out / "summary.json", json.dumps(summary, indent=2) + "\n")
        if plot and rows:
            from jaxnigt.plotting import plot_counts, plot_runs

            plot_runs([self.out], x="time", out=self.out / "curves.png", budget=self.config.budget)
            if counts:
                plot_counts(self.out, out=self.out / "counts.png")
        return summary


def _begin(config: ExperimentConfig, out: Path, resume: bool) -> tuple[list, list, list]:
    """``(done, rows, count_rows)``: the algorithms an earlier run finished and their rows
    (resume), or nothing (a fresh run; ``config.yaml`` written)."""
    if not resume:
        if is_writer():
            atomic_write_text(out / "config.yaml", config_lib.dump(config))
        return [], [], []
    check_resumable(config, out)
    done = checkpoint.done_algorithms(out)
    kept = lambda name: [r for r in results.read_metrics_raw(out, name) if r["algorithm"] in done]
    return done, kept("metrics.csv"), kept(results.COUNTS_FILE)


def run_experiment(
    config: ExperimentConfig,
    out: str | Path,
    *,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    plot: bool = True,
    stop: StopFlag | None = None,
) -> dict[str, Any]:
    """Runs every algorithm of ``config`` and writes the run directory; returns the summary.

    With ``resume=True`` (``out`` must hold a run of the same config), algorithms already
    finished keep their rows in ``metrics.csv`` and the one in progress continues from its
    newest readable checkpoint.  One process at a time writes a run directory.

    Raises:
      RunDirError: the directory cannot be used or written (``started`` tells whether work
        had begun), or another process holds it.
      Interrupted: ``stop`` was set; the checkpoint and partial results are written.
    """
    out = Path(out)
    if not resume and is_writer():
        prepare_run_dir(out, overwrite)
    elif resume and not os.access(out, os.W_OK):
        raise RunDirError(f"--resume {str(out)!r}: not writable")
    with run_lock(out) if is_writer() else contextlib.nullcontext():
        try:
            done, rows, count_rows = _begin(config, out, resume)
        except OSError as e:
            raise RunDirError(f"run directory {describe(e)}") from None
        files = _Results(config, out, rows, count_rows)
        try:
            for algorithm in config.algorithms:
                if algorithm in done:
                    log(f"[jaxnigt] {algorithm}: finished in an earlier run; kept")
                    continue
                _run_one(config, algorithm, out, files, progress, resume, log, stop)
            return files.write(plot=plot)
        except RunDirError:
            raise
        except OSError as e:
            raise RunDirError(f"run directory {describe(e)}", started=True) from None


class _TensorBoard:
    """Scalars of every chunk for TensorBoard (``RUN_DIR/tensorboard/<algorithm>``): the
    medians over seeds at each seed's latest step; step = the median step count."""

    TAGS = ("eval_return", "train_return", "sim_time", "env_steps", "comms", "round_time")

    def __init__(self, out: Path, algorithm: str):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir=str(out / "tensorboard" / algorithm))

    def __call__(self, m: dict[str, np.ndarray]) -> None:
        active = m["active"]
        last = active.shape[1] - 1 - np.argmax(active[:, ::-1], axis=1)
        at = lambda k: m[k][np.arange(len(last)), last].astype(np.float64)
        step = int(np.median(at("round")))
        for tag in self.TAGS:
            values = at(tag)
            if np.isfinite(values).any():
                self.writer.add_scalar(tag, float(np.nanmedian(values)), global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def _run_one(config, algorithm, out: Path, files: _Results, progress, resume, log, stop) -> None:
    """Runs one algorithm of an experiment and keeps (and writes) its rows."""
    batch = config.seeds * len(grid_points(config, algorithm))
    _, slot_mesh = parallel.device_plan(config.devices, batch)
    tr = make_trainer(config, algorithm, mesh=slot_mesh)
    log(
        f"[jaxnigt] {algorithm}: env={config.env.name} n={config.cluster.n} "
        f"d={tr.dim} seeds={config.seeds} grid={len(grid_points(config, algorithm))}"
    )
    board = _TensorBoard(out, algorithm) if config.tensorboard and is_writer() else None

    def live(so_far):
        if board is None and not files.due():
            return
        m = so_far()
        files.partial(algorithm, m)
        if board is not None:
            board(m)

    try:
        m = run_algorithm(
            config, algorithm, progress=progress, trainer=tr, run_dir=out, resume=resume,
            log=log, stop=stop, on_chunk=live,
        )  # fmt: skip
    except Interrupted as e:
        files.partial(algorithm, e.partial, force=True)
        raise
    finally:
        if board is not None:
            board.close()
    files.add(algorithm, m)
    files.write(plot=False)
    if is_writer():  # only process 0 writes; the others hold the same gathered rows
        checkpoint.mark_done(out, algorithm)
    if m["diverged"].any():
        log(f"[jaxnigt] {algorithm}: diverged seeds {np.nonzero(m['diverged'])[0].tolist()}")
