"""Plots of run directories: return against simulated time, env steps or communications.

One line per algorithm (and grid point): the median across seeds, with a band between the
20% and 80% quantiles (SPEC §8). Seeds are evaluated at different simulated times, so each
seed's curve is a step function (the last evaluation at or before x) resampled on the union
of all evaluation points.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxnigt.results import group_curves, read_metrics, seed_curves

X_AXES = {"time": "sim_time", "steps": "env_steps", "comms": "comms"}
X_LABELS = {
    "sim_time": "simulated time",
    "env_steps": "environment steps",
    "comms": "vector communications",
}


def plot_runs(
    run_dirs: Sequence[str | Path],
    *,
    x: str = "time",
    y: str = "eval_return",
    out: str | Path | None = None,
    budget: float | None = None,
    title: str | None = None,
):
    """Plots median and 20/80% quantile bands of ``y`` against ``x`` for every algorithm.

    Args:
      run_dirs: run directories written by ``jaxnigt run``.
      x: ``time`` (simulated time), ``steps`` (environment steps) or ``comms``.
      y: a metrics column (``eval_return``, ``train_return``, ``eval_type0``, ...).
      out: PNG path (default ``<first run dir>/curves.png``).
      budget: mark this simulated-time budget (each seed stops at its first round past it).
      title: figure title (default: the run directory names).

    Returns:
      The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if x not in X_AXES:
        raise ValueError(f"x must be one of {sorted(X_AXES)}, got {x!r}")
    xcol = X_AXES[x]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    multi = len(run_dirs) > 1
    for run_dir in run_dirs:
        rows = read_metrics(run_dir)
        for (algorithm, grid), seeds in sorted(group_curves(rows, x=xcol, y=y).items()):
            xs, ys = seed_curves(seeds)
            med = np.nanmedian(ys, axis=0)
            lo, hi = np.nanquantile(ys, 0.2, axis=0), np.nanquantile(ys, 0.8, axis=0)
            label = algorithm if grid == 0 else f"{algorithm} [grid {grid}]"
            if multi:
                label = f"{Path(run_dir).name}: {label}"
            (line,) = ax.step(xs, med, where="post", label=f"{label} ({len(seeds)} seeds)")
            ax.fill_between(xs, lo, hi, step="post", alpha=0.2, color=line.get_color())
    if budget is not None and xcol == "sim_time":
        ax.axvline(budget, color="0.5", lw=0.8, ls=":", label="budget")
    ax.set_xlabel(X_LABELS[xcol])
    ax.set_ylabel(y.replace("_", " "))
    ax.set_title(title or ", ".join(Path(d).name for d in run_dirs))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out = Path(out) if out is not None else Path(run_dirs[0]) / "curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
