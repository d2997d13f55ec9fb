"""``jaxnigt clock``'s computation power: the flags ``--power`` and ``--power-horizon`` and what
they need beyond the config's own checks of ``cluster.power`` (:mod:`jaxnigt.cli.clock` reads
them through :class:`~jaxnigt.config.schema.ClusterConfig`, as every cluster flag, and builds
the model; docs/cluster_model.md, "Computation power").

The clock has no budget, so a drawn or periodic power needs ``--power-horizon``, the time its
trace covers; it runs its rounds whatever their time, so a trace file in which every worker is
down for good from some time on is refused; and a trace is sized from its spec before it is
built (:func:`jaxnigt.run.sizing.trace_size`), as ``jaxnigt plan`` sizes a run's.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from jaxnigt.cluster import power_sources
from jaxnigt.config import loader
from jaxnigt.run import sizing


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Registers ``--power`` and ``--power-horizon`` (text: checked by the config's schema)."""
    p.add_argument(
        "--power",
        default="constant",
        help=f"each worker's computation power over time: {power_sources.SOURCE_TEXT} (a CSV of "
        "worker,start,speed rows; docs/cluster_model.md)",
    )
    p.add_argument(
        "--power-horizon",
        default=None,
        help="the simulated time a drawn (outages) or periodic --power covers (required with them)",
    )


def problem(cluster: Any) -> tuple[str, str] | None:
    """``(flag, message)`` of what the flags' power cannot be for the clock, None when it can
    be built.

    Args:
      cluster: the flags' :class:`~jaxnigt.config.schema.ClusterConfig` (``power`` parsed).

    Returns:
      The flag to name and the rest of the line, or None.
    """
    source, args = power_sources.parse_power(cluster.power)  # the schema checked it
    n, horizon = cluster.n, cluster.power_horizon
    try:
        if source in ("outages", "periodic"):  # its numbers first (a short horizon: cheap)
            power_sources.check_spec(cluster.power, n, loader.one_period(cluster.power))
        if source == "trace":
            down = power_sources.all_down_from(power_sources.read_trace_rows(args[0], n), n)
            if down < float("inf"):
                return "--power", (
                    f"trace {args[0]!r}: every worker is at speed 0 from t = {down:g} on: no "
                    "gradient could ever finish after it"
                )
    except power_sources.TraceError as e:
        text = loader.power_text(e)
        given = power_sources.trace_file(cluster.power) or ""
        if text.endswith("does not exist") and not os.path.isabs(given):
            text += f" (tried {os.path.abspath(given)!r}: the working directory's)"
        return "--power", text
    if source in ("outages", "periodic") and horizon is None:
        return "--power-horizon", (
            f"required with --power {cluster.power}: the simulated time the {source} trace "
            "covers (a number > 0; past it every worker is up at speed 1)"
        )
    trace = sizing.trace_size(cluster.power, n, horizon)
    limit = sizing.device_limit()
    found = sizing.trace_problem(
        trace, n, 1, sizing.cluster_bytes, limit, horizon="--power-horizon"
    )
    if found is None:
        return None
    return ("--power" if source == "trace" else "--power-horizon"), found
