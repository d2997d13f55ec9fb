"""Stopping a run on a signal: the first SIGTERM/SIGINT asks the run loop to finish its chunk,
write a checkpoint and the partial results, and raise :class:`Interrupted`; a second exits at
once.  Every result file is written atomically, so what is on disk is whole either way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

import numpy as np


class Interrupted(RuntimeError):
    """The run stopped on a signal after a checkpoint and the partial results were written."""

    def __init__(self, signum: int, algorithm: str, chunks: int):
        name = signal.Signals(signum).name
        super().__init__(f"{name} received: {algorithm} stopped after chunk {chunks}")
        self.signum, self.algorithm, self.chunks = signum, algorithm, chunks
        self.partial: dict[str, np.ndarray] = {}  # the algorithm's results so far

    def __reduce__(self):  # to cross a process boundary (jaxnigt.processes), results stay
        return type(self), (self.signum, self.algorithm, self.chunks)

    @property
    def exit_status(self) -> int:
        """The shell's status of a process killed by the signal (128 + its number)."""
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
def stop_on_signals(signals=(signal.SIGTERM, signal.SIGINT)) -> Iterator[StopFlag]:
    """Yields a :class:`StopFlag`: the first signal asks the run to finish its chunk, write a
    checkpoint and the partial results and stop; a second one exits at once (files already
    written stay whole: every write is atomic).  The previous handlers are restored on exit."""
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
