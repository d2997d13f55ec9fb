"""Plots of run directories: return against simulated time, env steps or communications.

One line per algorithm (and grid point): the median across seeds, with a band between the
20% and 80% quantiles (docs/results.md). Seeds are evaluated at different simulated times, so each
seed's curve is a step function (the last evaluation at or before x) resampled on the union
of all evaluation points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxnigt.cluster.theory import rennala_theory_time
from jaxnigt.run.metrics import COUNTS_FILE, group_curves, read_metrics, seed_curves

X_AXES = {"time": "sim_time", "steps": "env_steps", "comms": "comms"}
X_LABELS = {
    "sim_time": "simulated time",
    "env_steps": "environment steps",
    "comms": "vector communications",
}


class PlotError(ValueError):
    """A plot cannot be drawn as asked: ``param`` names the parameter at fault (``x``, ``y``,
    ``out``), ``reason`` what is wrong; the message is ``param: reason``."""

    def __init__(self, reason: str, *, param: str | None = None):
        super().__init__(f"{param}: {reason}" if param else reason)
        self.param, self.reason = param, reason


def draw_rows(ax, rows: Sequence[dict], *, x: str, y: str, prefix: str = "") -> None:
    """Draws, on the matplotlib axes ``ax``, the median over seeds of ``y`` against the column
    ``x`` for every algorithm (and grid point) of a run's metrics rows (as
    :func:`jaxnigt.run.metrics.metric_rows` makes them or :func:`~jaxnigt.run.metrics.read_metrics`
    reads them back), with the 20/80 % band."""
    for (algorithm, grid), seeds in sorted(group_curves(rows, x=x, y=y).items()):
        xs, ys = seed_curves(seeds)
        med = np.nanmedian(ys, axis=0)
        lo, hi = np.nanquantile(ys, 0.2, axis=0), np.nanquantile(ys, 0.8, axis=0)
        label = algorithm if grid == 0 else f"{algorithm} [grid {grid}]"
        (line,) = ax.step(xs, med, where="post", label=f"{prefix}{label} ({len(seeds)} seeds)")
        ax.fill_between(xs, lo, hi, step="post", alpha=0.2, color=line.get_color())


def draw_curves(ax, run_dir: str | Path, *, x: str, y: str, prefix: str = "") -> None:
    """:func:`draw_rows` of a run directory's ``metrics.csv``."""
    draw_rows(ax, read_metrics(run_dir), x=x, y=y, prefix=prefix)


def formats() -> list[str]:
    """The file extensions a plot can be written as (matplotlib's formats: ``png``, ``pdf``,
    ``svg``, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def output_path(out: str | Path) -> Path:
    """The file a plot asked to go to ``out`` is written to: ``out`` itself, or with
    ``.png`` added when it has no extension (matplotlib's default format).

    Raises:
      PlotError: (``param`` ``out``) an extension matplotlib cannot write; the message lists
        those it can.
    """
    path = Path(out)
    if not path.suffix:
        return path.with_name(f"{path.name}.png")
    if path.suffix[1:].lower() not in formats():
        allowed = ", ".join(f".{f}" for f in formats())
        raise PlotError(
            f"got {str(path)!r}; {path.suffix!r} is no image format: use one of {allowed} "
            "(no extension: .png is added)",
            param="out",
        )
    return path


def save(fig, out: Path) -> None:
    """Writes the figure to ``out`` (from :func:`output_path`; its directory is created)
    atomically, and closes it: a full disk or a read-only directory leaves no partial file,
    and the ``OSError`` names ``out``."""
    import matplotlib.pyplot as plt

    from jaxnigt.run.run_dir import atomic_write

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, lambda tmp: fig.savefig(tmp, format=out.suffix[1:].lower()))
    finally:
        plt.close(fig)


#: The identifying columns of ``metrics.csv``: not a quantity to plot.
ID_COLUMNS = ("algorithm", "grid", "seed", "learning_rate", "eta")


def metric_columns(run_dir: str | Path) -> list[str]:
    """The columns of a run's ``metrics.csv`` that ``plot_runs`` can draw (its header
    without the identifying columns)."""
    with open(Path(run_dir) / "metrics.csv", newline="") as f:
        header = f.readline().strip().split(",")
    return [c for c in header if c and c not in ID_COLUMNS]


def _pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
      out: image path, its extension the format (default ``<first run dir>/curves.png``;
        none: ``.png`` is added).
      budget: mark this simulated-time budget (each seed stops at its first round past it).
      title: figure title (default: the run directory names).

    Returns:
      The path written.

    Raises:
      PlotError: ``x`` is not one of :data:`X_AXES`, ``y`` is not a numeric column of
        every run's ``metrics.csv``, or ``out``'s extension is no image format
        (:func:`output_path`; none: ``.png`` is added).
      MetricsFileError: a ``metrics.csv`` cannot be read (naming it and the row).
      OSError: ``out`` cannot be written (naming it); nothing is left there.
    """
    out = output_path(out if out is not None else Path(run_dirs[0]) / "curves.png")
    if x not in X_AXES:
        raise PlotError(f"got {x!r}; expected one of {sorted(X_AXES)}", param="x")
    runs = [(Path(d).name, read_metrics(d)) for d in run_dirs]  # a damaged file: its name
    for run_dir in run_dirs:
        columns = metric_columns(run_dir)
        if y not in columns:
            raise PlotError(
                f"got {y!r}; {Path(run_dir) / 'metrics.csv'} has the columns {columns}",
                param="y",
            )
    return plot_rows(runs, x=x, y=y, out=out, budget=budget, title=title)


def plot_rows(
    runs: Sequence[tuple[str, Sequence[dict]]],
    *,
    out: str | Path,
    x: str = "time",
    y: str = "eval_return",
    budget: float | None = None,
    title: str | None = None,
) -> Path:
    """:func:`plot_runs` of metrics rows held in memory (a run writing its directory).

    Args:
      runs: ``(name, rows)`` per run: its name (a run directory's) and its metrics rows
        (:func:`jaxnigt.run.metrics.metric_rows`, or read back).
      out: image path, its extension the format (none: ``.png`` is added).
      x: ``time`` (simulated time), ``steps`` (environment steps) or ``comms``.
      y: a column of the rows.
      budget: mark this simulated-time budget.
      title: figure title (default: the runs' names).

    Returns:
      The path written.

    Raises:
      PlotError: ``x`` is not one of :data:`X_AXES`, a run's rows have no column ``y``, or
        ``out``'s extension is no image format.
      OSError: ``out`` cannot be written (naming it); nothing is left there.
    """
    out = output_path(out)
    if x not in X_AXES:
        raise PlotError(f"got {x!r}; expected one of {sorted(X_AXES)}", param="x")
    for name, rows in runs:
        columns = list(dict.fromkeys(k for r in rows for k in r if k not in ID_COLUMNS))
        if rows and y not in columns:
            raise PlotError(f"got {y!r}; {name} has the columns {columns}", param="y")
    xcol = X_AXES[x]
    fig, ax = _pyplot().subplots(figsize=(7, 4.2), dpi=110)
    for name, rows in runs:
        draw_rows(ax, rows, x=xcol, y=y, prefix=f"{name}: " if len(runs) > 1 else "")
    if budget is not None and xcol == "sim_time":
        ax.axvline(budget, color="0.5", lw=0.8, ls=":", label="budget")
    ax.set_xlabel(X_LABELS[xcol])
    ax.set_ylabel(y.replace("_", " "))
    ax.set_title(title or ", ".join(name for name, _ in runs))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    save(fig, out)
    return out


def worker_shares(run_dir: str | Path) -> dict[str, np.ndarray]:
    """Per algorithm (grid point 0): each worker's share of all gradients that entered an
    update, summed over seeds and evaluation intervals (from ``worker_counts.csv``)."""
    return count_shares(read_metrics(run_dir, COUNTS_FILE))


def count_shares(count_rows: Sequence[dict]) -> dict[str, np.ndarray]:
    """:func:`worker_shares` of the rows of ``worker_counts.csv`` (as
    :func:`jaxnigt.run.metrics.worker_count_rows` makes them, or read back)."""
    rows = [r for r in count_rows if int(r["grid"]) == 0]
    workers = sorted(
        (k for k in rows[0] if k[:1] == "w" and k[1:].isdigit()), key=lambda k: int(k[1:])
    )
    totals: dict[str, np.ndarray] = {}
    for r in rows:
        counts = np.array([_number(r[w]) for w in workers], np.float64)
        totals[r["algorithm"]] = totals.get(r["algorithm"], 0.0) + counts
    return {a: t / max(t.sum(), 1.0) for a, t in totals.items()}


def plot_counts(run_dir: str | Path, *, out: str | Path | None = None, title: str | None = None):
    """Who did the work: a stacked bar per algorithm of each worker's share of the gradients.

    Args:
      run_dir: a run directory with ``worker_counts.csv`` (runs with n <= 64 write it).
      out: image path, its extension the format (default ``<run_dir>/counts.png``; none:
        ``.png`` is added).
      title: figure title (default: the run directory name).

    Returns:
      The path written (``.png`` added to an ``out`` without an extension).

    Raises:
      PlotError: ``out``'s extension is no image format (:func:`output_path`).
      OSError: ``out`` cannot be written (naming it); nothing is left there.
    """
    out = output_path(out if out is not None else Path(run_dir) / "counts.png")
    return plot_shares(worker_shares(run_dir), Path(run_dir).name, out=out, title=title)


def plot_shares(
    shares: dict[str, np.ndarray], name: str, *, out: str | Path, title: str | None = None
) -> Path:
    """:func:`plot_counts` of the shares :func:`count_shares` gives, for the run called ``name``
    (the default title's); ``out`` as there."""
    plt = _pyplot()
    out = output_path(out)
    n = len(next(iter(shares.values())))
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 1.0, n))
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(shares) + 1.6), dpi=110)
    names = list(shares)
    left = np.zeros(len(names))
    for i in range(n):
        width = np.array([shares[a][i] for a in names])
        ax.barh(names, width, left=left, color=colors[i], edgecolor="white", linewidth=0.3)
        for y, (x0, w) in enumerate(zip(left, width, strict=True)):
            if w >= 0.06:
                ax.text(x0 + w / 2, y, f"w{i}", ha="center", va="center", fontsize=7)
        left += width
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the gradients that entered an update (worker 0 = w0, left)")
    ax.set_title(title or f"{name}: who did the work ({n} workers)")
    ax.invert_yaxis()
    fig.tight_layout()
    save(fig, out)
    return out


def _number(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def rennala_round_time(run_dir: str | Path) -> float:
    """Rennala NIGT's theoretical round time of a run directory's cluster (deterministic
    times): min_m (Σ_{i≤m} 1/h_(i))^{-1} (M + m) plus the AllReduce (max_i κ_i)."""
    from jaxnigt import config

    cfg = config.from_dict(config.read_yaml(Path(run_dir) / "config.yaml"))
    return round_time(cfg)


def round_time(cfg) -> float:
    """:func:`rennala_round_time` of a config."""
    from jaxnigt.run.trainer import make_setup

    setup = make_setup(cfg, "rennala_nigt")
    M = cfg.hparams_for("rennala_nigt").M
    return rennala_theory_time(np.asarray(setup.cluster.h), M) + float(np.max(setup.cluster.kappa))


def _sweep_panel(ax, groups: dict[str, list[dict]], key: str, f: str) -> None:
    """One target fraction: median time to target and the 20/80 % band per group."""
    for label, rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: _number(r[key]))
        xs = np.array([_number(r[key]) for r in rs])
        med, lo, hi = (
            np.array([_number(r[f"time_to_{f}{s}"]) for r in rs]) for s in ("", "_q20", "_q80")
        )
        med, lo, hi = (np.where(np.isfinite(v), v, np.nan) for v in (med, lo, hi))
        (line,) = ax.plot(xs, med, marker="o", label=label)
        ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
    ax.set_title(f"time to {float(f):.0%} of the improvement")
    ax.set_xlabel(key)
    ax.set_ylabel("simulated time")
    ax.grid(alpha=0.3)


def _round_time_axis(ax, times: Callable[[str], float], rows: list[dict], key: str) -> None:
    """Rennala NIGT's theoretical round time per n on a second y axis (``times``: a point's
    name to its round time)."""
    points = sorted({r["point"]: _number(r[key]) for r in rows}.items(), key=lambda t: t[1])
    twin = ax.twinx()
    twin.plot(
        [v for _, v in points],
        [times(p) for p, _ in points],
        color="0.4",
        ls="--",
        label="Rennala round time (theory, + AllReduce)",
    )
    twin.set_ylabel("Rennala round time (theory)", color="0.4")
    twin.legend(fontsize=7, loc="lower right")


def plot_sweep(sweep_dir: str | Path, *, x: str | None = None, out: str | Path | None = None):
    """Time to the sweep's targets against the swept value, per algorithm (``sweep.csv``).

    One panel per target fraction: the median over seeds, with the 20 %/80 % band across
    seeds; log x for ``cluster.n`` (and for any positive axis spanning more than 10×). For
    ``cluster.n`` sweeps a second axis shows Rennala NIGT's theoretical round time.
    Returns the path written (``.png`` added to an ``out`` without an extension); raises
    :class:`PlotError` when ``x`` is not a swept key or ``out``'s extension is no image
    format, ``OSError`` (naming ``out``) when ``out`` cannot be written.
    """
    import json

    from jaxnigt.run.metrics import read_metrics_raw

    sweep_dir = Path(sweep_dir)
    out = output_path(out if out is not None else sweep_dir / "sweep.png")
    axes = json.loads((sweep_dir / "sweep.json").read_text())["axes"]
    rows = read_metrics_raw(sweep_dir, "sweep.csv")
    times = lambda point: rennala_round_time(sweep_dir / point)
    return plot_sweep_rows(rows, axes, sweep_dir.name, times, x=x, out=out)


def plot_sweep_rows(
    rows: Sequence[dict],
    axes: Mapping[str, Sequence[Any]],
    name: str,
    round_times: Callable[[str], float],
    *,
    out: str | Path,
    x: str | None = None,
) -> Path:
    """:func:`plot_sweep` of the rows of ``sweep.csv`` held in memory (a sweep writing its
    directory): ``axes`` its swept keys and values, ``name`` the sweep's, ``round_times`` a
    point's name to Rennala NIGT's round time (:func:`round_time`)."""
    plt = _pyplot()
    out = output_path(out)
    key = x or next(iter(axes))
    if key not in axes:
        raise PlotError(f"{key!r} is not a swept key; swept: {list(axes)}", param="x")
    rows = [r for r in rows if r.get("status") == "done"]
    fractions = (
        sorted({k.split("_")[2] for k in rows[0] if k.startswith("time_to_")}) if rows else []
    )
    fig, panels = plt.subplots(1, max(len(fractions), 1), figsize=(11, 4.2), dpi=100, squeeze=False)
    others = [k for k in axes if k != key]
    groups: dict[str, list[dict]] = {}
    for r in rows:
        label = r["algorithm"] + "".join(f", {k}={r[k]}" for k in others)
        groups.setdefault(label, []).append(r)
    for ax, f in zip(panels[0], fractions, strict=False):
        _sweep_panel(ax, groups, key, f)
        numeric = [_number(v) for v in axes[key]]
        if key == "cluster.n" or (all(v > 0 for v in numeric) and max(numeric) > 10 * min(numeric)):
            # limits from the swept values: a panel may have no finite time (never reached)
            ax.set_xlim(min(numeric) / 1.25, max(numeric) * 1.25)
            ax.set_xscale("log")
        if key == "cluster.n":
            _round_time_axis(ax, round_times, rows, key)
    panels[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{name}: time to target against {key}")
    fig.tight_layout()
    save(fig, out)
    return out
