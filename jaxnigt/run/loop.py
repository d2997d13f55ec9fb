"""The run loop: one algorithm, all its seeds and grid points, as one vmapped program.

For each algorithm the seeds (and grid points, :mod:`jaxnigt.run.batch`) run as ONE vmapped,
jitted program: ``init`` then chunks of ``eval.every`` steps (a ``lax.scan``), or with
``eval.every_time`` chunks that each end at the first step reaching the next multiple of
``every_time`` in simulated time (a ``lax.while_loop``, :meth:`Trainer.run_chunk`), each
followed by an evaluation of the deploy params: every engine is then evaluated at most
``every_time`` plus one round (or one arrival) apart.  The
loop is three pieces: :func:`start_or_resume` (time 0 and its evaluation, or the newest
checkpoint), :func:`next_chunk` (one chunk and its evaluation) with the health checks after
it (a seed whose next step can never end, a worker down for good, stops there: :func:`_stalls`);
:mod:`jaxnigt.run.evaluations` says which step of each seed an evaluation belongs to.
:func:`run_algorithm` drives them, with a progress bar and the compile time it measured;
:mod:`jaxnigt.run.experiment` runs every algorithm of a config into a run directory.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.algorithms.core import select
from jaxnigt.config import ExperimentConfig
from jaxnigt.run import checkpoint, devices
from jaxnigt.run.batch import eval_keys, grid_points, seed_keys
from jaxnigt.run.distributed import to_host
from jaxnigt.run.evaluations import evaluation_columns, initial_metrics, last_finite, stall_line
from jaxnigt.run.metrics import MAX_COUNTED_WORKERS
from jaxnigt.run.progress import Progress, compile_seconds, wait
from jaxnigt.run.signals import ChunkDropped, Interrupted, StopFlag
from jaxnigt.run.trainer import Trainer, make_trainer

__all__ = ["Run", "RunError", "next_chunk", "prepare", "run_algorithm", "start_or_resume"]


class RunError(RuntimeError):
    """A run stopped for a reason the user must see (divergence, capacity overflow, ...)."""


@dataclasses.dataclass
class Run:
    """One algorithm's run on the host: what is fixed, and the progress so far (built by
    :func:`run_algorithm` from a config, or by :func:`jaxnigt.run.padded.prepare`)."""

    trainer: Trainer
    points: list[dict[str, float]]
    num_seeds: int
    first_seed: int
    keys: jax.Array
    hyper: dict[str, jax.Array]
    mesh: Any
    program: Callable
    init: Callable
    budget: float
    max_rounds: float
    budgets: np.ndarray  # [B] per-seed budgets (-inf freezes a diverged seed)
    diverged: np.ndarray  # [B] bool
    every: int = 1  # steps per chunk (with a time grid: at most)
    time_grid: bool = False  # chunks end at multiples of eval.every_time
    first_step: Callable | None = None  # round 0's program when M_init != M
    history: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list)
    chunks: int = 0
    state: Any = None
    compile_seconds: float = 0.0
    last_eval: np.ndarray | None = None  # [B] each seed's latest evaluation return
    stalled: np.ndarray | None = None  # [B] bool: its next step can never end (stopped)
    stalls: np.ndarray | None = None  # [B] bool: seeds the last chunk found stalled
    count_width: int | None = None  # worker_counts columns kept (a padded program's; None: n)

    def __post_init__(self):
        self.last_eval = np.full(len(self.budgets), np.nan, np.float32)
        self.stalled = np.zeros(len(self.budgets), bool)
        self.stalls = np.zeros(len(self.budgets), bool)

    @property
    def batch(self) -> int:
        return len(self.budgets)

    def stacked(self, with_flags: bool = False) -> dict[str, np.ndarray]:
        """The history concatenated along the step axis (optionally with the divergence flags)."""
        out = {k: np.concatenate([h[k] for h in self.history], axis=1) for k in self.history[0]}
        if with_flags:
            out["diverged_flag"] = self.diverged.astype(np.float32)[:, None]
        return out


class _Programs(NamedTuple):
    """The jitted programs of one algorithm's run: the trainer they are built from, the chunk
    (``chunk_and_evaluate``) and its chunk length, the initial state, and round 0 when it
    has its own shape (``M_init != M``)."""

    trainer: Trainer
    every: int
    chunk: Callable
    init: Callable
    first_step: Callable | None


def _max_rounds(config: ExperimentConfig) -> float:
    return config.max_rounds if config.max_rounds is not None else math.inf


def _programs(tr: Trainer, config: ExperimentConfig) -> _Programs:
    """The run's programs; each takes the cluster's per-worker arrays as an argument
    (:meth:`Trainer.program`), so their compile time does not grow with n."""
    every, every_time = tr.eval_chunk(config.eval.every, config.eval.every_time)
    max_rounds = _max_rounds(config)
    chunk = lambda t, *args: jax.vmap(
        lambda s, k, train, b: t.chunk_and_evaluate(
            s, k, train, every, budget=b, max_rounds=max_rounds, every_time=every_time
        ),
        in_axes=(0, 0, None, 0),
    )(*args)
    first = lambda t, state, budget: jax.vmap(t.first_step)(state, budget)
    return _Programs(
        tr,
        every,
        tr.program(chunk),
        tr.program(lambda t, keys, hyper: jax.vmap(t.init)(keys, hyper)),
        tr.program(first) if tr.first_step is not None else None,
    )


# What a run's programs depend on is the config but for these keys (values that only feed
# the programs' arguments, or that the host alone reads).
_NOT_IN_PROGRAMS = tuple("name seed first_seed seeds budget target_return checkpoint_every".split())


@functools.lru_cache(maxsize=8)
def _cached_programs(config_key: str, algorithm: str, sharded_slots: bool, num_devices: int):
    del num_devices  # part of the key only: a mesh spans the devices visible now
    from jaxnigt import config as config_lib

    config = config_lib.from_dict(json.loads(config_key))
    slot_mesh = devices.make_mesh(config.devices) if sharded_slots else None
    return _programs(make_trainer(config, algorithm, mesh=slot_mesh), config)


def programs_for(config: ExperimentConfig, algorithm: str, batch: int) -> _Programs:
    """The programs of ``algorithm``'s run of ``config`` with ``batch`` vmapped runs, shared
    by every run in this process whose config differs only in seeds, budget or name: a
    second run of the same experiment (a resume, a sweep point, a notebook cell) traces and
    compiles nothing new (``jax.jit``'s own cache, keyed on the programs' shapes)."""
    raw = {k: v for k, v in config.to_dict().items() if k not in _NOT_IN_PROGRAMS}
    key = json.dumps(raw, sort_keys=True, default=str)
    slot_mesh = devices.device_plan(config.devices, batch)[1]
    return _cached_programs(key, algorithm, slot_mesh is not None, len(jax.devices()))


def _prepare(config: ExperimentConfig, algorithm: str, trainer: Trainer | None, num_seeds: int):
    """The vmapped program and inputs of one algorithm's run."""
    points = grid_points(config, algorithm)
    batch = num_seeds * len(points)
    mesh, _ = devices.device_plan(config.devices, batch)
    progs = (
        programs_for(config, algorithm, batch) if trainer is None else _programs(trainer, config)
    )
    tr = progs.trainer
    keys = jnp.concatenate([seed_keys(config, num_seeds)] * len(points))
    hyper = tr.hyper(
        batch=batch,
        **{k: np.asarray([p[k] for p in points for _ in range(num_seeds)]) for k in points[0]},
    )
    budget = config.budget if config.budget is not None else math.inf
    keys, hyper = devices.shard_batch((keys, hyper), mesh, batch)
    return Run(
        trainer=tr,
        points=points,
        num_seeds=num_seeds,
        first_seed=config.first_seed,
        keys=keys,
        hyper=hyper,
        mesh=mesh,
        program=progs.chunk,
        init=progs.init,
        first_step=progs.first_step,
        budget=budget,
        max_rounds=_max_rounds(config),
        budgets=np.full(batch, budget, np.float32),
        diverged=np.zeros(batch, bool),
        every=progs.every,
        time_grid=config.eval.every_time is not None,
    )


def prepare(
    config: ExperimentConfig,
    algorithm: str,
    trainer: Trainer | None = None,
    num_seeds: int | None = None,
) -> Run:
    """The vmapped program and inputs of ``algorithm``'s run of ``config``, as
    :func:`run_algorithm` builds them before its first chunk (its ``prepared`` argument takes
    one): e.g. to lower and compile the run's chunk program on its own.

    Args:
      config: the experiment.
      algorithm: the algorithm's registered name.
      trainer: a trainer of ``config`` and ``algorithm`` to build the programs from (None:
        the programs shared by every run of the same config, :func:`programs_for`).
      num_seeds: the seeds vmapped per grid point (None: ``config.seeds``).

    Returns:
      A :class:`Run` with its programs, keys, hyperparameters and budgets; not started.
    """
    return _prepare(config, algorithm, trainer, config.seeds if num_seeds is None else num_seeds)


def _record(run: Run, metrics: dict[str, np.ndarray], returns: np.ndarray | None) -> None:
    """Appends a chunk's metrics with its evaluation columns (``returns`` None: the chunk
    was not evaluated, e.g. round 0 of its own shape)."""
    setup = run.trainer.setup
    if metrics["worker_counts"].shape[-1] > MAX_COUNTED_WORKERS:  # kept only for small n
        metrics = {k: v for k, v in metrics.items() if k != "worker_counts"}
    evaluated = metrics["active"] if returns is not None else np.zeros_like(metrics["active"])
    if returns is None:
        returns = np.zeros((run.batch, 1), np.float32)
    evals = evaluation_columns(evaluated, returns, setup.cluster.worker_types, setup.task.num_types)
    run.history.append({**metrics, **evals})
    latest = last_finite(evals["eval_return"])
    run.last_eval = np.where(np.isnan(latest), run.last_eval, latest)


def start_or_resume(run: Run, run_dir: Path | None, resume: bool, algorithm: str, log) -> None:
    """Time 0 (evaluation of x_0, and round 0 when it has its own shape), or the newest
    checkpoint of ``algorithm`` in ``run_dir``."""
    run.state = run.init(run.keys, run.hyper)
    keys = eval_keys(run.keys, 0)
    found = checkpoint.restore_latest(run_dir, algorithm, run.state, log) if resume else None
    if found is not None:
        found, state, restored, run.chunks = found
        run.state = devices.shard_batch(state, run.mesh, run.batch)
        run.diverged = np.asarray(restored.pop("diverged_flag", np.zeros((run.batch, 1))))[:, 0] > 0
        run.budgets[run.diverged] = -np.inf
        run.history = [restored]
        if "eval_return" in restored:
            run.last_eval = last_finite(restored["eval_return"])
        steps = restored["active"].shape[1] - 1 - (run.trainer.first_step is not None)
        if not run.time_grid and steps != run.chunks * run.every:
            raise checkpoint.CheckpointError(
                f"{found}: {run.chunks} chunks of {steps / max(run.chunks, 1):g} steps, but this "
                f"run's chunks are {run.every} steps (eval.every changed): the run cannot "
                "continue from it"
            )
        log(f"[jaxnigt] {algorithm}: resumed from {found}")
        return
    # Evaluation of x_0 at time 0 (the training part of the program is skipped).
    run.state, _, returns = run.program(run.state, keys, np.bool_(False), run.budgets)
    _record(
        run, initial_metrics(run.batch, run.count_width or run.trainer.setup.n), to_host(returns)
    )
    if run.first_step is not None:  # round 0 with M_init != M: its own compiled shape
        state, m0 = run.first_step(run.state, jnp.asarray(run.budgets))
        m0 = to_host(m0 if isinstance(m0, dict) else m0._asdict())
        took = m0.pop("applied", True)  # a padded program's runs without a round 0 of their own
        run.stalls = ~np.isfinite(m0["sim_time"]) & took  # never ends: it never happened
        run.state = jax.vmap(select)(jnp.asarray(run.stalls), run.state, state)
        m0 = jax.tree.map(lambda x: x[:, None], {**m0, "active": ~run.stalls & took})
        _record(run, m0, None)  # its gradients count towards the first evaluation interval


def next_chunk(run: Run, stop: StopFlag | None = None) -> None:
    """One chunk of steps for every seed still running, then its evaluation.  A chunk still
    running ``stop.grace`` seconds after a signal is dropped: the run keeps the state before
    it and :class:`~jaxnigt.run.signals.ChunkDropped` is raised."""
    keys = eval_keys(run.keys, run.chunks + 1)
    started = time.perf_counter()
    state, metrics, returns = run.program(run.state, keys, np.bool_(True), run.budgets)
    metrics = to_host(wait(metrics, stop))
    run.stalls = metrics.pop("stalled").any(axis=1)  # steps that never end (not taken)
    run.state, run.chunks = state, run.chunks + 1
    if stop is not None:
        stop.chunk_seconds = time.perf_counter() - started
    if run.time_grid:  # the steps no seed took (the chunk's cap is an upper bound)
        taken = metrics["active"].any(axis=0)
        if taken.any():
            metrics = {k: v[:, taken] for k, v in metrics.items()}
    _record(run, metrics, to_host(returns))


# An algorithm that raises ``overflow`` says what it means (``Traits.overflow``); one that
# raised it without saying would be a bug in that algorithm, reported as such.
OVERFLOW = "overflow flag raised (the algorithm's Traits give it no meaning: a bug)"


def _health(run: Run, algorithm: str, mark_diverged: bool, log) -> None:
    """Flags of the last chunk: an overflow (what it means is the algorithm's
    ``Traits.overflow``) always stops the run; non-finite values stop it too, or
    (``on_nonfinite: mark``) freeze the diverged seed; a seed whose next step can never end
    stops (:func:`_stalls`)."""
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
                f"{algorithm}: {what} at round {rnd}, seed {run.first_seed + b % run.num_seeds} "
                f"(learning_rate={p['learning_rate']}, eta={p['eta']})"
            )
        for b in np.nonzero(bad & ~run.diverged)[0]:
            seed = run.first_seed + b % run.num_seeds
            log(f"[jaxnigt] {algorithm}: seed {seed} diverged (marked, others go on)")
        run.diverged |= bad
    run.budgets[run.diverged] = -np.inf
    _stalls(run, algorithm, log)


def _stalls(run: Run, algorithm: str, log) -> None:
    """Seeds whose next step can never end (under ``cluster.power`` only) stop, with one line."""
    fresh = run.stalls & ~run.stalled & ~run.diverged
    run.stalls = np.zeros_like(run.stalled)
    if not fresh.any():
        return
    times = np.asarray(to_host(run.state.counters.time), np.float64)[fresh]
    run.stalled |= fresh
    run.budgets[run.stalled] = -np.inf
    seeds = run.first_seed + np.nonzero(fresh)[0] % run.num_seeds
    rounds = run.trainer.algorithm.trajectories_per_update is None  # a step is a round
    others = bool((~run.stalled & ~run.diverged).any())
    log(f"[jaxnigt] {stall_line(algorithm, times, seeds, rounds=rounds, others_go_on=others)}")


def _finished(run: Run, bar: Progress) -> bool:
    """Whether every running seed has crossed the budget (or the step cap); updates the bar."""
    running = ~run.diverged & ~run.stalled
    if not running.any():
        return True
    clock_time, steps = to_host((run.state.counters.time, run.state.steps))
    sim_time = float(np.min(clock_time[running]))
    steps_done = int(np.min(steps[running]))
    evaluated = run.last_eval[running]
    median = (
        float(np.median(evaluated[~np.isnan(evaluated)]))
        if (~np.isnan(evaluated)).any()
        else math.nan
    )
    bar.update(
        sim_time if math.isfinite(run.budget) else steps_done,
        round=steps_done,
        eval_median=f"{median:.2f}",
    )
    return sim_time >= run.budget or steps_done >= run.max_rounds


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
    label: str | None = None,
    prepared: Run | None = None,
) -> dict[str, np.ndarray]:
    """Runs one algorithm for all seeds and grid points (``prepared``: a run built elsewhere,
    :mod:`jaxnigt.run.padded`); returns stacked metrics; the progress bar is named ``label``.

    With ``run_dir``, a checkpoint is written every ``config.checkpoint_every`` chunks (and
    kept when the run stops on non-finite values); ``resume=True`` continues from the newest
    readable checkpoint there, giving the same metrics as an uninterrupted run.  ``stop``
    (:func:`jaxnigt.run.signals.stop_on_signals`) ends the run after the current chunk with a
    checkpoint and :class:`~jaxnigt.run.signals.Interrupted`; ``on_chunk`` receives, after every
    chunk, a function that returns the results so far (built only when called).

    Returns:
      A dict of numpy arrays with shape ``[B, R]`` (B = grid points × seeds, R = steps
      including step 0): the step metrics, ``active``, ``eval_return`` (NaN where not
      evaluated) and ``eval_type{v}`` for heterogeneous tasks; and ``[B]`` arrays ``grid``,
      ``seed``, ``learning_rate``, ``eta``, ``diverged``; scalars ``wall_seconds``,
      ``compile_seconds`` and ``trajectories_per_update`` (-1: a step is one update).
    """
    log = log or (lambda _line: None)
    run = prepared or _prepare(config, algorithm, trainer, num_seeds or config.seeds)
    _describe(run, config, algorithm, log)
    bar = Progress.of(run, progress, label or algorithm)
    t_start = time.perf_counter()
    save = lambda: checkpoint.save(run_dir, algorithm, run.state, run.stacked(True), run.chunks)
    stopped = lambda: _interrupted(run, algorithm, stop, save if run_dir else None, t_start)
    with compile_seconds(run):
        try:
            start_or_resume(run, Path(run_dir) if run_dir else None, resume, algorithm, log)
            if run.chunks == 0:  # compiled by time 0's evaluation (a resumed run: its 1st chunk)
                bar.start()
            while True:
                _health(run, algorithm, config.on_nonfinite == "mark", log)
                if _finished(run, bar):
                    break
                if stop is not None and stop.requested:
                    raise stopped()
                every = config.checkpoint_every
                if run_dir is not None and every and run.chunks and run.chunks % every == 0:
                    save()
                _chunk(run, algorithm, stop, stopped, log)
                bar.start(once=True)
                if on_chunk is not None:
                    on_chunk(functools.partial(_output, run, t_start))
        finally:
            bar.close()
    return _output(run, t_start)


def _describe(run: Run, config: ExperimentConfig, algorithm: str, log) -> None:
    """The log line of a run evaluated on the time grid."""
    if run.time_grid:
        log(
            f"[jaxnigt] {algorithm}: evaluating at each multiple of eval.every_time = "
            f"{config.eval.every_time:g} of simulated time (chunks of at most {run.every} steps)"
        )


def _chunk(run: Run, algorithm: str, stop: StopFlag | None, stopped, log) -> None:
    """:func:`next_chunk`; a chunk dropped after a signal raises ``stopped()``."""
    try:
        next_chunk(run, stop)
    except ChunkDropped:
        log(
            f"[jaxnigt] {algorithm}: chunk {run.chunks + 1} was still running "
            f"{stop.grace:g} s after the signal; dropped (a resume runs it again)"
        )
        raise stopped() from None


def _interrupted(run: Run, algorithm: str, stop: StopFlag, save, t_start: float) -> Interrupted:
    """The :class:`Interrupted` of a stop request, after the checkpoint (``save``, if any)."""
    if save is not None:
        save()
    interrupted = Interrupted(stop.signum, algorithm, run.chunks)
    interrupted.partial = _output(run, t_start)
    return interrupted


def _output(run: Run, t_start: float) -> dict[str, np.ndarray]:
    """The run's results so far (see :func:`run_algorithm`)."""
    out = run.stacked()
    out["grid"] = np.repeat(np.arange(len(run.points)), run.num_seeds)
    out["seed"] = np.tile(run.first_seed + np.arange(run.num_seeds), len(run.points))
    out["learning_rate"] = to_host(run.hyper["learning_rate"])
    out["eta"] = to_host(run.hyper["eta"])
    out["wall_seconds"] = np.asarray(time.perf_counter() - t_start)
    out["compile_seconds"] = np.asarray(run.compile_seconds)
    per_update = run.trainer.algorithm.trajectories_per_update
    out["trajectories_per_update"] = np.asarray(-1 if per_update is None else per_update)
    out["diverged"] = run.diverged
    return out
