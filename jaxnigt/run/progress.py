"""What a running program shows and measures on the host: its progress bar, the time JAX
spends compiling it, and a wait for its results that stays responsive to signals.

Used by the run loop (:mod:`jaxnigt.run.loop`), one algorithm's vmapped program at a time.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

import jax

# Compile timing and the progress bar of run_algorithm.
# Tracing, lowering and XLA compilation: what "compile seconds" counts.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


@contextlib.contextmanager
def compile_seconds(run: Any) -> Iterator[None]:
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


def wait(tree: Any, stop: Any = None) -> Any:
    """Waits for a dispatched computation while staying responsive to signals (a blocking
    transfer would hold the main thread, and with it every signal handler, for a whole
    chunk).  Raises :class:`~jaxnigt.run.signals.ChunkDropped` once ``stop`` (a
    :class:`~jaxnigt.run.signals.StopFlag`) says the chunk is overdue after a signal."""
    from jaxnigt.run.signals import ChunkDropped

    leaves = [x for x in jax.tree.leaves(tree) if hasattr(x, "is_ready")]
    while not all(x.is_ready() for x in leaves):
        if stop is not None and stop.overdue():
            raise ChunkDropped(f"the chunk was still running {stop.grace:g} s after the signal")
        time.sleep(0.02)
    return tree


class Progress:
    """tqdm bar over simulated time (or rounds), disabled when not wanted.

    It shows the simulated time (or rounds) every running seed has reached, its rate:
    simulated time (``sim-t``) or rounds per wall-clock second, counted from :meth:`start`
    (after compilation, so the rate and the time left exclude compiling), the rounds done and
    ``eval_median``, the median over the running seeds of their latest evaluation.
    """

    def __init__(self, enabled: bool, total: float, desc: str, unit: str):
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=round(total, 2),
                desc=desc,
                unit=unit,
                leave=True,
                dynamic_ncols=True,
                postfix={"status": "compiling"},
            )

    started = False

    @classmethod
    def of(cls, run: Any, enabled: bool, desc: str) -> Progress:
        """The bar of ``run``: over its budget of simulated time, else over its rounds."""
        if math.isfinite(run.budget):
            return cls(enabled, run.budget, desc, unit=" sim-t")
        return cls(enabled, run.max_rounds, desc, unit=" rounds")

    def start(self, *, once: bool = False) -> None:
        """Counts the rate (and the time left) from now on, from where the bar stands
        (``once``: unless it was started before)."""
        if once and self.started:
            return
        self.started = True
        if self.bar is not None:
            self.bar.start_t = self.bar.last_print_t = self.bar._time()
            self.bar.initial = self.bar.last_print_n = self.bar.n

    def update(self, value: float, **postfix: Any) -> None:
        if self.bar is not None:
            self.bar.n = round(min(value, self.bar.total), 2)
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
