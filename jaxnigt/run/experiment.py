"""An experiment: every algorithm of a config run into a run directory.

:func:`run_experiment` prepares the directory (one writer at a time, :func:`jaxnigt.run.run_dir.
run_lock`), runs each algorithm with :func:`jaxnigt.run.loop.run_algorithm` and keeps its
result files up to date while it runs (:class:`_Results`: ``metrics.csv``,
``worker_counts.csv``, ``summary.json``, and ``curves.png`` and ``counts.png`` drawn from the
rows it holds; optionally TensorBoard scalars).  ``config.yaml`` records the config (and
``trace.sha256`` the content of its power trace file, which a resume must find unchanged);
``checkpoints/`` holds the checkpoints and which algorithms are done, from which a resumed
experiment continues.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from jaxnigt import config as config_lib
from jaxnigt.config import ExperimentConfig
from jaxnigt.run import checkpoint, devices, metrics, run_dir
from jaxnigt.run.batch import batch_size
from jaxnigt.run.distributed import is_writer
from jaxnigt.run.loop import run_algorithm
from jaxnigt.run.signals import Interrupted, StopFlag
from jaxnigt.run.trainer import make_trainer

__all__ = ["run_experiment"]

#: What a run writes in its directory beside ``config.yaml``: a fresh run removes an earlier
#: run's (a stale checkpoint would be resumed, a stale count file plotted).
RUN_OUTPUTS = (
    "metrics.csv",
    metrics.COUNTS_FILE,
    "summary.json",
    "curves.png",
    "counts.png",
    "checkpoints",
    "tensorboard",
)


class _Results:
    """The run directory's result files: rewritten (atomically) after every chunk, at most
    every ``config.live_every_s`` seconds (``curves.png`` every ``config.plot_every_s``), and
    always at the end; a directory is readable by ``jaxnigt plot`` while the run goes on."""

    def __init__(self, config: ExperimentConfig, out: Path, rows: list, count_rows: list):
        self.config, self.out = config, out
        self.rows, self.count_rows = rows, count_rows  # of the finished algorithms
        self.timings: dict[str, tuple[float, float, int]] = {}
        # seconds earlier sessions spent on an algorithm this one continues (a resume)
        self.earlier: dict[str, tuple[float, float]] = {}
        self.diverged: dict[str, list[int]] = {}  # summary key -> seeds marked diverged
        self.last_write = self.last_plot = time.monotonic()

    def add(self, algorithm: str, m: dict[str, np.ndarray]) -> None:
        """Keeps a finished algorithm's rows."""
        self.rows.extend(metrics.metric_rows(algorithm, m))
        self.count_rows.extend(metrics.worker_count_rows(algorithm, m))
        per_update = int(m["trajectories_per_update"])
        for b in np.nonzero(m["diverged"])[0]:
            grid = int(m["grid"][b])
            key = algorithm if grid == 0 else f"{algorithm}[grid={grid}]"
            self.diverged.setdefault(key, []).append(int(m["seed"][b]))
        self.timings[algorithm] = self._seconds(algorithm, m, per_update)

    def _seconds(self, algorithm: str, m: dict, per_update: int) -> tuple[float, float, int]:
        """``algorithm``'s wall and compile seconds, this session's plus earlier sessions'."""
        wall, compile_s = self.earlier.get(algorithm, (0.0, 0.0))
        return wall + float(m["wall_seconds"]), compile_s + float(m["compile_seconds"]), per_update

    def due(self) -> bool:
        """Whether :meth:`partial` would write now (``config.live_every_s`` has passed)."""
        return time.monotonic() - self.last_write >= self.config.live_every_s

    def partial(self, algorithm: str, m: dict[str, np.ndarray], *, force: bool = False) -> None:
        """Writes the finished rows plus ``algorithm``'s rows so far (throttled); its summary
        entry says it has not finished."""
        now = time.monotonic()
        if not force and not self.due():
            return
        rows = self.rows + metrics.metric_rows(algorithm, m)
        counts = self.count_rows + metrics.worker_count_rows(algorithm, m)
        # its seconds so far, which a resume adds its own to
        self.timings[algorithm] = self._seconds(algorithm, m, int(m["trajectories_per_update"]))
        plot = force or now - self.last_plot >= self.config.plot_every_s
        self.write(rows, counts, plot=plot, running=algorithm)
        self.last_write = now
        self.last_plot = now if plot else self.last_plot

    def write(self, rows=None, counts=None, *, plot: bool = True, running: str | None = None):
        """Writes the result files of ``rows`` and ``counts`` (default: the finished
        algorithms'), the curves too with ``plot``; returns the summary.

        Every summary entry says whether its algorithm ``finished`` (the one ``running``, if
        any, has not: its entry also gives ``sim_time_reached``, the simulated time every
        one of its seeds has reached, and its ``final_median_return`` is the latest
        evaluation so far).
        """
        rows = self.rows if rows is None else rows
        counts = self.count_rows if counts is None else counts
        summary = metrics.summarize(rows, self.config.target_return)
        for name, entry in summary.items():
            entry["finished"] = name.split("[")[0] != running
            if not entry["finished"]:
                entry["sim_time_reached"] = metrics.time_reached(rows, name)
        for name, (wall, compile_s, per_update) in self.timings.items():
            if name in summary:
                summary[name]["wall_seconds"] = round(wall, 2)
                summary[name]["compile_seconds"] = round(compile_s, 2)
                if per_update >= 0:  # updates = trajectories / this; 0: not a fixed share
                    summary[name]["trajectories_per_update"] = per_update
        for name, seeds in self.diverged.items():
            if name in summary:  # on_nonfinite: mark (their evaluations end at divergence)
                summary[name]["diverged_seeds"] = seeds
        if not is_writer():
            return summary
        metrics.write_csv(self.out / "metrics.csv", rows)
        if counts:
            metrics.write_csv(self.out / metrics.COUNTS_FILE, counts, metrics.COUNT_COLUMNS)
        run_dir.atomic_write_text(self.out / "summary.json", json.dumps(summary, indent=2) + "\n")
        if plot and rows:
            self.plot(rows, counts)
        return summary

    def plot(self, rows: list, counts: list) -> None:
        """Draws ``curves.png`` (and ``counts.png``) from the rows just written."""
        from jaxnigt.run.plots import count_shares, plot_rows, plot_shares

        name, budget = self.out.name, self.config.budget
        plot_rows([(name, rows)], x="time", out=self.out / "curves.png", budget=budget)
        if counts:
            plot_shares(count_shares(counts), name, out=self.out / "counts.png")


def _begin(config: ExperimentConfig, out: Path, resume: bool) -> tuple[list, list, list]:
    """``(done, rows, count_rows)``: the algorithms an earlier run finished and their rows
    (resume), or nothing (a fresh run: an earlier run's outputs removed, ``config.yaml``
    written)."""
    if not resume:
        if is_writer():
            for name in RUN_OUTPUTS:
                path = out / name
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
            run_dir.atomic_write_text(out / "config.yaml", config_lib.dump(config))
            run_dir.write_trace_record(config, out)
        return [], [], []
    run_dir.check_resumable(config, out)
    done = checkpoint.done_algorithms(out)
    kept = lambda name: [r for r in metrics.read_metrics_raw(out, name) if r["algorithm"] in done]
    return done, kept("metrics.csv"), kept(metrics.COUNTS_FILE)


def run_experiment(
    config: ExperimentConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    plot: bool = True,
    stop: StopFlag | None = None,
) -> dict[str, Any]:
    """Runs every algorithm of ``config`` and writes the run directory; returns the summary.

    A fresh run (``resume=False``) writes into ``out``, created if needed, and replaces the
    files an earlier run left there (whether a used directory may be reused is the caller's
    decision: :func:`jaxnigt.run.run_dir.prepare_run_dir` refuses one).  With ``resume=True``
    (``out`` must hold a run of the same config), algorithms already finished keep their rows
    in ``metrics.csv`` and the one in progress continues from its newest readable checkpoint.
    One process at a time writes a run directory.

    Raises:
      RunDirError: the directory cannot be used or written (``started`` tells whether work
        had begun; :class:`~jaxnigt.run.run_dir.UnusableDirError`: ``out`` itself), or another
        process holds it.
      NotResumableError: ``resume`` and ``out`` holds no run of this config.
      Interrupted: ``stop`` was set; the checkpoint and partial results are written.
    """
    out = Path(out)
    if is_writer():
        run_dir.writable_dir(out, create=not resume)
    with run_dir.run_lock(out) if is_writer() else contextlib.nullcontext():
        try:
            done, rows, count_rows = _begin(config, out, resume)
        except OSError as e:
            raise run_dir.RunDirError(f"run directory {run_dir.describe(e)}") from None
        outputs = _Results(config, out, rows, count_rows)
        if resume:  # the seconds of the earlier sessions (summary.json), summed with this one's
            _restore(outputs, out, done, [a for a in config.algorithms if a not in done])
        try:
            for k, algorithm in enumerate(config.algorithms, 1):
                if algorithm in done:
                    log(f"[jaxnigt] {algorithm}: finished in an earlier run; kept")
                    continue
                label = f"{algorithm} ({k} of {len(config.algorithms)})"
                _run_one(config, algorithm, out, outputs, progress, resume, log, stop, label)
            return outputs.write(plot=plot)
        except run_dir.RunDirError:
            raise
        except OSError as e:
            raise run_dir.RunDirError(
                f"run directory {run_dir.describe(e)}", started=True
            ) from None


def record_algorithm(
    config: ExperimentConfig,
    out: Path,
    algorithm: str,
    m: dict[str, np.ndarray],
    *,
    plot: bool,
    fresh: bool,
) -> None:
    """Writes one finished algorithm's results into the run directory ``out`` of ``config``,
    as :func:`run_experiment` does after running it: a fresh directory (its ``config.yaml``)
    on the first, the earlier algorithms' rows kept after that.  A sweep whose points ran in
    one padded program (:mod:`jaxnigt.run.padded`) writes each point's directory this way.

    Args:
      config: the point's config.
      out: its run directory.
      algorithm: the algorithm that finished.
      m: its results, as :func:`jaxnigt.run.loop.run_algorithm` returns them.
      plot: draw the curves (the point's last algorithm).
      fresh: the directory's first algorithm of this run: an earlier run's outputs there
        are removed (else the finished algorithms' rows are kept).
    """
    out = Path(out)
    if is_writer():
        run_dir.writable_dir(out, create=fresh)
    with run_dir.run_lock(out) if is_writer() else contextlib.nullcontext():
        done, rows, count_rows = _begin(config, out, resume=not fresh)
        outputs = _Results(
            config, out, [r for r in rows if r["algorithm"] != algorithm], count_rows
        )
        _restore(outputs, out, [name for name in done if name != algorithm])
        outputs.add(algorithm, m)
        outputs.write(plot=plot)
        if is_writer():
            checkpoint.mark_done(out, algorithm)


def _restore(outputs: _Results, out: Path, done: list[str], running: list[str] = ()) -> None:
    """The earlier algorithms' timings and diverged seeds, from the directory's summary; the
    seconds it records for the algorithms ``running`` again (continued from a checkpoint)
    become their earlier sessions' (:attr:`_Results.earlier`)."""
    try:
        summary = json.loads((out / "summary.json").read_text()) if done or running else {}
    except (OSError, ValueError):  # none written yet, or unreadable: no earlier seconds
        summary = {}
    for key, entry in summary.items():
        name = key.split("[")[0]
        if name not in done and name not in running:
            continue
        if "diverged_seeds" in entry and name in done:
            outputs.diverged[key] = list(entry["diverged_seeds"])
        if key == name:
            per_update = int(entry.get("trajectories_per_update", -1))
            wall, compile_s = entry.get("wall_seconds", 0.0), entry.get("compile_seconds", 0.0)
            if name in done:
                outputs.timings[name] = (float(wall), float(compile_s), per_update)
            else:
                outputs.earlier[name] = (float(wall), float(compile_s))


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


def _run_one(
    config, algorithm, out: Path, outputs: _Results, progress, resume, log, stop, label: str
) -> None:
    """Runs one algorithm of an experiment and keeps (and writes) its rows; ``label`` names
    it on the progress bar."""
    batch = batch_size(config, algorithm)
    _, slot_mesh = devices.device_plan(config.devices, batch)
    tr = make_trainer(config, algorithm, mesh=slot_mesh)
    log(
        f"[jaxnigt] {algorithm}: env={config.env.name} n={config.cluster.n} "
        f"d={tr.dim} seeds={config.seeds} grid={batch // config.seeds}"
    )
    board = _TensorBoard(out, algorithm) if config.tensorboard and is_writer() else None

    def live(so_far):
        if board is None and not outputs.due():
            return
        m = so_far()
        outputs.partial(algorithm, m)
        if board is not None:
            board(m)

    try:
        m = run_algorithm(
            config,
            algorithm,
            progress=progress,
            trainer=tr,
            run_dir=out,
            resume=resume,
            log=log,
            stop=stop,
            on_chunk=live,
            label=label,
        )
    except Interrupted as e:
        outputs.partial(algorithm, e.partial, force=True)
        raise
    finally:
        if board is not None:
            board.close()
    outputs.add(algorithm, m)
    outputs.write(plot=False)
    if is_writer():  # only process 0 writes; the others hold the same gathered rows
        checkpoint.mark_done(out, algorithm)
    if m["diverged"].any():
        log(f"[jaxnigt] {algorithm}: diverged seeds {np.nonzero(m['diverged'])[0].tolist()}")
