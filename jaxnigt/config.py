"""Experiment configuration: frozen dataclasses loaded from YAML and validated on load.

A config file has the sections below (every field optional except where noted)::

  name: demo
  algorithms: [rennala_nigt, sync_nigt, afedpg]
  seeds: 3                     # number of seeds, run as one vmapped program per algorithm
  seed: 0                      # base seed: seed s uses jax.random.fold_in(key(seed), s)
  budget: 3000.0               # simulated-time budget (same for every algorithm)
  max_rounds: null             # optional cap on rounds (arrival blocks for async methods)
  target_return: null          # optional: summary reports simulated time to reach it
  env: {name: reacher, horizon: 50, heterogeneous: null, types: null}
  cluster: {n: 10, h: sqrt, noise: deterministic, kappa: sqrt, scale_by_dim: true,
            per_step: false, inflight: cancel, link: shared, allreduce: all}
  hparams: {learning_rate: 0.03125, eta: 0.1, M: 20, M_init: 20, gamma: 0.99}
  per_algorithm: {afedpg: {learning_rate: 0.01}}   # overrides of hparams per algorithm
  eval: {every: 10, episodes: 8, deterministic: true}
  grid: {learning_rate: [...], eta: [...]}         # optional: vmapped hyperparameter grid

Every value is checked when loaded; a bad value raises :class:`ConfigError` whose message
names the field, the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jaxnigt import timing

ALGORITHMS = (
    "rennala_nigt",
    "malenia_nigt",
    "sync_nigt",
    "sync_pg",
    "rennala_pg",
    "afedpg",
    "asgd",
    "admm_pg",
)
INFLIGHT = ("cancel", "discard")
LINKS = ("shared", "independent")
ALLREDUCE = ("all", "contributors")
ON_NONFINITE = ("stop", "mark")


class ConfigError(ValueError):
    """A config value is invalid; the message names the field and the allowed values."""


@dataclass(frozen=True)
class EnvConfig:
    """Environment section.

    Attributes:
      name: brax MJX environment name (``reacher``, ``hopper``, ...) or a toy env name.
      horizon: trajectory length H; ``None`` uses the environment's default.
      heterogeneous: ``None`` (homogeneous) or ``"sign_flip"`` (type 0 sees (s, 0), type 1
        sees (−s, 1); SPEC §7).
      types: explicit worker → type assignment (length n); default ``i mod V``.
      solver_iterations: optional MJX constraint-solver iterations (speed/accuracy knob).
      ls_iterations: optional MJX line-search iterations.
    """

    name: str = "reacher"
    horizon: int | None = None
    heterogeneous: str | None = None
    types: tuple[int, ...] | None = None
    solver_iterations: int | None = None
    ls_iterations: int | None = None


@dataclass(frozen=True)
class ClusterConfig:
    """Simulated cluster (SPEC §3).

    Attributes:
      n: number of workers.
      h: compute-time profile (``equal``, ``sqrt``, ``linear``, ``decreasing``), a number,
        or a list of n positive values.
      noise: ``deterministic``, ``exponential``, ``lognormal:SIGMA``, ``uniform:LOW:HIGH``,
        ``straggler:P:FACTOR``.
      kappa: communication-time profile, number or list (>= 0).
      scale_by_dim: multiply κ by d^{1/4} (d = number of policy parameters).
      per_step: h is per environment step (a trajectory costs H·h_i).
      inflight: ``cancel`` or ``discard`` handling of unfinished work at a round's end.
      link: the server link of the asynchronous methods: ``shared`` (one link, exchanges
        served one at a time, first come first served) or ``independent`` (exchanges overlap).
      allreduce: who takes part in a round's AllReduce: ``all`` workers (cost max_i κ_i) or
        the ``contributors`` (b_i ≥ 1; the others receive the point over their own link).
    """

    n: int = 10
    h: Any = "sqrt"
    noise: str = "deterministic"
    kappa: Any = 0.0
    scale_by_dim: bool = False
    per_step: bool = False
    inflight: str = "cancel"
    link: str = "shared"
    allreduce: str = "all"


@dataclass(frozen=True)
class HParams:
    """Algorithm hyperparameters (the sweepable ones are traced in the compiled program).

    Attributes:
      learning_rate: step size α (NIGT's normalized step; plain PG's gradient step).
      eta: NIGT/AFedPG momentum weight η ∈ (0, 1].
      M: gradients aggregated per round (Rennala: total; Malenia: harmonic-mean target;
        sync: per-worker batch max(1, ceil(M/n)) unless ``per_worker_batch`` is set).
      M_init: gradients of the initial aggregation (round 0); default M.
      gamma: discount γ of the policy-gradient estimator.
      per_worker_batch: synchronous methods' per-worker batch b.
      malenia_capacity: max gradients per worker per Malenia round (overflow stops the run).
      async_block: arrivals processed per logged step of the asynchronous methods
        (default n).
      admm_rho: ``admm_pg``'s penalty ρ > 0 of the augmented Lagrangian
        J_i(θ_i) − λ_iᵀ(θ_i − z) − (ρ/2)‖θ_i − z‖² (also the dual step size).
      admm_local_steps: ``admm_pg``'s local policy-gradient steps K per round (≥ 1).
      admm_local_batch: ``admm_pg``'s trajectories B per local step and worker; default
        max(1, ceil(M/n)), so one local step collects about M trajectories in all.
    """

    learning_rate: float = 2.0**-5
    eta: float = 0.1
    M: int = 20
    M_init: int | None = None
    gamma: float = 0.99
    per_worker_batch: int | None = None
    malenia_capacity: int | None = None
    async_block: int | None = None
    admm_rho: float = 1.0
    admm_local_steps: int = 1
    admm_local_batch: int | None = None


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation of the deploy params (NIGT's iterate x_t).

    Attributes:
      every: rounds between evaluations (also the length of one compiled chunk).
      episodes: episodes per evaluation.
      deterministic: evaluate the mean action (True) or sample (False).
    """

    every: int = 10
    episodes: int = 8
    deterministic: bool = True


@dataclass(frozen=True)
class GridConfig:
    """Optional hyperparameter grid run as one vmapped program (values are traced)."""

    learning_rate: tuple[float, ...] | None = None
    eta: tuple[float, ...] | None = None


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole scenario: several algorithms × seeds on one simulated cluster.

    Attributes:
      name: run name (default run directory ``runs/<name>``).
      algorithms: algorithms to run, one compiled program each.
      seeds: seeds per algorithm (and grid point), vmapped in one program.
      seed: base seed; seed s uses ``fold_in(key(seed), s)``.
      budget: simulated-time budget; every seed stops at its first round past it.
      max_rounds: optional cap on rounds (arrival blocks for asynchronous methods).
      target_return: optional return whose first simulated time the summary reports.
      env, cluster, hparams, per_algorithm, eval, grid: the sections above.
      checkpoint_every: chunks between checkpoints (0 disables); see ``--resume``.
      on_nonfinite: ``stop`` (stop the run, keep the last good checkpoint, exit non-zero)
        or ``mark`` (freeze the diverged seed, report it, continue the others).
      devices: number of local devices to shard over (``null`` = all).
    """

    name: str = "experiment"
    algorithms: tuple[str, ...] = ("rennala_nigt",)
    seeds: int = 3
    seed: int = 0
    budget: float | None = 1000.0
    max_rounds: int | None = None
    target_return: float | None = None
    env: EnvConfig = field(default_factory=EnvConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    hparams: HParams = field(default_factory=HParams)
    per_algorithm: Mapping[str, HParams] = field(default_factory=dict)
    eval: EvalConfig = field(default_factory=EvalConfig)
    grid: GridConfig = field(default_factory=GridConfig)
    checkpoint_every: int = 10
    on_nonfinite: str = "stop"
    devices: int | None = None

    def hparams_for(self, algorithm: str) -> HParams:
        """The hyperparameters of one algorithm (per-algorithm overrides applied)."""
        return self.per_algorithm.get(algorithm, self.hparams)

    def to_dict(self) -> dict[str, Any]:
        """Plain-YAML-serializable dict that :func:`from_dict` reads back."""
        out = dataclasses.asdict(self)
        out["per_algorithm"] = {k: _diff(v, self.hparams) for k, v in self.per_algorithm.items()}
        return _plain(out)


def _diff(hp: HParams, base: HParams) -> dict[str, Any]:
    return {
        f.name: getattr(hp, f.name)
        for f in dataclasses.fields(hp)
        if getattr(hp, f.name) != getattr(base, f.name)
    }


def _plain(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple | list):
        return [_plain(v) for v in x]
    return x


# ----------------------------------------------------------------------------- parsing


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _check_type(path: str, value: Any, kinds: tuple[type, ...], allowed: str) -> Any:
    if isinstance(value, bool) and bool not in kinds:
        raise ConfigError(f"{path}: got {value!r} ({type(value).__name__}); expected {allowed}")
    if not isinstance(value, kinds):
        raise ConfigError(f"{path}: got {value!r} ({type(value).__name__}); expected {allowed}")
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _int(path, v, *, minimum=None, optional=False):
    if v is None and optional:
        return None
    v = _check_type(path, v, (int,), "an integer" + (f" >= {minimum}" if minimum else ""))
    if minimum is not None and v < minimum:
        raise ConfigError(f"{path}: got {v!r}; expected an integer >= {minimum}")
    return v


def _float(path, v, *, positive=False, optional=False):
    if v is None and optional:
        return None
    v = _check_type(path, v, (int, float), "a number" + (" > 0" if positive else ""))
    if not math.isfinite(v) or (positive and v <= 0):
        raise ConfigError(
            f"{path}: got {v!r}; expected a finite number" + (" > 0" if positive else "")
        )
    return float(v)


def _bool(path, v):
    return _check_type(path, v, (bool,), "true or false")


def _str(path, v, choices=None, optional=False):
    if v is None and optional:
        return None
    v = _check_type(path, v, (str,), "a string" if not choices else f"one of {list(choices)}")
    if choices is not None and v not in choices:
        raise ConfigError(f"{path}: got {v!r}; expected one of {list(choices)}")
    return v


def _section(path: str, raw: Any, cls: type) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: got {raw!r}; expected a mapping of {cls.__name__} fields")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in names:
            raise ConfigError(f"{path}.{key}: unknown key; allowed keys: {names}")
    return dict(raw)


def _parse_env(raw: Any) -> EnvConfig:
    from jaxnigt import envs  # local: keeps `jaxnigt.config` importable without brax loaded

    d = _section("env", raw, EnvConfig)
    name = _str("env.name", d.get("name", EnvConfig.name))
    available = envs.list_envs()
    if name not in available:
        raise ConfigError(f"env.name: got {name!r}; expected one of {available}")
    types = d.get("types")
    if types is not None:
        if not isinstance(types, Sequence) or isinstance(types, str):
            raise ConfigError(f"env.types: got {types!r}; expected a list of type ids")
        types = tuple(_int(f"env.types[{i}]", t, minimum=0) for i, t in enumerate(types))
    return EnvConfig(
        name=name,
        horizon=_int("env.horizon", d.get("horizon"), minimum=1, optional=True),
        heterogeneous=_str(
            "env.heterogeneous", d.get("heterogeneous"), ("sign_flip",), optional=True
        ),
        types=types,
        solver_iterations=_int(
            "env.solver_iterations", d.get("solver_iterations"), minimum=1, optional=True
        ),
        ls_iterations=_int("env.ls_iterations", d.get("ls_iterations"), minimum=1, optional=True),
    )


def _profile(path: str, v: Any, n: int, *, positive: bool) -> Any:
    if isinstance(v, list | tuple):
        v = tuple(_float(f"{path}[{i}]", x) for i, x in enumerate(v))
    elif not isinstance(v, str):
        v = _float(path, v)
    try:
        timing.profile_values(v, n, name=path, allow_zero=not positive)
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None
    return v


def _parse_cluster(raw: Any) -> ClusterConfig:
    d = _section("cluster", raw, ClusterConfig)
    n = _int("cluster.n", d.get("n", ClusterConfig.n), minimum=1)
    noise = _str("cluster.noise", d.get("noise", ClusterConfig.noise))
    try:
        timing.parse_noise(noise)
    except ValueError as e:
        raise ConfigError(f"cluster.noise: {e}") from None
    return ClusterConfig(
        n=n,
        h=_profile("cluster.h", d.get("h", ClusterConfig.h), n, positive=True),
        noise=noise,
        kappa=_profile("cluster.kappa", d.get("kappa", ClusterConfig.kappa), n, positive=False),
        scale_by_dim=_bool("cluster.scale_by_dim", d.get("scale_by_dim", False)),
        per_step=_bool("cluster.per_step", d.get("per_step", False)),
        inflight=_str("cluster.inflight", d.get("inflight", "cancel"), INFLIGHT),
        link=_str("cluster.link", d.get("link", ClusterConfig.link), LINKS),
        allreduce=_str("cluster.allreduce", d.get("allreduce", ClusterConfig.allreduce), ALLREDUCE),
    )


def _parse_hparams(path: str, raw: Any, base: HParams) -> HParams:
    d = _section(path, raw, HParams)
    get = lambda k: d.get(k, getattr(base, k))
    eta = _float(f"{path}.eta", get("eta"))
    if not 0.0 < eta <= 1.0:
        raise ConfigError(f"{path}.eta: got {eta!r}; expected a number in (0, 1]")
    gamma = _float(f"{path}.gamma", get("gamma"))
    if not 0.0 < gamma <= 1.0:
        raise ConfigError(f"{path}.gamma: got {gamma!r}; expected a number in (0, 1]")
    lr = _float(f"{path}.learning_rate", get("learning_rate"))
    if lr < 0:
        raise ConfigError(f"{path}.learning_rate: got {lr!r}; expected a number >= 0")
    return HParams(
        learning_rate=lr,
        eta=eta,
        M=_int(f"{path}.M", get("M"), minimum=1),
        M_init=_int(f"{path}.M_init", get("M_init"), minimum=1, optional=True),
        gamma=gamma,
        per_worker_batch=_int(
            f"{path}.per_worker_batch", get("per_worker_batch"), minimum=1, optional=True
        ),
        malenia_capacity=_int(
            f"{path}.malenia_capacity", get("malenia_capacity"), minimum=1, optional=True
        ),
        async_block=_int(f"{path}.async_block", get("async_block"), minimum=1, optional=True),
        admm_rho=_float(f"{path}.admm_rho", get("admm_rho"), positive=True),
        admm_local_steps=_int(f"{path}.admm_local_steps", get("admm_local_steps"), minimum=1),
        admm_local_batch=_int(
            f"{path}.admm_local_batch", get("admm_local_batch"), minimum=1, optional=True
        ),
    )


def _float_list(path: str, v: Any) -> tuple[float, ...] | None:
    if v is None:
        return None
    if not isinstance(v, list | tuple) or not v:
        raise ConfigError(f"{path}: got {v!r}; expected a non-empty list of numbers")
    return tuple(_float(f"{path}[{i}]", x) for i, x in enumerate(v))


def from_dict(raw: Any) -> ExperimentConfig:
    """Builds and validates an :class:`ExperimentConfig` from a plain mapping."""
    d = _section("config", raw, ExperimentConfig)
    algorithms = d.get("algorithms", list(ExperimentConfig.algorithms))
    if isinstance(algorithms, str):
        algorithms = [algorithms]
    if not isinstance(algorithms, list | tuple) or not algorithms:
        raise ConfigError(
            f"algorithms: got {algorithms!r}; expected a non-empty list of {list(ALGORITHMS)}"
        )
    algorithms = tuple(_str(f"algorithms[{i}]", a, ALGORITHMS) for i, a in enumerate(algorithms))
    if len(set(algorithms)) != len(algorithms):
        raise ConfigError(f"algorithms: got {list(algorithms)}; expected no duplicates")

    env = _parse_env(d.get("env"))
    cluster = _parse_cluster(d.get("cluster"))
    if env.types is not None and len(env.types) != cluster.n:
        raise ConfigError(
            f"env.types: got {len(env.types)} entries; "
            f"expected one per worker (cluster.n = {cluster.n})"
        )
    if env.heterogeneous is not None:
        num_types = 2
        if cluster.n < num_types and env.types is None:
            raise ConfigError(
                f"env.heterogeneous: {num_types} environment types need "
                f"cluster.n >= {num_types}, got n = {cluster.n}"
            )
        if env.types is not None and max(env.types) >= num_types:
            raise ConfigError(
                f"env.types: got {list(env.types)}; expected type ids in [0, {num_types})"
            )
    elif env.types is not None and any(env.types):
        raise ConfigError("env.types: a non-zero type needs env.heterogeneous (e.g. sign_flip)")

    hparams = _parse_hparams("hparams", d.get("hparams"), HParams())
    per_raw = d.get("per_algorithm") or {}
    if not isinstance(per_raw, Mapping):
        raise ConfigError(
            f"per_algorithm: got {per_raw!r}; expected a mapping algorithm -> hparams"
        )
    per_algorithm = {}
    for name, section in per_raw.items():
        if name not in ALGORITHMS:
            raise ConfigError(
                f"per_algorithm.{name}: unknown algorithm; expected one of {list(ALGORITHMS)}"
            )
        per_algorithm[name] = _parse_hparams(f"per_algorithm.{name}", section, hparams)

    ev = _section("eval", d.get("eval"), EvalConfig)
    eval_cfg = EvalConfig(
        every=_int("eval.every", ev.get("every", EvalConfig.every), minimum=1),
        episodes=_int("eval.episodes", ev.get("episodes", EvalConfig.episodes), minimum=1),
        deterministic=_bool("eval.deterministic", ev.get("deterministic", True)),
    )
    gr = _section("grid", d.get("grid"), GridConfig)
    grid = GridConfig(
        learning_rate=_float_list("grid.learning_rate", gr.get("learning_rate")),
        eta=_float_list("grid.eta", gr.get("eta")),
    )
    if grid.eta is not None:
        for i, e in enumerate(grid.eta):
            if not 0.0 < e <= 1.0:
                raise ConfigError(f"grid.eta[{i}]: got {e!r}; expected a number in (0, 1]")

    budget = _float(
        "budget", d.get("budget", ExperimentConfig.budget), positive=True, optional=True
    )
    max_rounds = _int("max_rounds", d.get("max_rounds"), minimum=1, optional=True)
    if budget is None and max_rounds is None:
        raise ConfigError(
            "budget: got null and max_rounds is null; set at least one stop criterion"
        )
    return ExperimentConfig(
        name=_str("name", d.get("name", ExperimentConfig.name)),
        algorithms=algorithms,
        seeds=_int("seeds", d.get("seeds", ExperimentConfig.seeds), minimum=1),
        seed=_int("seed", d.get("seed", 0), minimum=0),
        budget=budget,
        max_rounds=max_rounds,
        target_return=_float("target_return", d.get("target_return"), optional=True),
        env=env,
        cluster=cluster,
        hparams=hparams,
        per_algorithm=per_algorithm,
        eval=eval_cfg,
        grid=grid,
        checkpoint_every=_int("checkpoint_every", d.get("checkpoint_every", 10), minimum=0),
        on_nonfinite=_str("on_nonfinite", d.get("on_nonfinite", "stop"), ON_NONFINITE),
        devices=_int("devices", d.get("devices"), minimum=1, optional=True),
    )


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parses one ``--set key.sub=value`` override (value is YAML: ``[a, b]``, ``0.1``, ...)."""
    if "=" not in text:
        raise ConfigError(f"--set: got {text!r}; expected KEY=VALUE, e.g. hparams.eta=0.1")
    key, value = text.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"--set: got {text!r}; expected KEY=VALUE with a dotted key")
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        raise ConfigError(f"--set {key}: value {value!r} is not valid YAML") from None
    return parts, parsed


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Returns a copy of ``raw`` with ``--set`` overrides applied (the input is not mutated)."""
    out = _plain(dict(raw))
    for text in overrides:
        parts, value = parse_override(text)
        node = out
        for p in parts[:-1]:
            child = node.get(p)
            if child is None:
                child = {}
            elif not isinstance(child, Mapping):
                raise ConfigError(f"--set {'.'.join(parts)}: {p!r} is not a section")
            node[p] = child = dict(child)
            node = child
        node[parts[-1]] = value
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Reads a YAML mapping; raises ConfigError on unreadable or malformed files."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"config: cannot read {str(path)!r}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(
            f"config: {str(path)!r} is not valid YAML ({e.__class__.__name__})"
        ) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config: {str(path)!r} must contain a mapping, got {type(raw).__name__}")
    return dict(raw)


def load(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Loads, overrides and validates a YAML config file."""
    return from_dict(apply_overrides(read_yaml(path), overrides))


def dump(config: ExperimentConfig) -> str:
    """YAML text of a resolved config."""
    return yaml.safe_dump(config.to_dict(), sort_keys=False)
