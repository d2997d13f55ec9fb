"""``jaxnigt clock``'s output: the simulation of the settings' rule (:func:`simulate`), the CSV
of each rule (one row per round, arrival or trajectory, written atomically) and its one-line
summary (:mod:`jaxnigt.cli.clock` validates the flags and builds the cluster model).

The summaries take the rule's settings (``settings``: ``rule``, ``rounds``, ``out`` and the
rule's sizes, as :func:`jaxnigt.cli.clock.validate` returns them) and the cluster model
(``cluster``: the number of workers, their times and the named choices).
"""

from __future__ import annotations

import sys
from typing import Any

import jax
import numpy as np

from jaxnigt.cli import clock_plot
from jaxnigt.cluster import events, rules, simulation, theory, timeline
from jaxnigt.cluster.model import ClusterModel
from jaxnigt.run.run_dir import atomic_write_text


def _power(settings: Any, cluster: ClusterModel) -> list[str]:
    """The summary's ``power=SPEC down_exchange=...`` (``--power``), when it is not constant."""
    spec = getattr(settings, "power", "constant")
    return [] if spec == "constant" else [f"power={spec}", f"down_exchange={cluster.down_exchange}"]


def ended(what: str, ends: np.ndarray, rows: Any) -> tuple[Any, str | None]:
    """The rows that end, and the note of a clock whose rows stop having finite times (a
    worker down for good under ``--power``).

    Args:
      what: the name of a row (``round``, ``arrival``, ...).
      ends: ``[rows]`` each row's end.
      rows: a tree whose leaves have the rows on their leading axis.

    Returns:
      ``rows`` cut before the first row that never ends (later ones start after it), and the
      note naming it (None when every row ends).
    """
    bad = ~np.isfinite(np.asarray(ends, np.float64))
    if not bad.any():
        return rows, None
    first = int(np.argmax(bad))
    note = (
        f"{what} {first} never ends (the workers it waits for are down for good: --power); "
        f"the CSV and the summary hold only the rows before it ({first})"
    )
    return jax.tree.map(lambda x: x[:first], rows), note


def write_lines(path: str, lines: list[str]) -> None:
    """Writes ``lines`` to ``path`` atomically, one per line."""
    atomic_write_text(path, "\n".join(lines) + "\n")


def write_csv(path: str, res: dict[str, np.ndarray], n: int) -> None:
    """The round rules' CSV: one row per round of ``res`` (``simulate_rule_rounds``)."""
    header = ["round", "t_start", "t_collect_end", "t_end", "grads_used", "time_wasted", "comms"]
    header += [f"b_{i}" for i in range(n)]
    lines = [",".join(header)]
    for r in range(res["t_start"].shape[0]):
        row = [str(r)]
        row += [f"{float(res[k][r]):.9g}" for k in ("t_start", "t_collect_end", "t_end")]
        row += [str(int(res["grads_used"][r])), f"{float(res['time_wasted'][r]):.9g}"]
        row += [str(int(res["comms"][r]))] + [str(int(b)) for b in res["counts"][r]]
        lines.append(",".join(row))
    write_lines(path, lines)


ASYNC_COLUMNS = (
    "arrival",
    "worker",
    "t_dispatch",
    "t_compute_end",
    "t_arrival",
    "staleness",
    "link_wait",
)


def write_async_csv(path: str, arr: events.Arrival) -> None:
    """``--rule async``'s CSV: one row per arrival."""
    lines = [",".join(ASYNC_COLUMNS)]
    for j in range(arr.worker.shape[0]):
        times = (arr.dispatch_time[j], arr.compute_end[j], arr.time[j])
        row = [str(j), str(int(arr.worker[j]))] + [f"{float(t):.9g}" for t in times]
        row += [str(int(arr.staleness[j])), f"{float(arr.link_wait[j]):.9g}"]
        lines.append(",".join(row))
    write_lines(path, lines)


def write_ringmaster_csv(path: str, ev: events.Event) -> None:
    """``--rule ringmaster``'s CSV: one row per exchange."""
    arr = ev.arrival
    lines = [",".join((*ASYNC_COLUMNS, "accepted", "wasted"))]
    for j in range(arr.worker.shape[0]):
        times = (arr.dispatch_time[j], arr.compute_end[j], arr.time[j])
        row = [str(j), str(int(arr.worker[j]))] + [f"{float(t):.9g}" for t in times]
        row += [str(int(arr.staleness[j])), f"{float(arr.link_wait[j]):.9g}"]
        row += [str(int(ev.accepted[j])), f"{float(ev.wasted[j]):.9g}"]
        lines.append(",".join(row))
    write_lines(path, lines)


def write_ringleader_csv(path: str, ev: events.Event) -> None:
    """``--rule ringleader_asgd``'s CSV: one row per exchange."""
    arr, cy = ev.arrival, ev.extra
    lines = [",".join((*ASYNC_COLUMNS, "update", "next_table", "cycle_end", "cycle"))]
    for j in range(arr.worker.shape[0]):
        times = (arr.dispatch_time[j], arr.compute_end[j], arr.time[j])
        row = [str(j), str(int(arr.worker[j]))] + [f"{float(t):.9g}" for t in times]
        row += [str(int(arr.staleness[j])), f"{float(arr.link_wait[j]):.9g}"]
        row += [str(int(x[j])) for x in (ev.accepted, cy.into_next, cy.rotate, cy.cycle)]
        lines.append(",".join(row))
    write_lines(path, lines)


def ringleader_summary(settings: Any, cluster: ClusterModel, final, ev: events.Event) -> str:
    """``--rule ringleader_asgd``'s summary line."""
    elapsed = float(ev.arrival.time[-1])  # the run starts at 0
    ends = ev.arrival.time[ev.extra.rotate.astype(bool)]
    cycle = np.diff(np.concatenate([[0.0], ends])) if ends.size else np.array([np.nan])
    stale = ev.arrival.staleness
    parts = [
        f"clock: rule=ringleader_asgd n={cluster.n} point={settings.point}",
        f"link={cluster.link} exchanges={ev.arrival.time.shape[0]}",
        f"t_end={elapsed:.6g}",
        f"updates={int(ev.accepted.sum())}",
        f"cycles={int(ends.size)}",
        f"mean_cycle_time={float(cycle.mean()):.6g}",
        f"next_table={int(ev.extra.into_next.sum())}",
        f"mean_staleness={float(stale.mean()):.6g} max_staleness={int(stale.max())}",
        f"link_util={float(final.clock.link_busy) / max(elapsed, 1e-30):.4f}",
        *_power(settings, cluster),
        f"-> {settings.out}",
    ]
    return " ".join(parts)


def ringmaster_summary(settings: Any, cluster: ClusterModel, final, ev: events.Event) -> str:
    """``--rule ringmaster``'s summary line."""
    elapsed = float(ev.arrival.time[-1])  # the run starts at 0
    accepted = ev.accepted.astype(bool)
    refused = ~accepted & (ev.wasted >= 1.0)  # a whole gradient: discarded (or stopped late)
    delays = ev.arrival.staleness[accepted]
    parts = [
        f"clock: rule=ringmaster n={cluster.n} R={settings.R}",
        f"stops={str(settings.stops).lower()}",
        f"link={cluster.link} exchanges={ev.arrival.time.shape[0]}",
        f"t_end={elapsed:.6g}",
        f"updates={int(accepted.sum())}",
        f"updates_per_time={accepted.sum() / max(elapsed, 1e-30):.6g}",
        f"refused_whole={int(refused.sum())}",
        f"refused_partial={int((~accepted & ~refused).sum())}",
        f"wasted_trajectories={float(ev.wasted.sum()):.6g}",
        f"mean_delay={float(delays.mean()) if delays.size else float('nan'):.6g}",
        f"link_util={float(final.clock.link_busy) / max(elapsed, 1e-30):.4f}",
        *_power(settings, cluster),
        f"-> {settings.out}",
    ]
    return " ".join(parts)


def summary(settings: Any, cluster: ClusterModel, res: dict[str, np.ndarray]) -> str:
    """The round rules' summary line (with Rennala's theory value for deterministic times)."""
    round_time = res["t_end"] - res["t_start"]
    collect = res["t_collect_end"] - res["t_start"]
    total = float(res["t_end"][-1] - res["t_start"][0])
    util = float(np.sum(res["time_used"])) / max(cluster.n * total, 1e-30)
    parts = [
        f"clock: rule={settings.rule} n={cluster.n} M={settings.M}",
        f"inflight={cluster.inflight}",
        f"allreduce={cluster.allreduce}",
        f"rounds={res['t_end'].shape[0]}",
        f"mean_round_time={np.mean(round_time):.6g}",
        f"mean_collect={np.mean(collect):.6g}",
        f"grads/round={np.mean(res['grads_used']):.6g}",
        f"wasted_time/round={np.mean(res['time_wasted']):.6g}",
        f"utilisation={util:.4f}",
        f"comms={int(np.sum(res['comms']))}",
    ]
    if rules.get_rule(settings.rule).overflow is not None:  # a rule whose buffer can overflow
        parts.append(f"overflow_rounds={int(np.sum(res['overflow']))}")
    if settings.rule == "rennala" and cluster.noise == "deterministic" and cluster.power is None:
        collect = theory.rennala_theory_time(np.asarray(cluster.h), settings.M)
        parts.append(f"theory_collect={collect:.6g} (kappa ignored)")
    parts += _power(settings, cluster)
    parts.append(f"-> {settings.out}")
    return " ".join(parts)


def async_summary(settings: Any, cluster: ClusterModel, final, arr: events.Arrival) -> str:
    """``--rule async``'s summary line (with the shared link's bound on the arrival rate)."""
    elapsed = float(arr.time[-1])  # the run starts at 0
    parts = [
        f"clock: rule=async n={cluster.n} link={cluster.link} arrivals={arr.time.shape[0]}",
        f"t_end={elapsed:.6g}",
        f"arrivals_per_time={arr.time.shape[0] / max(elapsed, 1e-30):.6g}",
        f"mean_staleness={float(np.mean(arr.staleness)):.6g}",
        f"max_staleness={int(np.max(arr.staleness))}",
        f"mean_link_wait={float(np.mean(arr.link_wait)):.6g}",
        f"link_util={float(final.link_busy) / max(elapsed, 1e-30):.4f}",
    ]
    bound = theory.shared_link_rate_bound(np.asarray(cluster.kappa))
    if cluster.link == "shared" and np.isfinite(bound):
        parts.append(f"(shared-link bound 1/min_kappa={bound:.6g})")
    parts += _power(settings, cluster)
    parts.append(f"-> {settings.out}")
    return " ".join(parts)


SEED_COLUMNS = ("trajectory", "update", "worker", "t_end", "lag_min", "lag_mean", "lag_max")


def seed_rows(batches) -> tuple[list[str], np.ndarray]:
    """The CSV lines of ``--rule seed`` and every step's lag ``[updates, B, H]``."""
    updates, B = batches.worker.shape
    lag = np.arange(updates)[:, None, None] - np.asarray(batches.versions)
    lines = [",".join(SEED_COLUMNS)]
    for k in range(updates):
        for b in range(B):
            row = [str(k * B + b), str(k), str(int(batches.worker[k, b]))]
            row.append(f"{float(batches.time[k, b]):.9g}")
            steps = lag[k, b]
            row += [str(int(steps.min())), f"{float(steps.mean()):.9g}", str(int(steps.max()))]
            lines.append(",".join(row))
    return lines, lag


def seed_summary(settings: Any, cluster: ClusterModel, final, batches, lag: np.ndarray) -> str:
    """``--rule seed``'s summary line."""
    elapsed = float(batches.time.max())  # the run starts at 0; its last batch's end
    trajectories = batches.worker.size
    rate = lambda x: f"{x / max(elapsed, 1e-30):.6g}"
    parts = [
        f"clock: rule=seed n={cluster.n} link={cluster.link} H={settings.horizon}",
        f"batch={settings.batch}",
        f"updates={batches.worker.shape[0]}",
        f"t_end={elapsed:.6g}",
        f"trajectories_per_time={rate(trajectories)}",
        f"messages_per_time={rate(float(final.messages))}",
        f"mean_lag={float(lag.mean()):.6g}",
        f"max_lag={int(lag.max())}",
        f"link_util={float(final.link_busy) / max(elapsed, 1e-30):.4f}",
        *_power(settings, cluster),
        f"-> {settings.out}",
    ]
    return " ".join(parts)


def simulate(settings: Any, cluster: ClusterModel) -> int:
    """Simulates the settings' rule on ``cluster`` (:mod:`jaxnigt.cluster.simulation`), writes
    its CSV, prints its summary and, with ``settings.plot``, draws the timeline of the same
    rows (:mod:`jaxnigt.cli.clock_plot`); returns the exit status (0; a clock whose times stop
    being finite also prints a note on stderr)."""
    key = jax.random.key(settings.seed)
    run = {"seed": _seed, "ringmaster": _ringmaster, "async": _async}.get(settings.rule, _rounds)
    run = _ringleader if settings.rule == "ringleader_asgd" else run
    return run(settings, cluster, key)


def _seed(settings: Any, cluster: ClusterModel, key: jax.Array) -> int:
    final, batches, done = simulation.simulate_seed(
        cluster,
        key,
        horizon=settings.horizon,
        batch=settings.batch,
        updates=settings.rounds,
        inference=settings.inference_time,
        learner_time=settings.learner_time,
    )
    final, batches, done = jax.tree.map(np.asarray, (final, batches, done))

    def write_seed(b):
        lines, lag = seed_rows(b)
        write_lines(settings.out, lines)
        return lambda: seed_summary(settings, cluster, final, b, lag)

    picture = lambda b: timeline.from_seed(cluster, key, b, done[: b.time.shape[0]])
    ends = batches.time.max(axis=1)
    return _emit(settings, cluster, "update", ends, batches, write_seed, picture)


def _pending(settings: Any, clock, arrivals, *more) -> tuple | None:
    """The gradients in flight at the last arrival (the engine's final state), when the
    rows are all the clock simulated."""
    if arrivals.time.shape[0] < settings.rounds:  # cut before a row that never ends
        return None
    return (clock.dispatch_time, clock.compute_end, *more)


def _ringmaster(settings: Any, cluster: ClusterModel, key: jax.Array) -> int:
    final, ev = simulation.simulate_ringmaster(
        cluster, key, arrivals=settings.rounds, R=settings.R, stops=settings.stops
    )
    final, ev = jax.tree.map(np.asarray, (final, ev))

    def write_ringmaster(e):
        write_ringmaster_csv(settings.out, e)
        return lambda: ringmaster_summary(settings, cluster, final, e)

    def picture(e):
        pending = _pending(settings, final.clock, e.arrival, final.cancelled)
        a, ok = e.arrival, e.accepted
        return timeline.from_arrivals(
            cluster, key, a, accepted=ok, pending=pending, rule="ringmaster"
        )

    return _emit(settings, cluster, "exchange", ev.arrival.time, ev, write_ringmaster, picture)


def _ringleader(settings: Any, cluster: ClusterModel, key: jax.Array) -> int:
    final, ev = simulation.simulate_ringleader(
        cluster, key, arrivals=settings.rounds, point=settings.point
    )
    final, ev = jax.tree.map(np.asarray, (final, ev))

    def write_ringleader(e):
        write_ringleader_csv(settings.out, e)
        return lambda: ringleader_summary(settings, cluster, final, e)

    def picture(e):
        pending = _pending(settings, final.clock, e.arrival)
        return timeline.from_arrivals(cluster, key, e.arrival, pending=pending)

    return _emit(settings, cluster, "exchange", ev.arrival.time, ev, write_ringleader, picture)


def _async(settings: Any, cluster: ClusterModel, key: jax.Array) -> int:
    final, arr = simulation.simulate_async(cluster, key, arrivals=settings.rounds)
    final, arr = jax.tree.map(np.asarray, (final, arr))

    def write_async(a):
        write_async_csv(settings.out, a)
        return lambda: async_summary(settings, cluster, final, a)

    def picture(a):
        return timeline.from_arrivals(cluster, key, a, pending=_pending(settings, final, a))

    return _emit(settings, cluster, "arrival", arr.time, arr, write_async, picture)


def _rounds(settings: Any, cluster: ClusterModel, key: jax.Array) -> int:
    res = simulation.simulate_rule_rounds(
        cluster,
        key,
        rule=settings.rule,
        M=settings.M,
        rounds=settings.rounds,
        capacity=settings.capacity,
        per_worker=settings.per_worker,
        gradients=bool(getattr(settings, "plot", None)),
    )
    res = jax.tree.map(np.asarray, res)

    def write_rounds(r):
        write_csv(settings.out, r, cluster.n)
        return lambda: summary(settings, cluster, r)

    picture = lambda r: timeline.from_rounds(cluster, key, r, rule=settings.rule)
    return _emit(settings, cluster, "round", res["t_end"], res, write_rounds, picture)


def _emit(settings: Any, cluster: ClusterModel, what: str, ends, rows, write, picture) -> int:
    """Writes the rows that end (:func:`ended`) with ``write(rows)``, which returns their
    summary's maker, prints the summary (or, when not even the first row ends, a line saying
    so), draws ``picture(rows)`` (a :class:`~jaxnigt.cluster.timeline.Timeline`) with
    ``settings.plot`` and prints the note; returns the exit status, 0."""
    ends = np.asarray(ends, np.float64)
    rows, note = ended(what, ends, rows)
    make_summary = write(rows)
    ends_at_all = ends.size > 0 and np.isfinite(ends[0])
    print(make_summary() if ends_at_all else _nothing_ends(settings, cluster, what))
    if getattr(settings, "plot", None):
        print(clock_plot.save(settings, cluster, picture(rows)))
    return _note(note)


def _nothing_ends(settings: Any, cluster: ClusterModel, what: str) -> str:
    """The summary line of a clock in which not even the first row ends."""
    parts = [f"clock: rule={settings.rule} n={cluster.n}", f"{what}s=0", *_power(settings, cluster)]
    return " ".join([*parts, f"-> {settings.out}"])


def _note(note: str | None) -> int:
    """Prints a note of the simulation (one line on stderr); the clock's status is 0."""
    if note is not None:
        print(f"jaxnigt clock: note: {note}", file=sys.stderr)
    return 0
