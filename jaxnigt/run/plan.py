"""``jaxnigt plan``: what a config will cost, without running it.

Per algorithm of a config: the trajectories one step rolls out and the simulated time a step
takes (from the algorithm's clock alone, :attr:`~jaxnigt.algorithms.core.Algorithm.
simulate_clock`, averaged over a few simulated steps), the steps and updates the budget
allows, the environment steps that implies (an upper bound for tasks that terminate), the
device memory of one step of the real vmapped program (``memory_analysis()`` of its compiled
form: arguments + outputs + temporaries), and, when this backend has benchmark figures in the
table shipped with the package (``plan_figures.json``), an estimated wall time.  Users pick
n, M and seeds per device from it.

Before any of that, :func:`memory_floors` sizes the run from n and the programs' shapes
(:mod:`jaxnigt.run.sizing`; :func:`preflight` before a run, the same check) and names what
cannot fit, by the config key whose value sizes it (:func:`sizes`: n, M, M_init, Malenia's
capacity, seeds × grid points, the horizon, ...); each row also carries that lower bound
(``memory MB/step (floor)``), which needs no compilation, and a compiled step larger than
the device is named too.  An event engine's clock at large n (each exchange of a step looks at all n
workers) is not simulated past :data:`CLOCK_WORK_LIMIT` operations: its row says so instead
of a step time.

A config with a computation-power trace (``cluster.power``) has its trace sized from its spec
alone (:func:`power_trace`: K stretches per worker, n × K × 8 float32 arrays, one copy per run
for outages drawn per run) in the first stage, before it is built; one that does not fit is
refused, and the plan prints its memory.

Compute-time noise without a mean (``pareto:ALPHA`` / ``loglogistic:BETA`` with a tail index
<= 1, :func:`jaxnigt.cluster.timing.noise_mean`) gets a line under the table: its step time
is an average of drawn steps, not an expectation.
"""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxnigt.cluster import timing
from jaxnigt.config import ExperimentConfig
from jaxnigt.run import sizing
from jaxnigt.run.batch import batch_size, grid_points

CLOCK_STEPS = 16


def figures(backend: str | None = None) -> dict[str, dict]:
    """Benchmark figures of ``backend`` (default: JAX's) from ``plan_figures.json``."""
    table = json.loads(resources.files("jaxnigt").joinpath("plan_figures.json").read_text())
    return table.get(backend or jax.default_backend(), {})


#: Worker operations (:meth:`~jaxnigt.run.trainer.Trainer.clock_work`) above which the plan does
#: not simulate an algorithm's clock (an event engine at large n: each of a step's n
#: exchanges looks at all n workers); its row then has no step time.
CLOCK_WORK_LIMIT = 2**31


def _programs(tr, batch: int):
    """``(state, one step)`` of the vmapped run over ``batch`` runs: the abstract initial
    state and the jitted step (the cluster's arrays are its arguments)."""
    keys = jax.random.split(jax.random.key(0), batch)
    init = tr.program(lambda t, k, h: jax.vmap(t.init)(k, h))
    state = jax.eval_shape(init, keys, tr.hyper(batch=batch))
    return state, tr.program(lambda t, s: jax.vmap(lambda x: t.run_chunk(x, 1))(s))


def memory_bytes(tr, batch: int) -> int:
    """Device memory of one step of the vmapped program over ``batch`` runs (compiled)."""
    state, step = _programs(tr, batch)
    stats = step.lower(state).compile().memory_analysis()
    return int(stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes)


def _beside(tr, batch: int) -> list[tuple[Any, tuple]]:
    """The run's other programs on the vmapped state, ``(program, args)``: round 0 with
    ``M_init`` gradients where it has its own shape, and the evaluation's episodes."""
    out = []
    if tr.first_step is not None:
        first = tr.program(lambda t, s, b: jax.vmap(t.first_step)(s, b))
        out.append((first, (jax.ShapeDtypeStruct((batch,), jnp.float32),)))
    keys = jax.random.split(jax.random.key(0), batch)
    out.append((tr.program(lambda t, s, k: jax.vmap(t.evaluate)(s, k)), (keys,)))
    return out


def memory_floor(tr, batch: int) -> dict:
    """A lower bound of one step's device memory over ``batch`` runs, from shapes alone
    (:func:`jaxnigt.run.sizing.program_bytes`: nothing compiled, nothing of size n allocated);
    its largest array is the largest of a step, round 0 (``M_init``) and an evaluation."""
    state, step = _programs(tr, batch)
    return sizing.program_bytes(lambda s: s, step, state, also=_beside(tr, batch))


#: The hyperparameters whose values size a program's arrays (trajectories rolled out at once,
#: parameter versions kept), and those of them that count per worker (n × each in a round).
ALLOCATING = (
    "M",
    "M_init",
    "malenia_capacity",
    "per_worker_batch",
    "admm_local_batch",
    "async_block",
    "async_wave",
    "impala_batch",
    "seed_batch",
    "seed_versions",
)
PER_WORKER = ("malenia_capacity", "per_worker_batch", "admm_local_batch")


def sizes(config: ExperimentConfig, algorithm: str) -> dict[str, int]:
    """The values of ``config`` that size ``algorithm``'s arrays, each under the key that
    sets it (``per_algorithm.<name>.<key>`` where that entry sets it): ``cluster.n``, the
    program's runs (``seeds``, or ``seeds × grid points``), ``env.horizon`` (the task's
    default when unset), ``eval.episodes``, and those :data:`ALLOCATING` hyperparameters
    that are set and that ``algorithm`` reads (Malenia's capacity resolved: 6 M unset)."""
    from jaxnigt import envs
    from jaxnigt.cluster.schedules import default_malenia_capacity
    from jaxnigt.config.loader import readers

    hp, n = config.hparams_for(algorithm), config.cluster.n
    points = len(grid_points(config, algorithm))
    out = {
        "cluster.n": n,
        "seeds" if points == 1 else "seeds × grid points": config.seeds * points,
        "env.horizon": config.env.horizon or envs.default_horizon(config.env.name),
        "eval.episodes": config.eval.episodes,
    }
    for key in ALLOCATING:
        if algorithm not in readers(key):
            continue
        value = getattr(hp, key)
        if key == "malenia_capacity" and value is None:
            value = default_malenia_capacity(hp.M, n)
        if isinstance(value, bool) or not isinstance(value, int):
            continue  # unset (its default follows n or M), or per_worker_batch's match_M
        own = algorithm in config.per_algorithm and value != getattr(config.hparams, key)
        out[f"per_algorithm.{algorithm}.{key}" if own else f"hparams.{key}"] = value
    return out


#: Trajectory steps of one step (runs × horizon × the most trajectories a step holds, from
#: :func:`sizes`) up to which :func:`preflight` sizes a run from n alone (with n at most
#: :data:`SIZED_N`): its arrays then take about 1 GiB at most (the engines' largest array is
#: about 256 bytes per trajectory step, the policy's activations), and tracing every
#: algorithm's programs once more before the run is not worth it.
SIZED_SLOTS = 2**20


def trajectory_steps(config: ExperimentConfig, algorithm: str) -> int:
    """About the trajectory steps one step of ``algorithm``'s program holds at once, from
    :func:`sizes` (a cheap upper guess: nothing is traced): runs × horizon × the largest of
    n, the evaluation's episodes and the allocating hyperparameters (per worker: × n);
    Malenia's capacity sizes per-worker arrays of arrival times, so it counts n × itself
    without the horizon."""
    found = sizes(config, algorithm)
    n, horizon = config.cluster.n, found["env.horizon"]
    per_run = [horizon * n, horizon * config.eval.episodes]
    for key, v in found.items():
        if key.startswith(("hparams.", "per_algorithm.")):
            name = key.rsplit(".", 1)[-1]
            count = v * n if name in PER_WORKER else v
            per_run.append(count if name == "malenia_capacity" else count * horizon)
    return batch_size(config, algorithm) * max(per_run)


def _size_problem(
    config: ExperimentConfig,
    algorithm: str,
    what: str,
    step: float,
    largest: str,
    limit: tuple[int, str],
) -> str | None:
    """Why ``step`` bytes a device (beside the host's time model) do not fit, named by the
    config value that sizes them: the key (or keys, when several hold the same value) whose
    value (per worker: times n) is, within 1 %, the largest dimension of the array
    ``largest`` (``float32[5,1000000,30,64]``: M), else ``cluster.n``; the largest value that
    fits is estimated as if the step's bytes grew in proportion to it. None when they fit."""
    n = config.cluster.n
    top = max((int(d) for d in re.findall(r"\d+", largest.partition("[")[2])), default=0)
    near = []  # (key, value) of the keys that make the array's largest dimension
    for key, v in sizes(config, algorithm).items():
        per_worker = key.rsplit(".", 1)[-1] in PER_WORKER
        if v > 1 and any(abs(top - c) <= top / 100 for c in {v, v * n if per_worker else v}):
            near.append((key, v))
    if not near or any(k == "cluster.n" for k, _ in near):
        keys, value = ["cluster.n"], n
        needed = lambda m: sizing.cluster_bytes(m) + int(step * m / n)
    else:
        value = near[0][1]
        keys = [k for k, v in near if v == value]
        needed = lambda m: sizing.cluster_bytes(n) + int(step * m / value)
    name = " = ".join(keys)
    symbol = "n" if name == "cluster.n" else name
    return sizing.problem(what, needed, value, limit, name=name, symbol=symbol)


def _devices(config: ExperimentConfig, batch: int) -> int:
    """The devices one algorithm's program spreads over
    (:func:`jaxnigt.run.devices.device_plan`)."""
    from jaxnigt.run import devices

    mesh, slots = devices.device_plan(config.devices, batch)
    return 1 if mesh is None and slots is None else int((mesh or slots).devices.size)


class Floor(NamedTuple):
    """One algorithm's size before it runs (:func:`memory_floors`): the lower bound of one
    step's memory per device, why that does not fit (None when it does), the worker
    operations of one step of its clock (:meth:`~jaxnigt.run.trainer.Trainer.clock_work`),
    the trainer all that was read from and the type of the largest array of its programs
    (``float32[5,64]``)."""

    bytes: int
    problem: str | None
    clock_work: int
    trainer: Any
    largest: str = ""


def power_trace(config: ExperimentConfig) -> sizing.TraceSize | None:
    """The size of ``config``'s power trace from its spec alone (:func:`jaxnigt.run.sizing.
    trace_size`; None: constant power)."""
    c = config.cluster
    horizon = c.power_horizon if c.power_horizon is not None else config.budget
    return sizing.trace_size(c.power, c.n, horizon)


def _check_cluster(config: ExperimentConfig, limit: tuple[int, str]) -> None:
    """The first stage of :func:`memory_floors`, from n alone: the time model on the host and
    every run's per-worker state (each engine's holds one float32 per worker at least), and
    the power trace (:func:`power_trace`) beside them."""
    runs = max(batch_size(config, a) for a in config.algorithms)
    floor = lambda m: sizing.cluster_bytes(m) + 4 * runs * m
    what = "the cluster's time model and every run's per-worker state"
    sizing.check(what, floor, config.cluster.n, limit)
    trace = sizing.trace_problem(power_trace(config), config.cluster.n, runs, floor, limit)
    if trace is not None:
        raise sizing.SizeError(f"cluster.power: {trace}")


def memory_floors(
    config: ExperimentConfig, limit: tuple[int, str] | None = None
) -> dict[str, Floor]:
    """Per algorithm, its :class:`Floor`.

    First, from n alone, the time model on the host and every run's per-worker state, before
    anything of size n exists: that not fitting raises :class:`~jaxnigt.run.sizing.SizeError`.
    Then per algorithm from its program's shapes (:func:`memory_floor`), beside the host's
    copy of the time model.
    """
    from jaxnigt.run.trainer import make_trainer

    limit = limit or sizing.device_limit()
    _check_cluster(config, limit)
    out = {}
    for algorithm in config.algorithms:
        batch = batch_size(config, algorithm)
        tr = make_trainer(config, algorithm)
        est = memory_floor(tr, batch)
        step = est["step"] / _devices(config, batch)
        what = f"one step of {algorithm} ({batch} runs; its largest array {est['largest']})"
        problem = _size_problem(config, algorithm, what, step, est["largest"], limit)
        out[algorithm] = Floor(int(step), problem, tr.clock_work(1), tr, est["largest"])
    return out


#: Up to this n (and :data:`SIZED_SLOTS`), :func:`preflight` sizes a run from n alone: its
#: per-worker arrays are small beside its rollouts.
SIZED_N = 4096


def sized_by_n(config: ExperimentConfig) -> bool:
    """Whether :func:`preflight` sizes ``config`` from n alone: n at most :data:`SIZED_N`
    and every algorithm's :func:`trajectory_steps` at most :data:`SIZED_SLOTS`."""
    return config.cluster.n <= SIZED_N and all(
        trajectory_steps(config, a) <= SIZED_SLOTS for a in config.algorithms
    )


def preflight(config: ExperimentConfig, limit: tuple[int, str] | None = None) -> list[str]:
    """Before a run: raises :class:`~jaxnigt.run.sizing.SizeError` when it cannot fit in the
    device's memory (:func:`memory_floors`, with the message ``jaxnigt plan`` prints: both
    stages unless :func:`sized_by_n`, else the first); returns a warning per algorithm whose
    clock alone costs more than :data:`CLOCK_WORK_LIMIT` worker operations a step (such a
    run hardly moves)."""
    limit = limit or sizing.device_limit()
    if sized_by_n(config):
        _check_cluster(config, limit)
        return []
    warnings = []
    for algorithm, floor in memory_floors(config, limit).items():
        if floor.problem is not None:
            raise sizing.SizeError(floor.problem)
        if floor.clock_work > CLOCK_WORK_LIMIT:
            warnings.append(
                f"{algorithm}: each exchange of a step looks at all n = {config.cluster.n:,} "
                f"workers, about {floor.clock_work:.2g} operations a step: this run will "
                "hardly move (lower hparams.async_block, or n)"
            )
    return warnings


def plan_algorithm(
    config: ExperimentConfig,
    algorithm: str,
    *,
    memory: bool = True,
    floor: int | None = None,
    trainer=None,
) -> dict:
    """One row of the plan: ``algorithm``'s cost under ``config`` (the module docstring);
    ``memory=False`` skips compiling a step (``memory_mb`` None). An event engine whose
    clock costs more than :data:`CLOCK_WORK_LIMIT` to simulate gets no step time."""
    from jaxnigt.run.trainer import make_trainer

    tr = trainer or make_trainer(config, algorithm)
    batch = batch_size(config, algorithm)
    row = {"algorithm": algorithm, "n": tr.setup.n, "runs": batch, "clock_work": None}
    trace = power_trace(config)
    row["trace_mb"] = trace.bytes(tr.setup.n, batch) / 2**20 if trace is not None else None
    if tr.clock_work(CLOCK_STEPS) > CLOCK_WORK_LIMIT:
        row["clock_work"] = tr.clock_work(1)
        per_step = step_time = steps = updates = env_steps = None
    else:
        per_step, step_time = tr.clock(CLOCK_STEPS)
        steps = config.budget / step_time if config.budget is not None else math.inf
        if config.max_rounds is not None:
            steps = min(steps, config.max_rounds)
        per_update = tr.algorithm.trajectories_per_update
        if per_update == 0:  # no fixed share of the trajectories (Ringleader's cycles)
            updates = None
        else:
            updates = steps if per_update is None else steps * per_step / per_update
        env_steps = steps * per_step * tr.setup.horizon
    row.update(
        trajectories_per_step=per_step,
        step_time=step_time,
        steps=steps,
        updates=updates,
        env_steps_per_run=env_steps,
        memory_floor_mb=(floor if floor is not None else memory_floor(tr, batch)["step"]) / 2**20,
        memory_mb=memory_bytes(tr, batch) / 2**20 if memory else None,
    )
    rate = figures().get(config.env.name, {}).get("steps_per_s")
    row["wall_s"] = batch * env_steps / rate if rate and env_steps is not None else None
    return row


def plan(
    config: ExperimentConfig, *, memory: bool = True, limit: tuple[int, str] | None = None
) -> list[dict]:
    """One row per algorithm of ``config`` (see the module docstring), each with ``problem``:
    why its run cannot fit in the device's memory (None when it fits): its floor over the
    limit (:func:`memory_floors`, as :func:`preflight` says before a run; its step is then
    not compiled), or its compiled step. Raises :class:`~jaxnigt.run.sizing.SizeError`
    when n alone is too large."""
    limit = limit or sizing.device_limit()
    rows = []
    for algorithm, floor in memory_floors(config, limit).items():
        problem = floor.problem
        row = plan_algorithm(
            config,
            algorithm,
            memory=memory and problem is None,
            floor=floor.bytes,
            trainer=floor.trainer,
        )
        if problem is None and row["memory_mb"] is not None:
            batch = row["runs"]
            step = row["memory_mb"] * 2**20 / _devices(config, batch)
            what = f"one step of {algorithm} ({batch} runs), compiled,"
            problem = _size_problem(config, algorithm, what, step, floor.largest, limit)
        rows.append({**row, "problem": problem})
    return rows


def _fmt(v: Any, spec: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    return format(v, spec)


def table(rows: list[dict], config: ExperimentConfig) -> str:
    """The plan as a plain-text table with a header line naming the backend."""
    backend = jax.default_backend()
    head = (
        f"plan: {config.name} on {backend} ({len(jax.devices())} device(s)): "
        f"env {config.env.name}, n = {config.cluster.n}, budget {config.budget}, "
        f"{config.seeds} seed(s) per algorithm"
    )
    cols = [
        ("algorithm", "algorithm", ""),
        ("trajectories_per_step", "traj/step", ".1f"),
        ("step_time", "sim time/step", ".4g"),
        ("steps", "steps", ",.0f"),
        ("updates", "updates", ",.0f"),
        ("env_steps_per_run", "env steps/run (max)", ",.3g"),
        ("runs", "runs", "d"),
        ("memory_floor_mb", "memory MB/step (floor)", ",.0f"),
        ("memory_mb", "memory MB/step", ",.0f"),
        ("wall_s", "wall s (est.)", ",.0f"),
    ]
    trace = power_trace(config)
    if trace is not None:
        cols.insert(-1, ("trace_mb", "power trace MB", ",.3g"))
    cells = [[h for _, h, _ in cols]]
    cells += [[_fmt(r[k], f) if f else str(r[k]) for k, _, f in cols] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cols))]
    lines = ["  ".join(x.rjust(w) for x, w in zip(c, widths, strict=True)) for c in cells]
    for r in rows:
        if r["clock_work"] is not None:
            lines.append(
                f"{r['algorithm']}: clock not simulated: a step of it looks at all n workers "
                f"for each exchange, about {r['clock_work']:.2g} operations (a run is as slow)"
            )
    if trace is not None:
        copies = "one per run (drawn per seed)" if trace.per_run else "one, shared by the runs"
        lines.append(
            f"power trace (cluster.power = {trace.spec}): {config.cluster.n:,} workers × "
            f"{trace.stretches:,} stretches × {sizing.TRACE_ARRAYS} float32 arrays = "
            f"{sizing.size_text(trace.bytes(config.cluster.n, 1))}, {copies}"
        )
    noise = config.cluster.noise
    if math.isinf(timing.noise_mean(noise)):
        lines.append(
            f"cluster.noise = {noise} has no mean (a tail index <= 1: h is the median time): "
            f"sim time/step is the average of {CLOCK_STEPS} drawn steps, not an expected time, "
            "and another draw's steps may differ by orders of magnitude"
        )
    note = figures().get(config.env.name, {}).get("source")
    tail = (
        f"wall time from {note}"
        if note
        else f"no benchmark figures for {config.env.name} on {backend}: wall not estimated"
    )
    return "\n".join([head, *lines, tail])
