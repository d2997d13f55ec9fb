"""Workers that disconnect: the outage rows of the results page, pre-registered in
docs/results/fourth.md ("Workers that disconnect", 2026-12-05) and decided by the fourth
edition's rule (:mod:`paper.fourth`).

    python scripts/paper fourth run point_mass_sqrt_dim_outages   # its seed blocks
    python scripts/paper outages traces                            # write the trace files
    python scripts/paper outages predict [SCENARIO ...]           # the clock's prediction

The prediction is :func:`paper.fourth.clock_inflation` (it reads the report configs that
:mod:`paper.fourth` builds, and this module imports nothing of it).

**Scenarios** (:data:`SCENARIOS`): a fourth-edition scenario (:data:`TUNED_FROM`) with
``cluster.power: trace:FILE`` added, nothing else changed: its budget, cadence and tuned
values are the base scenario's (not retuned). The cluster model stays the default
(``inflight: cancel``, ``link: shared``, ``allreduce: all``, ``down_exchange: wait``).

**Traces** (:data:`TRACES`): each is drawn once, from a fixed seed, as a two-state
availability (up for an exponential time of mean ``up``, then down for one of mean ``down``,
and so on, from "up" at time 0) for the workers it names, over ``horizon``; the other workers
stay up. A trace file and not ``power: outages:UP:DOWN`` (drawn per seed from the run's key):
in the library at the commit that added this module the per-arrival engine (AFedPG) cannot
be built under ``outages:`` (its wave sizing simulates the undrawn model), and a per-worker
mean (only the heterogeneous scenario's slow worker goes down) is no number or profile. So
every method and every seed of a scenario sees the same outages: the comparison is
conditional on one realisation, paired in the outages as it is in the seeds.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from paper.scenarios import HETERO, Scenario

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = Path(__file__).resolve().parent / "configs"


@dataclasses.dataclass(frozen=True)
class Trace:
    """Outages of ``workers`` (1-based) of ``n``: exponential up and down times of means
    ``up`` and ``down`` from ``seed``, until ``horizon``."""

    name: str
    n: int
    workers: tuple[int, ...]
    up: float
    down: float
    horizon: float
    seed: int

    @property
    def path(self) -> Path:
        return CONFIGS / f"outages_{self.name}.csv"

    @property
    def spec(self) -> str:
        """The config's ``cluster.power`` (the file relative to the repository root, where
        ``python scripts/paper`` runs)."""
        return f"trace:{self.path.relative_to(ROOT)}"


# n = 10 (point_mass and reacher √i·d^{1/4}): Sync NIGT's round is 29.4 (point_mass) and
# 30.0 (reacher) at constant power, so an outage of mean 75 lasts about 2.5 Sync rounds and
# a mean up time of 675 leaves each worker down 10 % of the time.  One trace serves both
# environments (it covers point_mass's budget, 6,000; reacher's is 5,000).
N10 = Trace("n10", 10, tuple(range(1, 11)), up=675.0, down=75.0, horizon=6000.0, seed=20261205)
# heterogeneous (n = 2, h = (1, 10)): only the slow worker 2 goes down; Malenia NIGT's round
# is 60 at constant power, so outages of mean 150 (2.5 rounds), up 1,350 (down 10 %).
HETERO_SLOW = Trace("hetero", 2, (2,), up=1350.0, down=150.0, horizon=60000.0, seed=20261206)
TRACES = (N10, HETERO_SLOW)


def trace_rows(trace: Trace) -> list[tuple[int, float, float]]:
    """``(worker, start, speed)`` rows: each named worker up from 0, then down (speed 0) and
    up again (speed 1) in turn; a worker is left up once its next outage would start at or
    after the horizon."""
    rng = np.random.default_rng(trace.seed)
    rows = []
    for worker in trace.workers:
        t = 0.0
        while (t := t + rng.exponential(trace.up)) < trace.horizon:
            rows.append((worker, round(t, 3), 0.0))
            t = t + rng.exponential(trace.down)
            rows.append((worker, round(t, 3), 1.0))
    return rows


def trace_text(trace: Trace) -> str:
    """The trace file's text (``worker,start,speed``)."""
    lines = ["worker,start,speed"]
    lines += [f"{w},{s:.3f},{v:g}" for w, s, v in trace_rows(trace)]
    return "\n".join(lines) + "\n"


def down_fraction(trace: Trace, until: float | None = None) -> dict[int, float]:
    """Each named worker's share of ``[0, until]`` (default: the horizon) spent down."""
    until = trace.horizon if until is None else until
    down: dict[int, float] = {w: 0.0 for w in trace.workers}
    since: dict[int, float] = {}
    for w, s, v in trace_rows(trace):
        if v == 0.0:
            since[w] = s
        else:
            down[w] += max(0.0, min(s, until) - min(since.pop(w), until))
    for w, s in since.items():
        down[w] += max(0.0, until - s)
    return {w: d / until for w, d in down.items()}


def write_traces() -> list[Path]:
    """Writes every trace file (:data:`TRACES`)."""
    for trace in TRACES:
        trace.path.write_text(trace_text(trace))
    return [t.path for t in TRACES]


def _power(trace: Trace, down_exchange: str = "wait", base: dict | None = None) -> dict:
    cluster = {**(base or {}).get("cluster", {}), "power": trace.spec}
    return {**(base or {}), "cluster": {**cluster, "down_exchange": down_exchange}}


# Malenia NIGT's per-worker buffer of a round, raised from its default 6 M = 120: while the
# slow worker is down (up to 413 in the trace) the fast one (h = 1) keeps delivering, and the
# default buffer overflowed at round 30 of the first block, seed 0 (the run stops on an
# overflow).  A buffer size, no rule of the method: every gradient of a round still counts.
HETERO_CAPACITY = {**HETERO, "hparams": {"malenia_capacity": 1000}}

# The outage scenarios: ``<env>_sqrt_dim_outages`` under the library's default
# ``down_exchange: wait`` (a down worker neither computes nor exchanges), ``..._free`` under
# ``down_exchange: free`` (it stops computing; its exchanges go on), and the heterogeneous
# scenario's (κ = 0: its exchanges are instantaneous, so the two choices are one).
_ALL = (
    *(
        Scenario.of(env, "sqrt_dim_outages" + suffix, _power(N10, down))
        for suffix, down in (("", "wait"), ("_free", "free"))
        for env in ("point_mass", "reacher")
    ),
    Scenario.of("point_mass", "hetero_outages", _power(HETERO_SLOW, base=HETERO_CAPACITY)),
)
SCENARIOS = {sc.name: sc for sc in _ALL}
# The fourth-edition scenario each adds outages to: its budget, cadence and tuned values
# (not retuned).
TUNED_FROM = {sc.name: f"{sc.env}_{sc.setting.split('_outages')[0]}" for sc in _ALL}
