"""``jaxnigt clock``: simulate the simulated cluster's clock alone, no training.

Round rules (``rennala``, ``malenia``, ``sync``, ``msync``: ``--M`` is then m, the workers a
round waits for; ``mindflayer``: ``--M`` is the expected successes its attempts are
prescribed for, ``--time-limit`` and ``--attempts`` its options; and every rule a plugin
registers, :mod:`jaxnigt.plugins`) run ``--rounds``
rounds (``lax.scan`` inside one ``jax.jit``; round ``r`` uses ``fold_in(key(seed), r)``) and
write one CSV row per round::

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

``--power`` gives the workers a computation power over time, as the config's
``cluster.power`` (``constant``, ``outages:UP:DOWN``, ``periodic:PERIOD:LOW`` or
``trace:FILE``; docs/cluster_model.md, "Computation power"): a drawn or periodic power needs
``--power-horizon``, the time it covers (the clock has no budget), and outages are drawn from
the ``--seed`` key (:func:`jaxnigt.cluster.model.realize`, as every clock and run draws
them; :mod:`jaxnigt.cli.clock_power` checks them).  A round (or arrival) that can never end
stops the clock: the CSV and summary hold the rows before it, and a note on stderr names it.
``--plot FILE`` also draws the timeline of those rows (:mod:`jaxnigt.cli.clock_plot`).

This module is the command only: it reads the flags through the config's own schema and
checks (the cluster's flags are a :class:`~jaxnigt.config.schema.ClusterConfig`, the rule's
sizes the :class:`~jaxnigt.config.schema.HParams` keys of the same meaning, each named by its
flag in an error) and builds the cluster model (:func:`jaxnigt.cluster.model.from_config`);
:mod:`jaxnigt.cli.clock_output` passes it whole to :mod:`jaxnigt.cluster.simulation` and writes
the CSV and the summary (theory values from :mod:`jaxnigt.cluster.theory`).  The named
choices' flags (``--inflight``, ``--link``, ``--allreduce``) come from
:data:`jaxnigt.cluster.model.CHOICES`, as the config's keys do.

Every flag is validated before anything is computed; a bad flag prints one line to stderr
naming the flag and the allowed values, exits with status 2 and writes nothing.  The CSV is
written atomically (temporary file + ``os.replace``; through a symlink to its target), and
an ``--out`` that is a device, a pipe or a run directory's own file is refused.

Example::

    jaxnigt clock --n 10 --h sqrt --noise exponential --M 50 --rule rennala --rounds 100
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import jax
import numpy as np

from jaxnigt.cli import clock_output, clock_plot, clock_power
from jaxnigt.cluster import model, power_sources, rules, schedules, simulation, timeline, timing
from jaxnigt.cluster.rules import mindflayer, ringleader
from jaxnigt.config import checks, loader, schema
from jaxnigt.run import run_dir, sizing

#: The clocks that are not round rules (every registered round rule is one more).
OTHER_CLOCKS = ("async", "ringmaster", "ringleader_asgd", "seed")


def known_rules() -> tuple[str, ...]:
    """What ``--rule`` accepts: every registered round rule (:mod:`jaxnigt.cluster.rules`, a
    plugin's included), then :data:`OTHER_CLOCKS`."""
    return (*simulation.round_rules(), *OTHER_CLOCKS)


DEFAULT_OUT = "clock.csv"

#: The flag of each ``cluster:`` key (:class:`~jaxnigt.config.schema.ClusterConfig`).
CLUSTER_FLAGS = {
    "n": "--n",
    "h": "--h",
    "noise": "--noise",
    "kappa": "--kappa",
    "scale_by_dim": "--dim",
    "per_step": "--per-step",
    "power": "--power",
    "power_horizon": "--power-horizon",
    **{choice.name: "--" + choice.name.replace("_", "-") for choice in model.CHOICES},
}
#: The flag of each ``hparams:`` key the rules read (:class:`~jaxnigt.config.schema.HParams`).
HPARAM_FLAGS = {
    "M": "--M",
    "malenia_capacity": "--capacity",
    "per_worker_batch": "--per-worker",
    "ringmaster_R": "--R",
    "ringmaster_stops": "--stops",
    "seed_batch": "--batch",
    "seed_learner_time": "--learner-time",
    "seed_inference_time": "--inference-time",
    "mindflayer_time_limit": "--time-limit",
    "mindflayer_attempts": "--attempts",
}
#: The flags of ``--rule mindflayer`` alone.
MINDFLAYER_FLAGS = ("time_limit", "attempts")


class FlagError(ValueError):
    """A command-line flag has a bad value."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")
        self.flag = flag


def _int(flag: str, raw, minimum: int | None = 1) -> int:
    try:
        return checks.integer_text(flag, raw, minimum)
    except checks.CheckError as e:
        raise FlagError(flag, str(e).removeprefix(f"{flag}: ")) from None


def _scalar(raw: Any) -> Any:
    """A flag's text as the value a config file would give: an integer, a number, or the
    text itself (``sqrt``, ``1,2,3``, ``match_M``)."""
    if not isinstance(raw, str):
        return raw
    for parse in (int, float):
        try:
            return parse(raw.strip())
        except ValueError:
            pass
    return raw


def _section(cls: type, flags: dict[str, str], values: dict[str, Any]) -> Any:
    """A config section from flag values, validated by the section's own checks.

    Args:
      cls: the section's dataclass.
      flags: the flag of each key.
      values: each key's value as the flag gave it (text, or a bool).

    Returns:
      The section (keys not given take their defaults).

    Raises:
      FlagError: naming the flag.
    """
    raw = {key: _scalar(value) for key, value in values.items()}
    try:
        return checks.parse_dataclass(cls, raw, "", name=lambda key: flags.get(key, key))
    except checks.ConfigError as e:
        flag, message = str(e).split(": ", 1)
        raise FlagError(flag, message) from None


def _cluster(args: argparse.Namespace, n: int) -> Any:
    """The ``cluster:`` section of the flags (:class:`~jaxnigt.config.schema.ClusterConfig`)."""
    values = {"n": n, "h": args.h, "noise": args.noise, "kappa": args.kappa}
    values |= {"scale_by_dim": args.dim is not None, "per_step": bool(args.per_step)}
    values |= {"power": args.power, "power_horizon": args.power_horizon}
    values |= {choice.name: getattr(args, choice.name) for choice in model.CHOICES}
    return _section(schema.ClusterConfig, CLUSTER_FLAGS, values)


def _hparams(args: argparse.Namespace) -> Any:
    """The rules' sizes (:class:`~jaxnigt.config.schema.HParams`), from the flags."""
    values = {
        "M": args.M,
        "malenia_capacity": args.capacity,
        "per_worker_batch": args.per_worker,
        "ringmaster_R": args.R,
        "ringmaster_stops": bool(args.stops),
        "seed_batch": args.batch,
        "seed_learner_time": args.learner_time,
        "seed_inference_time": args.inference_time,
    }
    for name in MINDFLAYER_FLAGS:  # given only: their defaults are the config's
        if getattr(args, name) is not None:
            values[f"mindflayer_{name}"] = getattr(args, name)
    return _section(schema.HParams, HPARAM_FLAGS, values)


def _message(args: argparse.Namespace, n: int, cluster: Any) -> np.ndarray | None:
    """``--rule seed``'s step exchange times: ``--message-time``, else each worker's κ_i
    (unscaled by ``--dim``) times ``--message-size`` ^ (1/4)."""
    if args.rule != "seed":
        return None
    if args.message_time is not None:
        try:
            return timing.profile_values(args.message_time, n, name="message time", allow_zero=True)
        except ValueError as e:
            raise FlagError(
                "--message-time", f"{e}; allowed: a number or {n} values >= 0"
            ) from None
    size = 1 if args.message_size is None else _int("--message-size", args.message_size)
    kappa = timing.profile_values(cluster.kappa, n, name="kappa", allow_zero=True)
    return kappa * float(size) ** 0.25


def _build(cluster: Any, **kw: Any) -> model.ClusterModel:
    """The cluster model of the flags (a power spec's error names its flag)."""
    found = clock_power.problem(cluster)
    if found is not None:
        raise FlagError(*found)
    try:
        return model.from_config(cluster, **kw)
    except power_sources.TraceError as e:
        raise FlagError("--power", loader.power_text(e)) from None


def _choice(flag: str, raw: str, allowed: tuple[str, ...]) -> str:
    try:
        return model.check_choice(flag, raw, allowed)
    except ValueError as e:
        raise FlagError(flag, str(e).removeprefix(f"{flag}: ")) from None


def _check_size(n: int, rounds: int, rule: str) -> None:
    """``--n`` too large for this machine's memory (:mod:`jaxnigt.run.sizing`) is a flag error."""
    needed = lambda m: sizing.clock_bytes(m, rounds, per_round=rule not in OTHER_CLOCKS)
    try:
        sizing.check(f"the {rule} clock of {rounds:,} rows", needed, n, name="n")
    except sizing.SizeError as e:
        reason = str(e).removeprefix("n = ").replace(": ", "; ", 1)
        raise FlagError("--n", f"got {reason}") from None


def _out(raw: Any) -> str:
    """``--out``: a file path in an existing, writable directory."""
    out = DEFAULT_OUT if raw is None else str(raw)
    parent = os.path.dirname(os.path.abspath(out))
    if not out or os.path.isdir(out) or not os.path.isdir(parent):
        raise FlagError("--out", f"expected a file path in an existing directory, got {out!r}")
    if not os.access(parent, os.W_OK):
        raise FlagError("--out", f"cannot write {out!r}: its directory {parent!r} is not writable")
    if problem := run_dir.not_replaceable(out):  # a device or a pipe: never renamed over
        raise FlagError("--out", problem)
    if run_dir.run_file(out):
        raise FlagError("--out", f"{out!r} is a run directory's own file; choose another path")
    return out


def _settings(args: argparse.Namespace, n: int, hp: Any) -> argparse.Namespace:
    """The rule's settings: the flags that are not the cluster's, checked, with their
    defaults resolved (``--capacity`` 6M, ``--R`` and ``--batch`` n, ...)."""
    if args.rule == "msync" and hp.M > n:
        raise FlagError("--M", f"got {hp.M}; --rule msync waits for m = M <= n = {n} workers")
    horizon = None if args.horizon is None else _int("--horizon", args.horizon)
    if args.per_step and horizon is None:
        raise FlagError("--horizon", "required with --per-step: an integer >= 1")
    if args.rule == "seed" and horizon is None:
        raise FlagError("--horizon", "required with --rule seed: an integer >= 1")
    if args.stops and args.rule != "ringmaster":
        raise FlagError("--stops", "only with --rule ringmaster")
    if args.point != "held" and args.rule != "ringleader_asgd":
        raise FlagError("--point", "only with --rule ringleader_asgd")
    if args.point not in ringleader.POINTS:
        raise FlagError("--point", f"got {args.point!r}; expected one of {list(ringleader.POINTS)}")
    for name in MINDFLAYER_FLAGS:
        if getattr(args, name) is not None and args.rule != "mindflayer":
            raise FlagError("--" + name.replace("_", "-"), "only with --rule mindflayer")
    options = mindflayer.Options(hp.mindflayer_time_limit, hp.mindflayer_attempts)
    for flag, value in (("--time-limit", options.time_limit), ("--attempts", options.attempts)):
        if isinstance(value, tuple) and len(value) != n:
            raise FlagError(flag, f"got {len(value)} values; expected one per worker (n = {n})")
    return argparse.Namespace(
        rule=args.rule,
        M=hp.M,
        capacity=hp.malenia_capacity or schedules.default_malenia_capacity(hp.M, n),
        per_worker=schedules.sync_batch(hp.M, n, hp.per_worker_batch),
        R=hp.ringmaster_R or n,
        stops=hp.ringmaster_stops,
        horizon=horizon,
        batch=hp.seed_batch or n,
        inference_time=hp.seed_inference_time,
        learner_time=hp.seed_learner_time,
        mindflayer=options,
        point=args.point,
    )


def validate(args: argparse.Namespace) -> tuple[argparse.Namespace, model.ClusterModel]:
    """Validates every flag before any computation.

    Args:
      args: the parsed flags (text).

    Returns:
      ``(settings, cluster)``: the rule's settings (``rule``, ``rounds``, ``seed``, ``out``,
      its sizes) and the cluster model.

    Raises:
      FlagError: naming the first bad flag.
    """
    n = _int("--n", args.n)
    rounds = _int("--rounds", args.rounds)
    seed = _int("--seed", args.seed, minimum=0)
    rule = _choice("--rule", args.rule, known_rules())
    _check_size(n, rounds, rule)  # before anything of size n is built
    cluster = _cluster(args, n)
    settings = _settings(args, n, _hparams(args))
    dim = None if args.dim is None else _int("--dim", args.dim)
    message = _message(args, n, cluster)
    settings.rounds, settings.seed, settings.out = rounds, seed, _out(args.out)
    settings.power = cluster.power
    try:
        settings.plot = clock_plot.path(args.plot, settings.out)
    except ValueError as e:
        raise FlagError("--plot", str(e)) from None
    built = _build(cluster, dim=dim, horizon=settings.horizon, message=message)
    if settings.rule == "mindflayer":
        try:
            settings.mindflayer = settings.mindflayer.resolve(built)
        except ValueError as e:
            raise FlagError("--time-limit", str(e).split(": ", 1)[-1]) from None
    return settings, built


def _mindflayer(settings: argparse.Namespace, cluster: model.ClusterModel) -> int:
    """``--rule mindflayer``: its rounds under the flags' options
    (:func:`jaxnigt.cluster.rules.mindflayer.simulate_rounds`), written and summed up as every
    round rule's (:mod:`jaxnigt.cli.clock_output`), its options in the summary."""
    key = jax.random.key(settings.seed)
    options = settings.mindflayer
    res = mindflayer.simulate_rounds(
        cluster, key, M=settings.M, rounds=settings.rounds, options=options
    )
    if getattr(settings, "plot", None):
        size = rules.RoundSize(M=settings.M)
        res |= simulation.round_gradients(cluster, key, res, rule="mindflayer", size=size)
    res = jax.tree.map(np.asarray, res)

    def write_rounds(r):
        clock_output.write_csv(settings.out, r, cluster.n)

        def line():
            head, out = clock_output.summary(settings, cluster, r).rsplit(" -> ", 1)
            return f"{head} {options.spec} -> {out}"

        return line

    picture = lambda r: timeline.from_rounds(cluster, key, r, rule="mindflayer")
    return clock_output._emit(settings, cluster, "round", res["t_end"], res, write_rounds, picture)


def run(args: argparse.Namespace) -> int:
    """Runs the ``clock`` command.

    Args:
      args: the parsed flags.

    Returns:
      The exit status (2 on a bad flag or an unwritable ``--out``).
    """
    try:
        settings, cluster = validate(args)
    except FlagError as e:
        print(f"jaxnigt clock: error: {e}", file=sys.stderr)
        return 2
    try:
        simulate = _mindflayer if settings.rule == "mindflayer" else clock_output.simulate
        status = simulate(settings, cluster)
    except OSError as e:  # the CSV is written atomically: nothing is left behind
        if e.filename != settings.out:  # not the CSV's write (it names its file)
            raise
        reason = e.strerror or str(e)
        print(
            f"jaxnigt clock: error: --out: cannot write {settings.out!r}: {reason}",
            file=sys.stderr,
        )
        return 2
    if args.out is None:
        print(f"[jaxnigt] wrote {os.path.abspath(settings.out)} (the default --out)")
    return status


def _one_line_error(parser: argparse.ArgumentParser):
    def error(message: str):
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)

    return error


def _add_arguments(p: argparse.ArgumentParser) -> None:
    # Values are parsed as strings and validated in `validate`, so every bad value gets one
    # uniform error line naming the flag and the allowed values.
    p.add_argument("--n", default="10", help="number of workers (>= 1)")
    profiles = "|".join(timing.PROFILES)
    p.add_argument("--h", default="equal", help=f"{profiles} or n values")
    p.add_argument("--noise", default="deterministic", help="|".join(timing.NOISE_FORMS))
    p.add_argument("--kappa", default="0", help="communication-time profile or n values")
    p.add_argument("--dim", default=None, help="if given, kappa is multiplied by dim^(1/4)")
    p.add_argument(
        "--M", default="50", help="batch size (>= 1; msync: m <= n; mindflayer: expected successes)"
    )
    p.add_argument("--rule", default="rennala", help="|".join(known_rules()))
    for choice in model.CHOICES:
        help_text = f"{'|'.join(choice.values)}: {choice.help}"
        flag = CLUSTER_FLAGS[choice.name]  # --down-exchange, also as --down_exchange
        aliases = [f"--{choice.name}"] if flag != f"--{choice.name}" else []
        p.add_argument(flag, *aliases, dest=choice.name, default=choice.default, help=help_text)
    clock_power.add_arguments(p)
    p.add_argument("--R", default=None, help="ringmaster: delay threshold R (>= 1; default n)")
    p.add_argument(
        "--stops", action="store_true", help="ringmaster: cancel a gradient when its delay is R"
    )
    p.add_argument(
        "--point",
        default="held",
        help="ringleader_asgd: held|current, the point a worker computes at after an "
        "exchange that is not its update (its own, or the server's)",
    )
    p.add_argument(
        "--rounds",
        default="10",
        help="rounds (arrivals with --rule async, exchanges with --rule ringmaster or "
        "ringleader_asgd, learner "
        "updates with --rule seed) (>= 1)",
    )
    p.add_argument("--seed", default="0", help="PRNG seed (>= 0)")
    p.add_argument("--out", default=None, help=f"CSV output path (default ./{DEFAULT_OUT})")
    clock_plot.add_arguments(p)
    p.add_argument("--per-step", action="store_true", help="h is per env step (times H)")
    p.add_argument("--horizon", default=None, help="H, required with --per-step")
    p.add_argument("--capacity", default=None, help="Malenia per-worker capacity (6M)")
    p.add_argument(
        "--per-worker", default="1", help="sync batch per worker: an integer or match_M (1)"
    )
    p.add_argument("--batch", default=None, help="seed: trajectories per learner update (n)")
    p.add_argument(
        "--message-time",
        default=None,
        help="seed: step exchange time, a number or n values (default: kappa)",
    )
    p.add_argument(
        "--message-size",
        default=None,
        help="seed: the default step exchange costs kappa * SIZE^(1/4) (o + a)",
    )
    p.add_argument("--inference-time", default="0", help="seed: learner inference per step")
    p.add_argument(
        "--time-limit",
        default=None,
        help="mindflayer: an attempt's time limit t_i: median (default), quantile:U, a "
        "number c (t_i = c h_i) or n values",
    )
    p.add_argument(
        "--attempts",
        default=None,
        help="mindflayer: attempts per worker and round: prescribed (default, for M expected "
        "successes), an integer or n values",
    )
    p.add_argument("--learner-time", default="0", help="seed: time of one learner update")
    p.error = _one_line_error(p)  # type: ignore[method-assign]
    p.set_defaults(func=run)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers the ``clock`` subcommand.

    Args:
      subparsers: an argparse subparsers object.

    Returns:
      The subcommand's parser.
    """
    p = subparsers.add_parser(
        "clock",
        help="simulate the cluster's clock (rounds, async arrivals or per-step exchanges) and "
        "write a CSV",
        description=__doc__.split("\n\n")[0],
    )
    _add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m jaxnigt.cli.clock``), used by tests.

    Args:
      argv: the flags (default ``sys.argv[1:]``).

    Returns:
      The exit status.
    """
    p = argparse.ArgumentParser(
        prog="jaxnigt clock", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    _add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
