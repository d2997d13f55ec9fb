"""Loading a config: a file or a mapping, ``KEY=VALUE`` overrides, the rules that involve
several fields, and the warnings about what is valid but likely unintended.

The fields, their defaults and their checks are the dataclasses of
:mod:`jaxnigt.config.schema`; this module reads a config into them (:func:`load`,
:func:`from_dict`) and raises :class:`~jaxnigt.config.checks.ConfigError` naming the field,
the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxnigt import algorithms
from jaxnigt.cluster import power_sources
from jaxnigt.config import checks
from jaxnigt.config.checks import ConfigError
from jaxnigt.config.schema import NUM_TYPES, ExperimentConfig, HParams
from jaxnigt.config.text import apply_overrides, parse_override, read_yaml


def power_text(error: Exception) -> str:
    """A power spec's error (:class:`jaxnigt.cluster.power_sources.TraceError`) as the rest of a
    line that already names the key or flag (``cluster.power: ...``, ``--power: ...``): without
    its own ``power`` prefix, a spec's own complaint as ``got SPEC; ...``."""
    text = str(error).removeprefix("power: ")
    spec = re.match(r"power ('[^']*'|\"[^\"]*\"): (.*)$", text)
    if spec:
        return f"got {spec[1]}; {spec[2]}"
    return text.removeprefix("power ")


def one_period(spec: str) -> float:
    """A horizon that checks a periodic power spec's numbers with a few stretches, not its
    whole trace (one period; 1 when PERIOD is no positive number, which the check names)."""
    try:
        period = float(spec.split(":")[1])
    except (IndexError, ValueError):
        return 1.0
    return period if math.isfinite(period) and period > 0 else 1.0


def _check_power(cfg: ExperimentConfig) -> None:
    """``cluster.power`` against n and the time it must cover (reads a trace file).  Nothing
    of size n × K is built here: a periodic spec's numbers are checked on a short horizon and
    a trace file's rows are read, not laid out, so that ``jaxnigt plan`` (and the check before
    a run) can size the trace first (:func:`jaxnigt.run.plan.power_trace`)."""
    c = cfg.cluster
    horizon = c.power_horizon if c.power_horizon is not None else cfg.budget
    until = "cluster.power_horizon" if c.power_horizon is not None else "the budget"
    try:
        source, args = power_sources.parse_power(c.power)
        if source == "trace":
            down = power_sources.all_down_from(power_sources.read_trace_rows(args[0], c.n), c.n)
            if horizon is not None and down < horizon:
                raise ConfigError(
                    f"cluster.power: trace {args[0]!r}: every worker is at speed 0 from "
                    f"t = {down:g} on, before {until} {horizon:g}: no gradient could ever "
                    "finish after it"
                )
            return
        if source == "periodic" and horizon is not None:  # its numbers, not its n × K trace
            horizon = one_period(c.power)
        power_sources.check_spec(c.power, c.n, horizon)
    except ConfigError:
        raise
    except ValueError as e:
        text = power_text(e)
        if text.endswith("does not exist"):  # the path tried, and the rule that gave it
            given = power_sources.trace_file(c.power) or ""
            tried = "" if os.path.isabs(given) else f" (tried {os.path.abspath(given)!r})"
            text = f"{text}{tried}; {TRACE_PATH_RULE}"
        raise ConfigError(f"cluster.power: {text}") from None


#: Where a relative ``trace:FILE`` is read from (:func:`read`, :func:`load`).
TRACE_PATH_RULE = (
    "a relative trace path is read from the folder of the config file that gives it, and "
    "from the working directory when the command line gives it"
)


def trace_paths_in(raw: dict[str, Any], folder: str | Path) -> dict[str, Any]:
    """``raw`` with the relative trace paths it gives (``cluster.power`` and a ``sweep:``
    section's ``cluster.power`` values) made absolute in ``folder``: a config file's folder
    (:func:`read`), the working directory for the command line's (:func:`load`, and each
    sweep point's ``--set`` and ``--over`` values: :func:`jaxnigt.studies.sweep.sweep_points`)."""
    cluster = raw.get("cluster")
    if isinstance(cluster, Mapping) and "power" in cluster:
        raw["cluster"] = {**cluster, "power": power_sources.in_folder(cluster["power"], folder)}
    sweep = raw.get("sweep")
    over = sweep.get("over") if isinstance(sweep, Mapping) else None
    if isinstance(over, Mapping) and isinstance(over.get("cluster.power"), list):
        values = [power_sources.in_folder(v, folder) for v in over["cluster.power"]]
        raw["sweep"] = {**sweep, "over": {**over, "cluster.power": values}}
    return raw


def _check_consistency(cfg: ExperimentConfig) -> None:
    """Rules that involve several fields."""
    env, n = cfg.env, cfg.cluster.n
    if cfg.budget is None and cfg.max_rounds is None:
        raise ConfigError(
            "budget: got null and max_rounds is null; set at least one stop criterion"
        )
    # Only what runs is checked against the cluster: the values of an algorithm the config
    # does not list were checked for type and range, and may be for another n (a sweep).
    for path, hp in [("hparams", cfg.hparams)] + [
        (f"per_algorithm.{a}", h) for a, h in cfg.per_algorithm.items() if a in cfg.algorithms
    ]:
        if hp.msync_m is not None and hp.msync_m > n and "msync_nigt" in cfg.algorithms:
            raise ConfigError(
                f"{path}.msync_m: got {hp.msync_m}; an m-synchronous round waits for at most "
                f"cluster.n = {n} workers"
            )
    _check_power(cfg)
    if env.types is not None and len(env.types) != n:
        raise ConfigError(
            f"env.types: got {len(env.types)} entries; expected one per worker (cluster.n = {n})"
        )
    num_types = _num_types(env)
    if num_types == 1:
        if env.types is not None and any(env.types):
            raise ConfigError(
                "env.types: a non-zero type needs env.heterogeneous (e.g. sign_flip) or env.physics"
            )
        return
    if cfg.eval.episodes < num_types:
        raise ConfigError(
            f"eval.episodes: got {cfg.eval.episodes}; expected >= {num_types}, one episode "
            f"per environment type at least"
        )
    what = "env.heterogeneous" if env.physics is None else "env.physics"
    if n < num_types and env.types is None:
        raise ConfigError(
            f"{what}: {num_types} environment types need cluster.n >= {num_types}, got n = {n}"
        )
    if env.types is not None and max(env.types) >= num_types:
        raise ConfigError(
            f"env.types: got {list(env.types)}; expected type ids in [0, {num_types})"
        )


def _num_types(env) -> int:
    """V: the observation types' count and the physics types' (which must agree)."""
    observed = 1 if env.heterogeneous is None else NUM_TYPES[env.heterogeneous]
    if env.physics is None:
        return observed
    if observed > 1 and env.physics.num_types != observed:
        raise ConfigError(
            f"env.physics: {env.physics.num_types} types, but env.heterogeneous "
            f"{env.heterogeneous!r} has {observed}; give one entry per type of both"
        )
    return env.physics.num_types


def algorithm_names() -> tuple[str, ...]:
    """The algorithms a config may name (:func:`jaxnigt.algorithms.names`)."""
    return algorithms.names()


def readers(key: str) -> tuple[str, ...]:
    """The algorithms that read the ``hparams`` key ``key`` (every one for the common keys)."""
    from jaxnigt.algorithms.core import COMMON

    if key in COMMON:
        return algorithms.names()
    return tuple(a for a in algorithms.names() if key in algorithms.traits(a).options)


def _check_read(path: str, hp: HParams, base: HParams, algorithms: Sequence[str]) -> None:
    """Each hyperparameter set away from ``base`` is read by one of ``algorithms``."""
    for f in dataclasses.fields(hp):
        if getattr(hp, f.name) == getattr(base, f.name):
            continue
        by = readers(f.name)
        if not set(by) & set(algorithms):
            raise ConfigError(
                f"{path}.{f.name}: set to {getattr(hp, f.name)!r}, but no algorithm of "
                f"{list(algorithms)} reads it; it is read by {', '.join(by)}"
            )


def _check_options(cfg: ExperimentConfig) -> None:
    """A family-specific hyperparameter (an engine's option, ``Traits.options``) that no
    algorithm it applies to reads is an error, not silently ignored."""
    _check_read("hparams", cfg.hparams, HParams(), cfg.algorithms)
    for name, hp in cfg.per_algorithm.items():
        _check_read(f"per_algorithm.{name}", hp, cfg.hparams, (name,))


class ConfigWarning(UserWarning):
    """A config value that is valid but does nothing, or gives a run little to show; the
    command line prints it as one ``[jaxnigt] warning:`` line."""


#: Below this many evaluations in the budget a curve and a time to a target say little.
MIN_EVALUATIONS = 20


def overridden_hparams(
    raw: Mapping[str, Any], cfg: ExperimentConfig, keys: Sequence[str]
) -> list[str]:
    """Those of the ``hparams`` ``keys`` that ``per_algorithm`` sets again for every listed
    algorithm of ``raw``, to another value for one of them at least: the ``hparams`` value
    is dead.

    ``raw`` is the config as ``cfg`` was read from it, the overrides applied: an override
    of ``per_algorithm`` (``--set 'per_algorithm={}'``) replaces the file's entries, and
    only what is left can make an ``hparams`` value dead."""
    per = raw.get("per_algorithm")
    per = per if isinstance(per, Mapping) else {}
    dead = []
    for key in dict.fromkeys(keys):
        own = [a for a in cfg.algorithms if key in (per.get(a) or {})]
        base = getattr(cfg.hparams, key, None)
        if len(own) == len(cfg.algorithms) and any(
            not _same(getattr(cfg.hparams_for(a), key), base) for a in own
        ):
            dead.append(key)
    return dead


def _same(a: Any, b: Any) -> bool:
    """Equal as the program sees them (numbers as float32: the traced hyperparameters)."""
    if isinstance(a, float) and isinstance(b, float):
        return bool(np.float32(a) == np.float32(b))
    return a == b


def _value(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else repr(v)


def config_warnings(
    raw: Mapping[str, Any], cfg: ExperimentConfig, overrides: Sequence[str] = ()
) -> list[str]:
    """What is valid in ``cfg`` (read from ``raw``, then ``overrides``) but likely not what
    its user meant, one line each: an override ``hparams.KEY=...`` that ``per_algorithm``
    overrides again for every listed algorithm (:func:`overridden_hparams`; in a file the two
    stand side by side, as in a tuning's ``tuned.yaml``), and an ``eval.every_time`` that
    leaves fewer than :data:`MIN_EVALUATIONS` evaluations in the budget."""
    keys = []
    for text in overrides:
        parts, _ = parse_override(text)
        if len(parts) == 2 and parts[0] == "hparams":
            keys.append(parts[1])
    out = []
    for key in overridden_hparams(apply_overrides(raw, overrides), cfg, keys):
        values = ", ".join(
            f"{a} {_value(getattr(cfg.per_algorithm[a], key))}" for a in cfg.algorithms
        )
        out.append(
            f"hparams.{key} = {_value(getattr(cfg.hparams, key))} has no effect: per_algorithm "
            f"sets {key} for every listed algorithm ({values}); set per_algorithm.<name>.{key}"
        )
    every, budget = cfg.eval.every_time, cfg.budget
    if every is not None and budget is not None and budget / every < MIN_EVALUATIONS:
        out.append(
            f"eval.every_time = {every:g} leaves {int(budget // every)} evaluations in the "
            f"budget of {budget:g} (a curve and a time to a target need {MIN_EVALUATIONS} or "
            f"more); set eval.every_time <= {budget / MIN_EVALUATIONS:g}"
        )
    return out


def warn(raw: Mapping[str, Any], cfg: ExperimentConfig, overrides: Sequence[str] = ()) -> None:
    """Each of :func:`config_warnings` as a :class:`ConfigWarning` (the command line prints
    each once, as one line)."""
    import warnings

    for text in config_warnings(raw, cfg, overrides):
        warnings.warn(text, ConfigWarning, stacklevel=3)


def from_dict(raw: Any) -> ExperimentConfig:
    """Builds and validates an :class:`ExperimentConfig` from a plain mapping.

    Args:
      raw: the config's sections and keys as plain Python values (what YAML gives).

    Returns:
      The validated :class:`ExperimentConfig`.

    Raises:
      ConfigError: an unknown key or a bad value (the message names it)."""
    if isinstance(raw, Mapping) and raw.get("plugins"):
        _load_plugins(raw["plugins"])
    cfg = checks.parse_dataclass(ExperimentConfig, raw, "")
    _check_consistency(cfg)
    _check_options(cfg)
    return cfg


def _load_plugins(specs: Any) -> None:
    """Imports a config's ``plugins`` (:mod:`jaxnigt.plugins`) before it is checked."""
    from jaxnigt import plugins

    specs = [specs] if isinstance(specs, str) else specs
    if not isinstance(specs, list | tuple) or not all(isinstance(s, str) for s in specs):
        raise ConfigError(f"plugins: got {specs!r}; expected a list of module names or paths")
    try:
        plugins.load(specs)
    except plugins.PluginError as e:
        raise ConfigError(f"plugins: {e}") from None


def plugin_paths_in(raw: dict[str, Any], folder: str | Path) -> dict[str, Any]:
    """``raw`` with each ``plugins`` entry that is a ``.py`` path relative to ``folder`` (the
    config file's) made absolute, so a config names its plugin file as it names a trace."""
    specs = raw.get("plugins")
    if not isinstance(specs, list | tuple):
        return raw
    near = lambda s: Path(folder, s) if isinstance(s, str) and s.endswith(".py") else None
    fixed = [str(near(s).resolve()) if near(s) and near(s).is_file() else s for s in specs]
    return {**raw, "plugins": fixed}


def load(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Loads, overrides and validates a YAML config file (a ``sweep:`` section, read by
    ``jaxnigt sweep``, is checked (:func:`sweep_over`) and left out, with a warning:
    ``jaxnigt run`` runs the config's own point).

    An empty file (or one of comments only) is an error (:func:`read`), not a run of the
    defaults.

    Args:
      path: a YAML file.
      overrides: ``KEY=VALUE`` strings (the command line's ``--set``), applied in order.

    Returns:
      The validated :class:`ExperimentConfig`.

    Raises:
      ConfigError: a bad file, key or value (the message names the key and what is allowed)."""
    raw = plugin_paths_in(read(path), Path(path).parent)
    over = sweep_over(raw)
    raw = {k: v for k, v in raw.items() if k != "sweep"}
    # a trace path --set gives is the working directory's: recorded absolute, as the file's
    cfg = from_dict(trace_paths_in(apply_overrides(raw, overrides), Path.cwd()))
    warn(raw, cfg, overrides)
    if over:
        import warnings

        axes = "; ".join(f"{k}: {len(v)} values" for k, v in over.items())
        warnings.warn(
            f"sweep: this config's sweep: section ({axes}) is read by `jaxnigt sweep`; this "
            "command uses the config's own point",
            ConfigWarning,
            stacklevel=2,
        )
    return cfg


def sweep_over(raw: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The axes of the ``sweep: {over: {key: [values]}}`` section of a raw config (empty if
    it has none), each key's values listed once; a section that is empty or of another form
    raises :class:`ConfigError`, whichever command reads the config."""
    if "sweep" not in raw:
        return {}
    form = "expected sweep: {over: {KEY: [V1, V2, ...]}}, or no sweep: section"
    section = raw["sweep"]
    if not isinstance(section, Mapping) or set(section) != {"over"}:
        raise ConfigError(f"sweep: got {section!r}; {form}")
    over = section["over"]
    if not isinstance(over, Mapping) or not over:
        raise ConfigError(f"sweep.over: got {over!r}; {form}")
    for key, values in over.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"sweep.over.{key}: got {values!r}; expected a non-empty list")
        check_distinct(f"sweep.over.{key}", values)
    return {str(k): list(v) for k, v in over.items()}


def check_distinct(where: str, values: Sequence[Any]) -> None:
    """Raises :class:`ConfigError` when ``values`` (a swept key's) lists a value twice: the
    same point would run twice, into one directory."""
    seen: list[Any] = []
    for v in values:
        if any(v == u and type(v) is type(u) for u in seen):
            raise ConfigError(f"{where}: got {v!r} twice; list each value once")
        seen.append(v)


def read(path: str | Path) -> dict[str, Any]:
    """The mapping of a config file a user gave (:func:`read_yaml`); a file that sets
    nothing (empty, or comments only) raises :class:`ConfigError`: the defaults are no
    experiment anyone meant to run.  A relative ``trace:FILE`` it gives is made absolute in
    the file's folder (:data:`TRACE_PATH_RULE`)."""
    try:
        raw = read_yaml(path)
    except ConfigError as e:
        if Path(path).exists():
            raise
        raise ConfigError(
            f"{e}; it is neither a file nor a bundled config (`jaxnigt list` names them)"
        ) from None
    if not raw:
        raise ConfigError(
            f"config: {str(path)!r} sets nothing (empty, or comments only); start from a "
            "bundled config (`jaxnigt list` names them, e.g. demo)"
        )
    return trace_paths_in(raw, Path(path).parent)
