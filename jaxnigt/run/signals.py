"""Stopping a run on a signal: the first SIGTERM/SIGINT asks the run loop to finish its chunk,
write a checkpoint and the partial results, and raise :class:`Interrupted`; a second exits at
once.  Every result file is written atomically, so what is on disk is whole either way.

A chunk still running :data:`GRACE` seconds after the first signal is dropped (a chunk of a
huge run can take minutes, longer than a scheduler's grace before it kills): the run stops at
the state before that chunk, checkpointed, and a resume runs the chunk again, so nothing is
lost but its time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np


class Interrupted(RuntimeError):
    """The run stopped on a signal after a checkpoint and the partial results were written."""

    def __init__(self, signum: int, algorithm: str, chunks: int):
        name = signal.Signals(signum).name
        super().__init__(f"{name} received: {algorithm} stopped after chunk {chunks}")
        self.signum, self.algorithm, self.chunks = signum, algorithm, chunks
        self.partial: dict[str, np.ndarray] = {}  # the algorithm's results so far

    def __reduce__(self):  # to cross a process boundary (jaxnigt.run.processes), results stay
        return type(self), (self.signum, self.algorithm, self.chunks)

    @property
    def exit_status(self) -> int:
        """The shell's status of a process killed by the signal (128 + its number)."""
        return 128 + self.signum


#: Seconds a chunk may go on after the first signal before it is dropped (SLURM's default
#: grace between SIGTERM and SIGKILL is 30 s); the environment's ``JAXNIGT_STOP_GRACE`` sets
#: another.
GRACE = 20.0


class ChunkDropped(RuntimeError):
    """The chunk in flight was still running :attr:`StopFlag.grace` seconds after the first
    signal: the run stops at the state before it."""


class StopFlag:
    """Set by the first SIGTERM/SIGINT (see :func:`stop_on_signals`); the run loop checks it
    after every chunk, and while it waits for one (:func:`jaxnigt.run.progress.wait`) drops
    a chunk still running ``grace`` seconds after the signal.

    Attributes:
      signum: the first signal's number (None before one).
      received: signals delivered while the flag was installed.
      at: ``time.monotonic()`` of the first signal.
      grace: seconds a chunk may go on after it.
      chunk_seconds: the wall time of the run's last chunk (what the message quotes).
    """

    def __init__(self, grace: float | None = None):
        self.signum: int | None = None
        self.received = 0
        self.at: float | None = None
        self.grace = float(os.environ.get("JAXNIGT_STOP_GRACE", GRACE)) if grace is None else grace
        self.chunk_seconds: float | None = None
        self._lock = threading.Lock()

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def overdue(self) -> bool:
        """Whether the chunk in flight has run past the grace since the first signal."""
        return self.at is not None and time.monotonic() - self.at > self.grace

    def _request(self, signum: int) -> None:
        """The first signal: ask the run to stop after its chunk (and say so, once)."""
        with self._lock:
            if self.signum is not None:
                return
            self.signum, self.at = signum, time.monotonic()
        took = self.chunk_seconds
        each = f" (a chunk took {took:.3g} s)" if took is not None else ""
        print(
            f"[jaxnigt] {signal.Signals(signum).name}: finishing the current chunk{each}, then "
            f"checkpoint and stop; a chunk still running in {self.grace:g} s is dropped and "
            "runs again when the run is resumed (again to stop at once)",
            file=sys.stderr,
            flush=True,
        )


def _count_deliveries(fd: int, flag: StopFlag, watched: frozenset[int]) -> None:
    """Reads the signal numbers the interpreter writes to its wakeup fd, one byte per
    delivery: the first asks the run to stop, the second exits the process at once."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum not in watched:
                continue
            flag.received += 1
            if flag.received >= 2:
                os._exit(128 + signum)
            flag._request(signum)


@contextlib.contextmanager
def stop_on_signals(signals=(signal.SIGTERM, signal.SIGINT)) -> Iterator[StopFlag]:
    """Yields a :class:`StopFlag`: the first signal asks the run to finish its chunk, write a
    checkpoint and the partial results and stop; a second one exits at once (files already
    written stay whole: every write is atomic).  The previous handlers are restored on exit.

    Deliveries are counted from the interpreter's wakeup fd (:func:`signal.set_wakeup_fd`:
    one byte per signal, written at once) by a watcher thread, not by the Python-level
    handler, which runs only between bytecodes: two signals that arrive while the main
    thread is busy in a long call (a compilation, a chunk) would reach that handler as one.
    """
    flag = StopFlag()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    watcher = threading.Thread(
        target=_count_deliveries, args=(read_fd, flag, frozenset(signals)), daemon=True
    )

    def handler(signum, frame):
        del frame
        flag._request(signum)  # at once if the watcher has not read the byte yet

    old = {s: signal.signal(s, handler) for s in signals}
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher.start()
    try:
        yield flag
    finally:
        signal.set_wakeup_fd(old_fd)
        for s, h in old.items():
            signal.signal(s, h)
        os.close(write_fd)  # the watcher reads end-of-file and returns
        watcher.join(timeout=5)
        os.close(read_fd)
