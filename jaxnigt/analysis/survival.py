"""How many seeds reached the target, and when: Kaplan–Meier curves of times to a target.

A seed's time to a target is the first evaluation at or above it; a seed that has not
reached it by the budget B is *right-censored* at B (it may reach it later; the run does not
say).  The Kaplan–Meier estimate of the share of seeds that have reached the target by time
t is ``1 − Π_{t_j <= t} (1 − d_j / r_j)``, over the distinct reaching times t_j, with d_j the
seeds reaching it at t_j and r_j those not yet reached nor censored before t_j.  Every seed
of a run is censored at the same budget, so below B the curve is the plain share of seeds
that reached the target; the estimate comes from ``scipy.stats.ecdf`` on
``scipy.stats.CensoredData``.  The restricted mean time, ``mean(min(T, B))``, is the area
above the curve up to B (:func:`restricted_mean`).

:func:`plot` draws one curve per method (``jaxnigt compare`` writes ``kaplan_meier.png``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def kaplan_meier(times: np.ndarray, budget: float) -> dict[str, Any]:
    """The share of seeds at the target against time, censored at ``budget``.

    Args:
      times: per-seed times to the target (``inf``, or anything past ``budget``: not reached
        within the budget).
      budget: the censoring time B.

    Returns:
      ``{"time": [0, t_1, …], "reached": [0, F(t_1), …], "budget", "seeds",
      "censored"}``: the step function's corners (it holds each value until the next time,
      up to the budget); ``censored`` counts the seeds not at the target by the budget.
    """
    from scipy import stats as sps

    t = np.asarray(times, np.float64)
    hit = t <= budget
    out = {"budget": float(budget), "seeds": int(t.size), "censored": int(np.sum(~hit))}
    if not hit.any():
        return {**out, "time": [0.0], "reached": [0.0]}
    data = sps.CensoredData(uncensored=t[hit], right=np.full(int(np.sum(~hit)), float(budget)))
    sf = sps.ecdf(data).sf
    q = np.asarray(sf.quantiles, np.float64)
    reached = 1.0 - np.asarray(sf.probabilities, np.float64)
    keep = q <= budget
    time = [0.0, *map(float, q[keep])]
    share = [0.0, *map(float, reached[keep])]
    return {**out, "time": time, "reached": share}


def share_at(curve: Mapping[str, Any], t: float) -> float:
    """The curve's share of seeds at the target by time ``t`` (its step value)."""
    idx = int(np.searchsorted(np.asarray(curve["time"]), t, side="right")) - 1
    return float(curve["reached"][max(idx, 0)])


def table(curves: Mapping[str, Mapping[str, Any]]) -> str:
    """The curves as Markdown: per method, the seeds at the target by the budget, the share
    at a quarter, half and all of the budget, and the restricted mean time ``mean(min(T,
    B))``."""
    lines = [
        "| method | seeds at the target by B | share at B/4 | at B/2 | at B | restricted mean "
        "time min(T, B) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, c in curves.items():
        b = c["budget"]
        shares = " | ".join(f"{share_at(c, f * b):.2f}" for f in (0.25, 0.5, 1.0))
        lines.append(
            f"| {name} | {c['seeds'] - c['censored']} of {c['seeds']} | {shares} "
            f"| {restricted_mean(c):.4g} |"
        )
    return "\n".join(lines)


def restricted_mean(curve: Mapping[str, Any]) -> float:
    """``mean(min(T, B))`` from the curve: the area above it up to the budget."""
    time = np.append(np.asarray(curve["time"], np.float64), curve["budget"])
    not_yet = 1.0 - np.asarray(curve["reached"], np.float64)
    return float(np.sum(np.diff(time) * not_yet))


def plot(
    curves: Mapping[str, Mapping[str, Any]],
    path: Path,
    *,
    title: str = "",
    target: float | None = None,
) -> Path:
    """Each method's curve (``{method: kaplan_meier(...)}``) as one step line, the seeds
    not at the target by the budget marked at the budget; written to ``path`` (png, svg, pdf
    by its suffix).  Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 3.6), dpi=120)
    for name, c in curves.items():
        x = [*c["time"], c["budget"]]
        y = [*c["reached"], c["reached"][-1]]
        (line,) = ax.step(x, y, where="post", label=f"{name} ({c['seeds'] - c['censored']}"
                          f"/{c['seeds']} seeds)")  # fmt: skip
        if c["censored"]:
            ax.plot([c["budget"]], [y[-1]], "+", color=line.get_color(), markersize=10)
    budget = max(c["budget"] for c in curves.values())
    ax.set_xlim(0, budget * 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("simulated time")
    what = "the target" if target is None else f"the target ({target:.4g})"
    ax.set_ylabel(f"share of seeds at {what}")
    default = "Kaplan–Meier: seeds at the target by time\n(+: not there by the budget)"
    ax.set_title(title or default, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    from jaxnigt.run.run_dir import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix[1:].lower() or "png"
    try:  # written whole or not at all, through a symlink, never over a device or a pipe
        atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt))
    finally:
        plt.close(fig)
    return path
