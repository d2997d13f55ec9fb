"""``jaxnigt clock``: simulate round schedules on the simulated cluster, no training.

Runs ``--rounds`` rounds of one collection rule (``lax.scan`` inside one ``jax.jit``; round
``r`` uses ``fold_in(key(seed), r)``) and writes one CSV row per round::

    round, t_start, t_collect_end, t_end, grads_used, time_wasted, comms, b_0, ..., b_{n-1}

then prints a one-line summary.  For deterministic times with ``--rule rennala`` the summary
also prints the theory value of the collection time (communication ignored; compare it with
``mean_collect``, which excludes the AllReduce):

    t* = min_m (sum_{i <= m} 1 / h_(i))^{-1} (M + m),  h sorted ascending.

Every flag is validated before anything is computed; a bad flag prints one line to stderr
naming the flag and the allowed values, exits with status 2 and writes nothing.  The CSV is
written atomically (temporary file + ``os.replace``).

Example::

    jaxnigt clock --n 10 --h sqrt --noise exponential --M 50 --rule rennala --rounds 100
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import schedules, timing
from jaxnigt.timing import TimeModel

RULES = ("rennala", "malenia", "sync")


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


def _int(flag: str, raw, minimum: int | None = 1) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise FlagError(flag, f"expected an integer >= {minimum}, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise FlagError(flag, f"expected an integer >= {minimum}, got {value}")
    return value


def _choice(flag: str, raw: str, allowed: tuple[str, ...]) -> str:
    if raw not in allowed:
        raise FlagError(flag, f"unknown value {raw!r}; allowed: {', '.join(allowed)}")
    return raw


def validate(args: argparse.Namespace) -> tuple[ClockConfig, TimeModel]:
    """Validates every flag (before any computation); raises :class:`FlagError`."""
    n = _int("--n", args.n)
    M = _int("--M", args.M)
    rounds = _int("--rounds", args.rounds)
    seed = _int("--seed", args.seed, minimum=0)
    rule = _choice("--rule", args.rule, RULES)
    inflight = _choice("--inflight", args.inflight, schedules.INFLIGHT)
    allowed_profiles = f"{'|'.join(timing.PROFILES)} or {n} comma-separated values"
    try:
        h = timing.profile_values(args.h, n, name="h")
    except ValueError as e:
        raise FlagError("--h", f"{e}; allowed: {allowed_profiles} > 0") from None
    try:
        kappa = timing.profile_values(args.kappa, n, name="kappa", allow_zero=True)
    except ValueError as e:
        raise FlagError("--kappa", f"{e}; allowed: {allowed_profiles} >= 0") from None
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
    per_worker = schedules.sync_batch(
        M, n, None if args.per_worker is None else _int("--per-worker", args.per_worker)
    )
    out = str(args.out)
    parent = os.path.dirname(os.path.abspath(out))
    if not out or os.path.isdir(out) or not os.path.isdir(parent):
        raise FlagError("--out", f"expected a file path in an existing directory, got {out!r}")
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
    cfg = ClockConfig(n, M, rule, inflight, rounds, seed, capacity, per_worker, out, kind)
    return cfg, tm


@functools.partial(
    jax.jit, static_argnames=("rule", "M", "rounds", "inflight", "capacity", "per_worker")
)
def simulate_rounds(
    tm: TimeModel,
    key: jax.Array,
    *,
    rule: str,
    M: int,
    rounds: int,
    inflight: str = "cancel",
    capacity: int | None = None,
    per_worker: int | None = None,
) -> dict[str, jax.Array]:
    """Runs ``rounds`` rounds of ``rule`` from time 0 with keys ``fold_in(key, r)``.

    Returns:
      dict of per-round arrays with leading axis ``[rounds]``: ``t_start``,
      ``t_collect_end``, ``t_end``, ``grads_used``, ``time_wasted``, ``traj_wasted``,
      ``time_used``, ``comms``, ``overflow`` and ``counts`` ``[rounds, n]``.
    """
    if rule == "rennala":
        fn = functools.partial(schedules.rennala, M=M, inflight=inflight)
    elif rule == "malenia":
        cap = schedules.default_malenia_capacity(M, tm.n) if capacity is None else capacity
        fn = functools.partial(schedules.malenia, M=M, capacity=cap, inflight=inflight)
    elif rule == "sync":
        b = schedules.sync_batch(M, tm.n, per_worker)
        fn = functools.partial(schedules.sync, per_worker=b, inflight=inflight)
    else:
        raise ValueError(f"unknown rule {rule!r}; allowed: {', '.join(RULES)}")

    def step(carry, r):
        t0, busy = carry
        s = fn(tm, jax.random.fold_in(key, r), t0, busy)
        out = {
            "t_start": s.t_start,
            "t_collect_end": s.t_collect_end,
            "t_end": s.t_end,
            "grads_used": s.num_slots,
            "time_wasted": s.time_wasted,
            "traj_wasted": s.traj_wasted,
            "time_used": s.time_used,
            "comms": s.comms,
            "overflow": s.overflow,
            "counts": s.counts,
        }
        return (s.t_end, s.busy_until), out

    init = (jnp.float32(0.0), jnp.zeros((tm.n,), jnp.float32))
    _, per_round = jax.lax.scan(step, init, jnp.arange(rounds))
    return per_round


def rennala_theory_time(h: np.ndarray, M: int) -> float:
    """Deterministic Rennala collection-time bound ``min_m (sum_{i<=m} 1/h_(i))^{-1} (M + m)``."""
    hs = np.sort(np.asarray(h, np.float64))
    m = np.arange(1, hs.size + 1)
    return float(np.min((M + m) / np.cumsum(1.0 / hs)))


def _write_csv(path: str, res: dict[str, np.ndarray], n: int) -> None:
    header = ["round", "t_start", "t_collect_end", "t_end", "grads_used", "time_wasted", "comms"]
    header += [f"b_{i}" for i in range(n)]
    lines = [",".join(header)]
    for r in range(res["t_start"].shape[0]):
        row = [str(r)]
        row += [f"{float(res[k][r]):.9g}" for k in ("t_start", "t_collect_end", "t_end")]
        row += [str(int(res["grads_used"][r])), f"{float(res['time_wasted'][r]):.9g}"]
        row += [str(int(res["comms"][r]))] + [str(int(b)) for b in res["counts"][r]]
        lines.append(",".join(row))
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".clock-", suffix=".csv.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _summary(cfg: ClockConfig, tm: TimeModel, res: dict[str, np.ndarray]) -> str:
    round_time = res["t_end"] - res["t_start"]
    collect = res["t_collect_end"] - res["t_start"]
    total = float(res["t_end"][-1] - res["t_start"][0])
    util = float(np.sum(res["time_used"])) / max(cfg.n * total, 1e-30)
    parts = [
        f"clock: rule={cfg.rule} n={cfg.n} M={cfg.M} inflight={cfg.inflight}",
        f"rounds={cfg.rounds}",
        f"mean_round_time={np.mean(round_time):.6g}",
        f"mean_collect={np.mean(collect):.6g}",
        f"grads/round={np.mean(res['grads_used']):.6g}",
        f"wasted_time/round={np.mean(res['time_wasted']):.6g}",
        f"utilisation={util:.4f}",
        f"comms={int(np.sum(res['comms']))}",
    ]
    if cfg.rule == "malenia":
        parts.append(f"overflow_rounds={int(np.sum(res['overflow']))}")
    if cfg.rule == "rennala" and cfg.noise == "deterministic":
        theory = rennala_theory_time(np.asarray(tm.h), cfg.M)
        parts.append(f"theory_collect={theory:.6g} (kappa ignored)")
    parts.append(f"-> {cfg.out}")
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    """Runs the ``clock`` command; returns the exit status (2 on a bad flag)."""
    try:
        cfg, tm = validate(args)
    except FlagError as e:
        print(f"jaxnigt clock: error: {e}", file=sys.stderr)
        return 2
    res = simulate_rounds(
        tm,
        jax.random.key(cfg.seed),
        rule=cfg.rule,
        M=cfg.M,
        rounds=cfg.rounds,
        inflight=cfg.inflight,
        capacity=cfg.capacity,
        per_worker=cfg.per_worker,
    )
    res = jax.tree.map(np.asarray, res)
    _write_csv(cfg.out, res, cfg.n)
    print(_summary(cfg, tm, res))
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
    p.add_argument("--M", default="50", help="batch size (>= 1)")
    p.add_argument("--rule", default="rennala", help="rennala|malenia|sync")
    p.add_argument("--inflight", default="cancel", help="cancel|discard")
    p.add_argument("--rounds", default="10", help="number of rounds (>= 1)")
    p.add_argument("--seed", default="0", help="PRNG seed (>= 0)")
    p.add_argument("--out", default="clock.csv", help="CSV output path")
    p.add_argument("--per-step", action="store_true", help="h is per env step (times H)")
    p.add_argument("--horizon", default=None, help="H, required with --per-step")
    p.add_argument("--capacity", default=None, help="Malenia per-worker capacity (6M)")
    p.add_argument("--per-worker", default=None, help="sync batch per worker (ceil(M/n))")
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.set_defaults(func=run)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers the ``clock`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "clock",
        help="simulate round schedules and write per-round times to CSV",
        description=__doc__.split("\n\n")[0],
    )
    _add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m jaxnigt.clock``), used by tests."""
    p = argparse.ArgumentParser(prog="jaxnigt clock", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
