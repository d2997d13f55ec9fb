"""Shared helpers of the benchmark modules: configs, timing, tables, subprocesses, metadata.

Timing rule of the suite: the machine is shared and noisy, so every comparison is measured
side by side in one process, with the candidates *interleaved* (A, B, A, B, ...) and the
median of each taken; only ratios of such pairs are meant to be compared across runs.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

SCRIPTS_DIR = Path(__file__).resolve().parent.parent
CHILD_MARKER = "BENCH_RESULT_JSON:"


def make_config(
    env: str,
    *,
    n: int = 10,
    M: int = 20,
    horizon: int | None = None,
    noise: str = "exponential",
    algorithms: Sequence[str] = ("rennala_nigt",),
    async_block: int | None = None,
    async_wave: int | None = None,
    grid: dict[str, list[float]] | None = None,
    seeds: int = 1,
    solver_iterations: int | None = None,
    ls_iterations: int | None = None,
    lanes: float | None = None,
    cluster: dict[str, Any] | None = None,
):
    """An :class:`~jaxnigt.config.ExperimentConfig` for a benchmark (via ``from_dict``).

    h = sqrt profile, κ = 0, a round cap instead of a time budget; M_init = M so round 0 is
    an ordinary round (one compiled shape). ``solver_iterations`` / ``ls_iterations`` set
    the MJX solver (``env.solver_iterations`` / ``env.ls_iterations``; None = brax default).
    ``cluster`` sets more ``cluster:`` keys (the power, the AllReduce, ...).
    """
    from jaxnigt import config as config_lib

    raw: dict[str, Any] = {
        "name": f"bench_{env}",
        "algorithms": list(algorithms),
        "seeds": seeds,
        "budget": None,
        "max_rounds": 1_000_000,
        "env": {
            "name": env,
            "horizon": horizon,
            "solver_iterations": solver_iterations,
            "ls_iterations": ls_iterations,
            "lanes": lanes,
        },
        "cluster": {"n": n, "h": "sqrt", "noise": noise, **(cluster or {})},
        "hparams": {"M": M, "M_init": M, "async_block": async_block, "async_wave": async_wave},
        "eval": {"every": 10, "episodes": 4},
    }
    if grid:
        raw["grid"] = grid
    return config_lib.from_dict(raw)


def compile_timed(fn: Callable, *args: Any) -> tuple[Any, float, float]:
    """``jax.jit(fn)`` lowered and compiled for ``args``: (compiled, lower_s, compile_s)."""
    t0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    return compiled, t1 - t0, time.perf_counter() - t1


_CHUNKS: dict[tuple, tuple] = {}


def compiled_chunk(
    cfg, algorithm: str, rounds: int, *, early_exit: bool = True
) -> tuple[Any, Any, Any, float]:
    """``(trainer, state, compiled run_chunk(·, rounds), lower + compile s)``, once per process.

    The state is ``jit(trainer.init)(key(0), trainer.hyper())``. Benchmarks that time the
    same program share one compilation (in the quick suite: ``overhead``'s and ``gym``'s
    hopper rounds at H = 200, M = 20); every caller gets the first compile time.
    ``early_exit=False`` builds the trainer on the task with ``terminates=False``: rollouts
    then compute all H steps of every trajectory (same trajectories, fixed work).
    """
    from jaxnigt.run.trainer import build_trainer, make_setup, make_trainer

    key = (repr(cfg), algorithm, int(rounds), bool(early_exit))
    if key not in _CHUNKS:
        if early_exit:
            tr = make_trainer(cfg, algorithm)
        else:
            setup = make_setup(cfg, algorithm)
            setup = dataclasses.replace(setup, task=full_horizon(setup.task))
            tr = build_trainer(
                setup,
                algorithm,
                cfg.hparams_for(algorithm),
                eval_episodes=cfg.eval.episodes,
                eval_deterministic=cfg.eval.deterministic,
            )
        state = jax.block_until_ready(jax.jit(tr.init)(jax.random.key(0), tr.hyper()))
        run, lower_s, compile_s = compile_timed(lambda s: tr.run_chunk(s, rounds), state)
        _CHUNKS[key] = (tr, state, run, lower_s + compile_s)
    return _CHUNKS[key]


def full_horizon(task):
    """``task`` with the rollout early exit off (``terminates=False``): every rollout runs
    one scan over all H steps; termination masking, and so every trajectory, is unchanged."""
    return dataclasses.replace(task, terminates=False)


def interleaved(fns: dict[str, Callable[[], Any]], reps: int) -> dict[str, float]:
    """Median wall seconds of each thunk, called round-robin ``reps`` times after a warm-up.

    Interleaving spreads the load of other processes on a shared machine over all
    candidates, so the *ratio* of two medians is much steadier than either median.
    """
    for f in fns.values():
        jax.block_until_ready(f())
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f())
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def format_table(rows: Sequence[dict], columns: Sequence[tuple[str, str, str]]) -> str:
    """Plain-text table; ``columns`` are (key, header, format spec) triples."""
    cells = [[h for _, h, _ in columns]]
    for r in rows:
        line = []
        for key, _, spec in columns:
            v = r.get(key, "")
            if v is None or v == "" or (isinstance(v, float) and v != v):
                line.append("-")
            elif spec and not isinstance(v, str):
                line.append(format(v, spec))
            else:
                line.append(str(v))
        cells.append(line)
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    fmt = lambda c: "  ".join(x.rjust(w) for x, w in zip(c, widths, strict=True))
    out = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    out += [fmt(c) for c in cells[1:]]
    return "\n".join(out)


def to_markdown(table: str) -> str:
    """:func:`format_table` text tables as Markdown tables (columns are separated by two or
    more spaces; each table's dashes line becomes its header rule; tables separated by a
    blank line stay separate tables)."""
    import re

    blocks, block = [], []
    for line in [*table.splitlines(), ""]:
        if line.strip():
            block.append(line)
        elif block:
            blocks.append(block)
            block = []
    out = []
    for lines in blocks:
        rows = []
        for i, line in enumerate(lines):
            cells = re.split(r"\s{2,}", line.strip())
            if i == 1 and all(set(c) <= {"-"} for c in cells):
                rows.append("|" + "---|" * len(cells))
            else:
                rows.append("| " + " | ".join(cells) + " |")
        out.append("\n".join(rows))
    return "\n\n".join(out)


def _pythonpath(first: Path) -> str:
    """``PYTHONPATH`` with ``first`` ahead of what it already holds (a child finds the
    ``benchmarks`` package there)."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(first), *rest])


def run_child(module: str, function: str, kwargs: dict[str, Any], timeout: float = 900) -> dict:
    """Runs ``benchmarks.<module>.<function>(**kwargs)`` in a fresh Python process.

    The child prints its JSON result after :data:`CHILD_MARKER`; used where a measurement
    needs a cold process (compile time, peak RSS).
    """
    code = (
        "import json, sys\n"
        f"from benchmarks import {module} as m\n"
        f"r = m.{function}(**json.loads(sys.argv[1]))\n"
        f"print({CHILD_MARKER!r} + json.dumps(r), flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": _pythonpath(SCRIPTS_DIR)},
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_MARKER):
            return json.loads(line[len(CHILD_MARKER) :])
    raise RuntimeError(
        f"benchmark child {module}.{function}({kwargs}) failed (rc={proc.returncode}):\n"
        + proc.stderr[-3000:]
    )


def cpu_model() -> str:
    """``lscpu``'s model name (falls back to ``platform.processor()``)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def system_info() -> dict[str, Any]:
    """Versions, CPU, core count and JAX backend of this run."""
    versions = {}
    for pkg in ("jax", "jaxlib", "mujoco", "mujoco-mjx", "brax", "optax", "numpy"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "versions": versions,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }
