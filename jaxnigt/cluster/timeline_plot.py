"""Drawing a clock's timeline (:class:`~jaxnigt.cluster.timeline.Timeline`) with matplotlib.

:func:`draw` puts workers as rows and time left to right: each counted gradient a bar in the
colour of the round it counts in (central inference: a trajectory, by learner update), wasted
work (cancelled, discarded or refused) hatched, waits for the server link dotted, exchanges
and AllReduces as thin dark bars, power stretches at speed 0 shaded dark and other speeds
shaded with their value, and each round's end a dashed vertical line with every worker's
count ``b_i`` beside it.  Above :data:`MAX_ROWS` workers (or :data:`MAX_BARS` bars) rows
would not be readable: it draws instead how many workers are in each state over time.

matplotlib is imported when a figure is drawn, never with this module (it is not a core
dependency: ``pip install 'jaxnigt[rl]'``).  Every artist carries a ``gid`` naming what it
is (the kind of bar, ``power_down``, ``power_speed``, ``round_end``, ``count``,
``density:<state>``), so a figure can be read back without its pixels.

Example::

    import jax
    from jaxnigt.cluster import make_cluster_model, timeline, timeline_plot

    model = make_cluster_model(4, h="sqrt", kappa=0.5)
    tl = timeline.clock_timeline(model, jax.random.key(0), rule="rennala", rounds=3, M=8)
    ax = timeline_plot.draw(tl, title="Rennala, n = 4, M = 8")
    ax.figure.savefig("rennala.png")
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxnigt.cluster.timeline import KINDS, Timeline

#: The most workers drawn as rows; above it, :func:`draw` draws the workers per state.
MAX_ROWS = 32
#: The most bars drawn one by one; above it, :func:`draw` draws the workers per state.
MAX_BARS = 20_000
#: The most rounds whose counts ``b_i`` are written beside their end.
MAX_COUNTED_ROUNDS = 24

#: How each kind of bar looks: (height, facecolor or None for the round's colour, hatch,
#: edgecolor, legend label).
STYLE = {
    "compute": (0.55, None, None, "white", "gradient that counts (colour: its round)"),
    "trajectory": (0.55, None, None, "white", "trajectory (H steps, their exchanges)"),
    "pending": (0.55, "white", None, "0.45", "gradient still computing at the end"),
    "wasted": (
        0.55,
        (1.0, 1.0, 1.0, 0.4),
        "////",
        "0.35",
        "wasted: cancelled, discarded or refused",
    ),
    "wait": (0.22, "white", "....", "0.45", "waiting for the server link"),
    "exchange": (0.22, "0.12", None, "none", "exchange / AllReduce"),
}
#: The states of the density view, and the kinds of bars each counts.
DENSITY = {
    "computing": ("compute", "trajectory", "pending"),
    "wasting": ("wasted",),
    "exchanging": ("wait", "exchange"),
}


def _pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colour(group: np.ndarray) -> np.ndarray:
    """``[B, 4]`` RGBA: the round's colour (ten colours, in turn)."""
    from matplotlib import colormaps

    return colormaps["tab10"](np.asarray(group) % 10)


def _rects(worker, start, end, height: float) -> list[np.ndarray]:
    """Each bar's four corners, centred on its worker's row."""
    lo, hi = worker - height / 2, worker + height / 2
    return [
        np.array([[s, a], [e, a], [e, b], [s, b]])
        for s, e, a, b in zip(start, end, lo, hi, strict=True)
    ]


def _bars(ax, tl: Timeline) -> None:
    """One collection per kind of bar, ``gid`` the kind."""
    from matplotlib.collections import PolyCollection

    for kind in KINDS:
        bars = tl.bars(kind)
        if not bars["start"].size:
            continue
        height, face, hatch, edge, label = STYLE[kind]
        if kind == "compute" and not tl.round_end.size:  # the per-arrival engines
            label = "gradient applied (colour: its server update)"
        faces = _colour(bars["group"]) if face is None else face
        coll = PolyCollection(
            _rects(bars["worker"], bars["start"], bars["end"], height),
            facecolors=faces,
            edgecolors=edge,
            linewidths=0.6 if edge != "none" else 0.0,
            hatch=hatch,
            label=label,
            zorder=3 if kind in ("exchange", "wait") else 2,
        )
        coll.set_gid(kind)
        ax.add_collection(coll)


def _power(ax, tl: Timeline, right: float) -> None:
    """The power trace's stretches at a speed other than 1, laid over the bars (a bar under
    a dark stretch did no work there)."""
    from matplotlib.collections import PolyCollection

    if tl.power is None:
        return
    start, speed = tl.power
    nxt = np.concatenate([start[:, 1:], np.full((tl.n, 1), np.inf)], axis=1)
    worker = np.broadcast_to(np.arange(tl.n)[:, None], start.shape)
    show = (speed != 1.0) & (start < right) & (nxt > start)
    a, b = start[show], np.minimum(nxt[show], right)
    w, v = worker[show], speed[show]
    kinds = (("power_down", v == 0, "down (speed 0)"), ("power_speed", v > 0, "speed ≠ 1"))
    for gid, mask, label in kinds:
        if not mask.any():
            continue
        alpha = np.where(v[mask] == 0, 0.55, np.clip(np.abs(1 - v[mask]) * 0.4, 0.12, 0.4))
        colour = np.where(v[mask][:, None] > 1, [[0.2, 0.6, 0.2]], [[0.85, 0.45, 0.1]])
        colour = np.where(v[mask][:, None] == 0, [[0.2, 0.2, 0.2]], colour)
        faces = np.concatenate([colour, alpha[:, None]], axis=1)
        rects = _rects(w[mask], a[mask], b[mask], 1.0)
        coll = PolyCollection(rects, facecolors=faces, edgecolors="none", label=label, zorder=3.5)
        coll.set_gid(gid)
        ax.add_collection(coll)
    for x0, x1, y, s in zip(a, b, w, v, strict=True):  # a speed's value where there is room
        if s > 0 and x1 - x0 > right / 25:
            x = (x0 + x1) / 2
            ax.text(x, y - 0.34, f"×{s:g}", ha="center", fontsize=6, gid="power_label")


def _round_ends(ax, tl: Timeline) -> None:
    """Each round's end as a dashed line, with every worker's ``b_i`` just before it."""
    counted = tl.counts is not None and tl.round_end.size <= MAX_COUNTED_ROUNDS
    what = ("learner update", "trajectories") if tl.rule == "seed" else ("round end", "b_i")
    label = f"{what[0]} (numbers: each worker's {what[1]})" if counted else what[0]
    for r, t in enumerate(tl.round_end):
        line = dict(color="0.25", linestyle="--", linewidth=0.8, zorder=4, gid="round_end")
        ax.axvline(t, label=label if r == 0 else "_nolegend_", **line)
        if not counted:
            continue
        for i, b in enumerate(tl.counts[r]):
            size = 7 if tl.n <= 16 else 5
            ax.text(t, i - 0.29, f"{b} ", ha="right", va="bottom", fontsize=size, gid="count")


def _rows(ax, tl: Timeline, right: float) -> None:
    """The rows view: one row per worker (worker 0 on top)."""
    _power(ax, tl, right)
    _bars(ax, tl)
    _round_ends(ax, tl)
    ax.set_ylim(tl.n - 0.5, -0.5)
    step = 1 if tl.n <= 16 else 2
    ax.set_yticks(np.arange(0, tl.n, step))
    ax.set_ylabel("worker")


def workers_per_state(tl: Timeline, kinds: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """How many bars of ``kinds`` are open over time: ``(times, count)``, the count holding
    from each time to the next (a step function)."""
    mask = np.isin(tl.kind, [KINDS.index(k) for k in kinds])
    times = np.concatenate([tl.start[mask], tl.end[mask]])
    step = np.concatenate([np.ones(mask.sum()), -np.ones(mask.sum())])
    at, where = np.unique(times, return_inverse=True)  # a bar ending where the next begins
    change = np.zeros(at.shape)
    np.add.at(change, where, step)
    return np.concatenate([[0.0], at]), np.concatenate([[0.0], np.cumsum(change)])


def _density(ax, tl: Timeline, right: float) -> None:
    """The density view: the workers in each state over time, and the round ends."""
    for state, kinds in DENSITY.items():
        times, count = workers_per_state(tl, kinds)
        ax.step(times, count, where="post", label=f"workers {state}", gid=f"density:{state}")
    if tl.power is not None:
        start, speed = tl.power
        grid = np.linspace(0.0, right, 512)
        idx = np.stack([np.searchsorted(row, grid, side="right") - 1 for row in start])
        down = (np.take_along_axis(speed, idx, axis=1) == 0).sum(axis=0)
        ax.step(grid, down, where="post", label="workers down", color="0.2", gid="density:down")
    for t in tl.round_end:
        ax.axvline(t, color="0.25", linestyle="--", linewidth=0.6, gid="round_end")
    ax.set_ylim(0, tl.n * 1.05)
    ax.set_ylabel(f"workers (of {tl.n})")


def view(tl: Timeline) -> str:
    """``rows`` (a row per worker) or ``density`` (workers per state): what :func:`draw`
    draws for ``tl``."""
    return "rows" if tl.n <= MAX_ROWS and tl.start.size <= MAX_BARS else "density"


def draw(tl: Timeline, ax: Any = None, *, title: str | None = None) -> Any:
    """Draws a timeline (module docstring).

    Args:
      tl: the timeline (:mod:`jaxnigt.cluster.timeline`).
      ax: matplotlib axes to draw on (None: a new figure sized for the workers).
      title: the axes' title (None: the rule and the number of workers).

    Returns:
      The axes (``ax.figure`` is the figure).
    """
    own = ax is None
    if own:
        plt = _pyplot()
        height = 1.8 + (0.36 * tl.n if view(tl) == "rows" else 3.0)
        ax = plt.subplots(figsize=(10, min(height, 14)), layout="constrained")[1]
    right = max(tl.t_end, 1e-9) * 1.01
    (_rows if view(tl) == "rows" else _density)(ax, tl, right)
    ax.set_xlim(0, right)
    ax.set_xlabel("simulated time")
    ax.set_title(title or f"{tl.rule}: n = {tl.n}", fontsize=10)
    if not tl.exact:
        note = f"rule {tl.rule!r} draws its own compute times: its gradients are not drawn"
        ax.text(0.5, 0.02, note, transform=ax.transAxes, ha="center", fontsize=8, gid="note")
    if not ax.get_legend_handles_labels()[0]:  # nothing drawn: no row ends
        pass
    elif own:
        ax.figure.legend(loc="outside lower center", ncols=3, fontsize=7, frameon=False)
    else:
        ax.legend(fontsize=7)
    return ax
