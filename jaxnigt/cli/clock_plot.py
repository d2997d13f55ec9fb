"""``jaxnigt clock --plot FILE``: the timeline of the rows the clock prints, drawn.

:mod:`jaxnigt.cli.clock` registers the flag (:func:`add_arguments`) and checks it with the
others (:func:`path`: matplotlib is there, the extension is an image format, the file can
be written and is neither the CSV nor a run directory's own); :mod:`jaxnigt.cli.clock_output`
builds the timeline from the same arrays it writes to the CSV
(:mod:`jaxnigt.cluster.timeline`) and :func:`save` draws it
(:mod:`jaxnigt.cluster.timeline_plot`; more than 32 workers: the workers per state over time).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from jaxnigt.cluster import timeline_plot
from jaxnigt.cluster.timeline import Timeline
from jaxnigt.run import run_dir


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Registers ``--plot``."""
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="also draw the timeline of the rows it writes: workers as rows, time left to right "
        "(.png, .svg, .pdf, ...: its extension; no extension: .png; more than "
        f"{timeline_plot.MAX_ROWS} workers: the workers in each state over time)",
    )


def path(raw: str | None, out: str) -> str | None:
    """The file ``--plot`` writes (``.png`` added to a name without extension), None when it
    is not given.

    Args:
      raw: the flag's value.
      out: the CSV's path (``--out``).

    Raises:
      ValueError: it cannot be drawn or written there (the message, without the flag).
    """
    if raw is None:
        return None
    try:
        from jaxnigt.run.plots import PlotError, output_path
    except ImportError:  # no matplotlib: the core install
        raise ValueError("drawing needs matplotlib: pip install 'jaxnigt[rl]'") from None
    try:
        found = str(output_path(raw))
    except PlotError as e:
        raise ValueError(e.reason) from None
    parent = os.path.dirname(os.path.abspath(found))
    if os.path.isdir(found) or not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise ValueError(f"expected a file path in an existing, writable directory, got {raw!r}")
    if os.path.abspath(found) == os.path.abspath(out):
        raise ValueError(f"{found!r} is also the CSV's path (--out); choose another")
    if problem := run_dir.not_replaceable(found):
        raise ValueError(problem)
    if run_dir.run_file(found):
        raise ValueError(f"{found!r} is a run directory's own file; choose another path")
    return found


def title(settings: Any, cluster: Any) -> str:
    """The picture's title: the rule, its sizes and the cluster's choices."""
    rule = settings.rule
    parts = [f"{rule}: n = {cluster.n}"]
    if rule not in ("async", "ringmaster", "seed"):
        parts.append(f"{'m' if rule == 'msync' else 'M'} = {settings.M}")
        parts += [f"inflight = {cluster.inflight}", f"allreduce = {cluster.allreduce}"]
    else:
        parts.append(f"link = {cluster.link}")
        if rule == "ringmaster":
            parts.append(f"R = {settings.R}{' (stops)' if settings.stops else ''}")
    if getattr(settings, "power", "constant") != "constant":
        parts.append(f"power = {settings.power}")
    return ", ".join(parts)


def save(settings: Any, cluster: Any, tl: Timeline) -> str:
    """Draws ``tl`` to ``settings.plot`` (atomically) and returns the line that says so."""
    from jaxnigt.run.plots import save as save_figure

    ax = timeline_plot.draw(tl, title=title(settings, cluster))
    save_figure(ax.figure, Path(settings.plot))
    what = "timeline" if timeline_plot.view(tl) == "rows" else "workers per state over time"
    return f"[jaxnigt] wrote {settings.plot} ({what})"
