"""``jaxnigt clock``: simulate the simulated cluster's clock alone, no training.

Round rules (``rennala``, ``malenia``, ``sync``, ``msync``: ``--M`` is then m, the workers a
round waits for) run ``--rounds`` rounds (``lax.scan``
inside one ``jax.jit``; round ``r`` uses ``fold_in(key(seed), r)``) and write one CSV row per
round::

    round, t_start, t_collect_end, t_end, grads_used, time_wasted, comms, b_0, ..., b_{n-1}

then print a one-line summary.  For deterministic times with ``--rule rennala`` the summary
also prints the theory value of the collection time (communication ignored; compare it with
``mean_collect``, which excludes the AllReduce):

    t* = min_m (sum_{i <= m} 1 / h_(i))^{-1} (M + m),  h sorted ascending.

``--rule async`` runs the per-arrival engine of AFedPG / asynchronous SGD
(:mod:`jaxnigt.cluster.events`) for ``--rounds`` arrivals (first compute times from
``fold_in(key(seed), 0)``, arrival ``j``'s redispatch from ``fold_in(fold_in(key(seed), 1),
j)``) and writes one row per arrival::

    arrival, worker, t_dispatch, t_compute_end, t_arrival, staleness, link_wait

with a summary of arrivals per time unit, mean staleness and the server link's utilisation
(exchange time served / elapsed time; above 1 means overlapping exchanges, possible only with
``--link independent``).

``--rule ringmaster`` runs the same engine under Ringmaster's bounded delay
(:func:`jaxnigt.cluster.events.bounded_next`; keys as ``--rule async``): a gradient whose delay
is at least ``--R`` (default n) is discarded, and with ``--stops`` cancelled as soon as its
delay reaches R.  Its rows add two columns, ``accepted`` (1: a server update) and ``wasted`` (the
trajectories' worth of discarded or cancelled work), and its summary the updates per time unit
and the discarded and cancelled gradients.

``--rule seed`` runs central inference's per-step clock (SEED RL, :mod:`jaxnigt.cluster.step_clock`)
for ``--rounds`` learner updates of ``--batch`` trajectories (default n) of ``--horizon``
steps: every step exchanges an observation and an action with the learner, costing
``--message-time`` (a number or n values; default each worker's ``--kappa``, times
``--message-size`` ^ (1/4) when given: the message's size o + a, as ``--dim`` scales a vector
exchange); ``--inference-time`` per step and ``--learner-time`` per update.  One row per
trajectory, in completion order::

    trajectory, update, worker, t_end, lag_min, lag_mean, lag_max

(the lag of a step: the learner's version at the trajectory's update minus the version the
step was served with), and a summary of trajectories and messages per time unit, the lag
over steps and the link's utilisation.

This module is the command only: it parses and validates the flags and calls
:func:`jaxnigt.cluster.simulation.simulate_rule_rounds` or
:func:`jaxnigt.cluster.simulation.simulate_async`; :mod:`jaxnigt.cli.clock_output` writes the
CSV and the summary (theory values from :mod:`jaxnigt.cluster.theory`).

Every flag is validated before anything is computed; a bad flag prints one line to stderr
naming the flag and the allowed values, exits with status 2 and writes nothing.  The CSV is
written atomically (temporary file + ``os.replace``).

Example::

    jaxnigt clock --n 10 --h sqrt --noise exponential --M 50 --rule rennala --rounds 100
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import jax
import numpy as np

from jaxnigt.cli import clock_output as output
from jaxnigt.cluster import events, schedules, timing
from jaxnigt.cluster.options import check_choice
from jaxnigt.cluster.simulation import (
    ROUND_RULES,
    simulate_async,
    simulate_ringmaster,
    simulate_rule_rounds,
    simulate_seed,
)
from jaxnigt.cluster.timing import TimeModel
from jaxnigt.config import checks
from jaxnigt.run import sizing

RULES = (*ROUND_RULES, "async", "ringmaster", "seed")
DEFAULT_OUT = "clock.csv"


class FlagError(ValueError):
    """A command-line flag has a bad value."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")
        self.flag = flag


@dataclasses.dataclass(frozen=True)
class ClockConfig:
    """Validated ``clock`` options.

    Attributes:
      n: number of workers.
      M: batch size of the rule.
      rule: one of :data:`RULES`.
      inflight: ``cancel`` or ``discard``.
      rounds: number of rounds.
      seed: PRNG seed.
      capacity: Malenia per-worker capacity.
      per_worker: synchronous per-worker batch.
      out: CSV path.
      noise: noise kind (for the summary).
      allreduce: who takes part in a round's AllReduce (round rules).
      link: the server link of ``--rule async`` and ``--rule seed``.
      horizon: steps per trajectory (``--rule seed``; also ``--per-step``).
      batch: trajectories per learner update (``--rule seed``).
      message: each worker's step exchange time (``--rule seed``).
      inference_time, learner_time: ``--rule seed``'s per-step and per-update times.
      R, stops: ``--rule ringmaster``'s delay threshold and calculation stops.
    """

    n: int
    M: int
    rule: str
    inflight: str
    rounds: int
    seed: int
    capacity: int
    per_worker: int
    out: str
    noise: str
    allreduce: str = "all"
    link: str = "shared"
    horizon: int | None = None
    batch: int = 1
    message: tuple[float, ...] = ()
    inference_time: float = 0.0
    learner_time: float = 0.0
    R: int = 1
    stops: bool = False


def _int(flag: str, raw, minimum: int | None = 1) -> int:
    try:
        return checks.integer_text(flag, raw, minimum)
    except checks.CheckError as e:
        raise FlagError(flag, str(e).removeprefix(f"{flag}: ")) from None


def _per_worker(raw: str) -> int | str:
    """``--per-worker``: an integer >= 1 or ``match_M`` (Rennala's M spread over n)."""
    return raw if raw == schedules.MATCH_M else _int("--per-worker", raw)


def _time(flag: str, raw) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and value >= 0):
        raise FlagError(flag, f"got {raw!r}; expected a finite number >= 0")
    return value


def _seed_options(args, n: int, kappa: np.ndarray, horizon: int | None) -> dict:
    """``--rule seed``'s options (and the check that it has a horizon)."""
    if args.rule != "seed":
        return {}
    if horizon is None:
        raise FlagError("--horizon", "required with --rule seed: an integer >= 1")
    batch = n if args.batch is None else _int("--batch", args.batch)
    if args.message_time is not None:
        try:
            message = timing.profile_values(args.message_time, n, name="message time",
                                            allow_zero=True)  # fmt: skip
        except ValueError as e:
            raise FlagError(
                "--message-time", f"{e}; allowed: a number or {n} values >= 0"
            ) from None
    else:
        size = 1 if args.message_size is None else _int("--message-size", args.message_size)
        message = kappa * float(size) ** 0.25
    return {
        "batch": batch,
        "message": tuple(float(m) for m in message),
        "inference_time": _time("--inference-time", args.inference_time),
        "learner_time": _time("--learner-time", args.learner_time),
    }


def _choice(flag: str, raw: str, allowed: tuple[str, ...]) -> str:
    try:
        return check_choice(flag, raw, allowed)
    except ValueError as e:
        raise FlagError(flag, str(e).removeprefix(f"{flag}: ")) from None


def _check_size(n: int, rounds: int, rule: str) -> None:
    """``--n`` too large for this machine's memory (:mod:`jaxnigt.run.sizing`) is a flag error."""
    needed = lambda m: sizing.clock_bytes(m, rounds, per_round=rule in ROUND_RULES)
    try:
        sizing.check(f"the {rule} clock of {rounds:,} rows", needed, n, name="n")
    except sizing.SizeError as e:
        reason = str(e).removeprefix("n = ").replace(": ", "; ", 1)
        raise FlagError("--n", f"got {reason}") from None


def _profiles(args: argparse.Namespace, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``--h`` and ``--kappa`` as ``[n]`` values."""
    allowed_profiles = f"{'|'.join(timing.PROFILES)} or {n} comma-separated values"
    try:
        h = timing.profile_values(args.h, n, name="h")
    except ValueError as e:
        raise FlagError("--h", f"{e}; allowed: {allowed_profiles} > 0") from None
    try:
        kappa = timing.profile_values(args.kappa, n, name="kappa", allow_zero=True)
    except ValueError as e:
        raise FlagError("--kappa", f"{e}; allowed: {allowed_profiles} >= 0") from None
    return h, kappa


def validate(args: argparse.Namespace) -> tuple[ClockConfig, TimeModel]:
    """Validates every flag (before any computation); raises :class:`FlagError`."""
    n = _int("--n", args.n)
    M = _int("--M", args.M)
    rounds = _int("--rounds", args.rounds)
    seed = _int("--seed", args.seed, minimum=0)
    rule = _choice("--rule", args.rule, RULES)
    _check_size(n, rounds, rule)  # before anything of size n is built
    if rule == "msync" and M > n:
        raise FlagError("--M", f"got {M}; --rule msync waits for m = M <= n = {n} workers")
    inflight = _choice("--inflight", args.inflight, schedules.INFLIGHT)
    allreduce = _choice("--allreduce", args.allreduce, schedules.ALLREDUCE)
    link = _choice("--link", args.link, events.LINKS)
    h, kappa = _profiles(args, n)
    try:
        kind, _ = timing.parse_noise(args.noise)
    except ValueError as e:
        raise FlagError("--noise", str(e)) from None
    dim = None if args.dim is None else _int("--dim", args.dim)
    horizon = None if args.horizon is None else _int("--horizon", args.horizon)
    if args.per_step and horizon is None:
        raise FlagError("--horizon", "required with --per-step: an integer >= 1")
    capacity = (
        schedules.default_malenia_capacity(M, n)
        if args.capacity is None
        else _int("--capacity", args.capacity)
    )
    per_worker = schedules.sync_batch(M, n, _per_worker(args.per_worker))
    central = _seed_options(args, n, kappa, horizon)
    R = n if args.R is None else _int("--R", args.R)
    if args.stops and rule != "ringmaster":
        raise FlagError("--stops", "only with --rule ringmaster")
    out = DEFAULT_OUT if args.out is None else str(args.out)
    parent = os.path.dirname(os.path.abspath(out))
    if not out or os.path.isdir(out) or not os.path.isdir(parent):
        raise FlagError("--out", f"expected a file path in an existing directory, got {out!r}")
    if not os.access(parent, os.W_OK):
        raise FlagError("--out", f"cannot write {out!r}: its directory {parent!r} is not writable")
    tm = timing.make_time_model(
        n,
        h=h,
        noise=args.noise,
        kappa=kappa,
        scale_by_dim=dim is not None,
        dim=dim,
        per_step=bool(args.per_step),
        horizon=horizon,
    )
    cfg = ClockConfig(
        n, M, rule, inflight, rounds, seed, capacity, per_worker, out, kind, allreduce,
        link, horizon, **central, R=R, stops=bool(args.stops),
    )  # fmt: skip
    return cfg, tm


def run(args: argparse.Namespace) -> int:
    """Runs the ``clock`` command; returns the exit status (2 on a bad flag)."""
    try:
        cfg, tm = validate(args)
    except FlagError as e:
        print(f"jaxnigt clock: error: {e}", file=sys.stderr)
        return 2
    try:
        status = _simulate(cfg, tm)
    except OSError as e:  # the CSV is written atomically: nothing is left behind
        if e.filename != cfg.out:  # not the CSV's write (it names its file)
            raise
        reason = e.strerror or str(e)
        print(f"jaxnigt clock: error: --out: cannot write {cfg.out!r}: {reason}", file=sys.stderr)
        return 2
    if args.out is None:
        print(f"[jaxnigt] wrote {os.path.abspath(cfg.out)} (the default --out)")
    return status


def _simulate(cfg: ClockConfig, tm: TimeModel) -> int:
    """Simulates ``cfg``'s rule, writes its CSV and prints its summary."""
    key = jax.random.key(cfg.seed)
    if cfg.rule == "seed":
        final, batches, _ = simulate_seed(
            tm, key, np.asarray(cfg.message, np.float32), horizon=cfg.horizon,
            batch=cfg.batch, updates=cfg.rounds, inference=cfg.inference_time,
            learner_time=cfg.learner_time, link=cfg.link,
        )  # fmt: skip
        final, batches = jax.tree.map(np.asarray, (final, batches))
        lines, lag = output.seed_rows(batches)
        output.write_lines(cfg.out, lines)
        print(output.seed_summary(cfg, final, batches, lag))
        return 0
    if cfg.rule == "ringmaster":
        final, ev = simulate_ringmaster(
            tm, key, arrivals=cfg.rounds, R=cfg.R, link=cfg.link, stops=cfg.stops
        )
        final, ev = jax.tree.map(np.asarray, (final, ev))
        output.write_ringmaster_csv(cfg.out, ev)
        print(output.ringmaster_summary(cfg, final, ev))
        return 0
    if cfg.rule == "async":
        final, arr = simulate_async(tm, key, arrivals=cfg.rounds, link=cfg.link)
        final, arr = jax.tree.map(np.asarray, (final, arr))
        output.write_async_csv(cfg.out, arr)
        print(output.async_summary(cfg, tm, final, arr))
        return 0
    res = simulate_rule_rounds(
        tm,
        key,
        rule=cfg.rule,
        M=cfg.M,
        rounds=cfg.rounds,
        inflight=cfg.inflight,
        capacity=cfg.capacity,
        per_worker=cfg.per_worker,
        allreduce=cfg.allreduce,
    )
    res = jax.tree.map(np.asarray, res)
    output.write_csv(cfg.out, res, cfg.n)
    print(output.summary(cfg, tm, res))
    return 0


def _one_line_error(parser: argparse.ArgumentParser):
    def error(message: str):
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)

    return error


def _add_arguments(p: argparse.ArgumentParser) -> None:
    # Values are parsed as strings and validated in `validate`, so every bad value gets one
    # uniform error line naming the flag and the allowed values.
    p.add_argument("--n", default="10", help="number of workers (>= 1)")
    p.add_argument("--h", default="equal", help="equal|sqrt|linear|decreasing or n values")
    p.add_argument(
        "--noise",
        default="deterministic",
        help="deterministic|exponential|lognormal:SIGMA|uniform:LOW:HIGH|straggler:P:FACTOR",
    )
    p.add_argument("--kappa", default="0", help="communication-time profile or n values")
    p.add_argument("--dim", default=None, help="if given, kappa is multiplied by dim^(1/4)")
    p.add_argument("--M", default="50", help="batch size (>= 1; msync: m <= n)")
    p.add_argument(
        "--rule", default="rennala", help="rennala|malenia|sync|msync|async|ringmaster|seed"
    )
    p.add_argument("--inflight", default="cancel", help="cancel|discard (round rules)")
    p.add_argument(
        "--allreduce", default="all", help="all|contributors: who joins a round's AllReduce"
    )
    p.add_argument(
        "--link", default="shared",
        help="shared|independent (server link: async, ringmaster and seed)",
    )  # fmt: skip
    p.add_argument("--R", default=None, help="ringmaster: delay threshold R (>= 1; default n)")
    p.add_argument(
        "--stops", action="store_true", help="ringmaster: cancel a gradient when its delay is R"
    )
    p.add_argument(
        "--rounds", default="10",
        help="rounds (arrivals with --rule async, exchanges with --rule ringmaster, learner "
        "updates with --rule seed) (>= 1)",
    )  # fmt: skip
    p.add_argument("--seed", default="0", help="PRNG seed (>= 0)")
    p.add_argument("--out", default=None, help=f"CSV output path (default ./{DEFAULT_OUT})")
    p.add_argument("--per-step", action="store_true", help="h is per env step (times H)")
    p.add_argument("--horizon", default=None, help="H, required with --per-step")
    p.add_argument("--capacity", default=None, help="Malenia per-worker capacity (6M)")
    p.add_argument(
        "--per-worker", default="1", help="sync batch per worker: an integer or match_M (1)"
    )
    p.add_argument("--batch", default=None, help="seed: trajectories per learner update (n)")
    p.add_argument(
        "--message-time", default=None,
        help="seed: step exchange time, a number or n values (default: kappa)",
    )  # fmt: skip
    p.add_argument(
        "--message-size", default=None,
        help="seed: the default step exchange costs kappa * SIZE^(1/4) (o + a)",
    )  # fmt: skip
    p.add_argument("--inference-time", default="0", help="seed: learner inference per step")
    p.add_argument("--learner-time", default="0", help="seed: time of one learner update")
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.set_defaults(func=run)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers the ``clock`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "clock",
        help="simulate the cluster's clock (rounds, async arrivals or per-step exchanges) and "
        "write a CSV",
        description=__doc__.split("\n\n")[0],
    )
    _add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m jaxnigt.cli.clock``), used by tests."""
    p = argparse.ArgumentParser(prog="jaxnigt clock", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
