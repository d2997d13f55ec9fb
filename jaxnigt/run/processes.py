"""Independent jobs in parallel processes: one per core where one run cannot use them all.

A tuning program is one jitted run; on a CPU host an MJX program keeps about one core busy,
and sharding its batch over forced host devices is slower (docs/benchmarks.md, "devices").
A tuning's programs are independent run directories, so the way to use every core is one
*process* per program: :class:`Pool` (and :func:`run_all` on it) starts at most ``workers``
fresh (``spawn``) processes, each importing JAX on its own (≈ 10 s: it pays for programs of
minutes, not seconds; docs/benchmarks.md, "jobs"), and hands each a job
``fn(*args, stop=flag)``.

* ``workers == 1`` runs the jobs here, in order, with the caller's ``stop`` flag (the
  behaviour without this module).
* A job's outputs are its files (a run directory, written atomically), so results do not
  depend on the number of workers: each program is the same jitted computation.
* **Signals.** A child ignores SIGINT (a terminal's Ctrl-C reaches the whole process group)
  and stops on SIGTERM after its chunk, checkpointing as a run does
  (:mod:`jaxnigt.run.signals`).  When the caller's ``stop`` is set, the parent sends SIGTERM to
  every child once, starts nothing new and raises the first child's
  :class:`~jaxnigt.run.signals.Interrupted` after all have ended.
* **Orphans.** A child whose parent dies without stopping it (SIGKILL, an unhandled
  SIGTERM) stops itself the same way within a second.
* **Errors.** A job that raises stops the rest the same way (their finished chunks are kept)
  and its exception is raised again here, with the child's traceback as its ``__cause__``
  text; a child that dies without a word (killed, out of memory) is a :class:`JobError`.
"""

from __future__ import annotations

import abc
import multiprocessing
import os
import pickle
import queue as queue_lib
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

POLL_S = 0.2


class JobError(RuntimeError):
    """A child process ended without reporting (killed) or with an exception that could not
    be sent back; the message names the job."""


def run_all(
    fn: Callable[..., Any],
    jobs: Sequence[tuple],
    *,
    workers: int = 1,
    names: Sequence[str] | None = None,
    stop=None,
) -> None:
    """Calls ``fn(*args, stop=flag)`` for every ``args`` of ``jobs``, at most ``workers`` at a
    time in child processes (``workers == 1``: here, in order, ``flag = stop``).  ``fn`` must be
    importable by name (a module-level function) and ``args`` picklable; ``names`` label the
    jobs in errors.  Returns when every job has finished; raises as the module docstring says."""
    names = list(names) if names is not None else [f"job {i}" for i in range(len(jobs))]
    with Pool(fn, workers=workers, stop=stop) as pool:
        for args, name in zip(jobs, names, strict=True):
            pool.submit(args, name)
        while pool.busy:
            pool.wait()


def _child(fn, args, index: int, reports) -> None:
    """A child's body: SIGINT ignored, SIGTERM stops the job after its chunk."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from jaxnigt.run import signals

    threading.Thread(target=_orphan_watch, args=(os.getppid(),), daemon=True).start()
    try:
        with signals.stop_on_signals((signal.SIGTERM,)) as flag:
            fn(*args, stop=flag)
    except BaseException as e:  # every outcome goes to the parent
        reports.put((index, _portable(e), traceback.format_exc()))
        raise SystemExit(1) from None
    reports.put((index, None, ""))


def _orphan_watch(parent: int) -> None:
    """Stops this child (SIGTERM to itself: after its chunk) once its parent is gone, e.g.
    killed with SIGKILL or by a SIGTERM it did not handle, so no job runs on unwatched."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def _portable(error: BaseException) -> bytes:
    """``error`` pickled, if it survives the round trip; else a :class:`JobError` with its
    text (an exception whose ``__init__`` does not take its ``args`` does not unpickle)."""
    try:
        data = pickle.dumps(error)
        pickle.loads(data)
        return data
    except Exception:
        return pickle.dumps(JobError(f"{type(error).__name__}: {error}"))


class JobQueue(abc.ABC):
    """What every executor keeps: the jobs submitted (``submit``), which were returned by
    ``wait`` (``busy``), and a ``with`` block that closes it (:meth:`close`)."""

    def __init__(self):
        self.jobs: list[tuple] = []
        self.names: list[str] = []
        self.queued: list[int] = []
        self.reported: set[int] = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None:
        """Stops what still runs (each executor its own way)."""

    @property
    def busy(self) -> bool:
        """Jobs submitted and not yet returned by ``wait``."""
        return len(self.reported) < len(self.jobs)

    def submit(self, args: tuple, name: str) -> int:
        """Queues a job; returns its id (0, 1, ... in submission order)."""
        self.jobs.append(tuple(args))
        self.names.append(name)
        self.queued.append(len(self.jobs) - 1)
        return len(self.jobs) - 1


class Pool(JobQueue):
    """Jobs ``fn(*args, stop=flag)`` submitted one by one and waited for as they finish, at
    most ``workers`` at a time in child processes (``workers == 1``: each runs here, in the
    order submitted, when :meth:`wait` is called, with ``flag = stop``).  A scheduler that
    learns what to run next from what has finished (:func:`jaxnigt.studies.tuning.tune`) keeps every
    worker busy with it.  Use it as a context manager: leaving it stops what still runs."""

    def __init__(self, fn: Callable[..., Any], *, workers: int = 1, stop=None):
        if workers < 1:
            raise ValueError(f"workers: got {workers}; expected >= 1")
        super().__init__()
        self.fn, self.workers, self.stop = fn, workers, stop
        self.running: dict[int, Any] = {}
        self.outcome: dict[int, tuple] = {}
        self.stopping = False
        self.ctx = multiprocessing.get_context("spawn") if workers > 1 else None
        self.reports = self.ctx.Queue() if self.ctx else None

    def wait(self) -> list[int]:
        """Blocks until at least one job finishes; returns the ids of those finished since the
        last call.  A failed job, or the caller's ``stop``, stops the others and raises (the
        module docstring)."""
        if not self.busy:
            raise ValueError("wait: no job is queued or running")
        if self.ctx is None:  # here, in order
            i = self.queued.pop(0)
            self.fn(*self.jobs[i], stop=self.stop)
            self.reported.add(i)
            return [i]
        while True:
            while self.queued and not self.stopping and len(self.running) < self.workers:
                self._start(self.queued.pop(0))
            self._poll()
            if not self.stopping and self._should_stop():
                self._terminate()
            if self.stopping and not self.running:
                self._raise()
            done = [i for i in self.outcome if i not in self.reported]
            if done and not self.stopping:
                self.reported.update(done)
                return sorted(done)

    def close(self) -> None:
        """Stops the children still running (SIGTERM: after their chunk) and waits for them."""
        for p in self.running.values():
            p.terminate()
            p.join()
        self.running.clear()
        if self.reports is not None:
            self.reports.close()
            self.reports.join_thread()
            self.reports = None

    def _start(self, i: int) -> None:
        p = self.ctx.Process(
            target=_child, args=(self.fn, self.jobs[i], i, self.reports), name=self.names[i]
        )
        p.start()
        self.running[i] = p

    def _poll(self) -> None:
        try:
            self._record(*self.reports.get(timeout=POLL_S))
        except queue_lib.Empty:
            pass
        for i, p in list(self.running.items()):
            if p.exitcode is None:
                continue
            p.join()
            del self.running[i]
            if i not in self.outcome:  # its report may still be in the pipe
                try:
                    while i not in self.outcome:
                        self._record(*self.reports.get(timeout=1.0))
                except queue_lib.Empty:
                    self.outcome[i] = (self._silent(i, p.exitcode), "")

    def _record(self, i: int, error: bytes | None, text: str) -> None:
        self.outcome[i] = (None if error is None else pickle.loads(error), text)

    def _silent(self, i: int, exitcode: int) -> BaseException:
        """The outcome of a child that ended without a report: stopped by our SIGTERM before
        its handler was installed, or killed from outside."""
        from jaxnigt.run import signals

        if self.stopping and exitcode == -signal.SIGTERM:
            return signals.Interrupted(signal.SIGTERM, self.names[i], 0)
        return JobError(
            f"{self.names[i]}: the process ended (exit code {exitcode}) without a report"
        )

    def _should_stop(self) -> bool:
        failed = any(error is not None for error, _ in self.outcome.values())
        return failed or bool(self.stop is not None and self.stop.requested)

    def _terminate(self) -> None:
        self.stopping = True
        for p in self.running.values():
            p.terminate()  # SIGTERM: the child finishes its chunk and checkpoints

    def _raise(self) -> None:
        from jaxnigt.run import signals

        errors = [(i, e, t) for i, (e, t) in sorted(self.outcome.items()) if e is not None]
        first = next((x for x in errors if not isinstance(x[1], signals.Interrupted)), None)
        if first is None and errors:  # only interruptions
            first = errors[0]
        if first is not None:
            i, error, text = first
            if isinstance(error, signals.Interrupted) and self.stop is not None:
                error.signum = self.stop.signum or error.signum
            raise error from JobError(f"in {self.names[i]}:\n{text}")
        raise signals.Interrupted(self.stop.signum, "the jobs not yet started", 0)
