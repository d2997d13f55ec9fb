"""Experiment configuration: frozen dataclasses loaded from YAML and validated on load.

A config file has the sections below; every field is optional, and the values shown are an
example, not the defaults (each dataclass field below carries its own default)::

  name: demo
  algorithms: [rennala_nigt, sync_nigt, afedpg]
  seeds: 3                     # number of seeds, run as one vmapped program per algorithm
  seed: 0                      # base seed: seed s uses jax.random.fold_in(key(seed), s)
  first_seed: 0                # the seeds are first_seed ... first_seed + seeds - 1
  budget: 3000.0               # simulated-time budget (same for every algorithm)
  max_rounds: null             # optional cap on rounds (arrival blocks for async methods)
  target_return: null          # optional: summary reports simulated time to reach it
  env: {name: reacher, horizon: 50, heterogeneous: null, types: null}
  cluster: {n: 10, h: sqrt, noise: deterministic, kappa: sqrt, scale_by_dim: true,
            per_step: false, inflight: cancel, link: shared, allreduce: all}
  hparams: {learning_rate: 0.03125, eta: 0.1, M: 20, M_init: 20, gamma: 0.99}
  per_algorithm: {afedpg: {learning_rate: 0.01}}   # overrides of hparams per algorithm
  eval: {every: 10, every_time: null, episodes: 8, deterministic: true}
  grid: {learning_rate: [...], eta: [...]}         # optional: vmapped hyperparameter grid

Also: ``checkpoint_every``, ``on_nonfinite``, ``devices``, ``live_every_s``, ``plot_every_s``,
``tensorboard``, more ``env`` / ``hparams`` fields (MJX solver, refilled lanes, the
asynchronous block, the actor-critic family's settings) and a ``sweep:`` section (see
:mod:`jaxnigt.studies.sweep`); the dataclasses below document each one.

Every value is checked when loaded; a bad value raises :class:`ConfigError` whose message
names the field, the bad value and what is allowed.  The loader is derived from the
dataclasses: every field carries its default and one validator (``metadata["check"]``), so a
default lives in exactly one place.  The cluster model's named choices are written once, in
:data:`jaxnigt.cluster.model.CHOICES`: :class:`ClusterConfig` takes a field per choice from
there (its default, its check and its documentation), and ``jaxnigt clock`` reads its flags
through :class:`ClusterConfig` and these checks.

This module needs no YAML (``jaxnigt clock`` runs on the core install); reading and writing
text is :mod:`jaxnigt.config.text`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxnigt import algorithms
from jaxnigt.cluster import model, power_sources, timing
from jaxnigt.cluster.rules import mindflayer, ringleader
from jaxnigt.cluster.schedules import MATCH_M
from jaxnigt.config import checks
from jaxnigt.config.checks import ConfigError

ON_NONFINITE = ("stop", "mark")
HETEROGENEOUS = ("sign_flip",)
NUM_TYPES = {"sign_flip": 2}


# Validators are ``check(path, value, siblings) -> value`` (see :mod:`jaxnigt.config.checks`);
# ``siblings`` holds the fields of the same section parsed so far (``cluster.h`` needs n).
_int, _float, _bool, _choice, _str = (
    checks.integer,
    checks.number,
    checks.boolean,
    checks.choice,
    checks.string,
)
_optional, _list = checks.optional, checks.sequence
Check = checks.Check


def _env_names() -> list[str]:
    from jaxnigt import envs  # keeps `jaxnigt.config` importable without brax loaded

    return envs.list_envs()


def _env_name(path, v, ctx):
    """An environment name; a Playground one without the extra says how to install it."""
    from jaxnigt.envs import playground  # keeps `jaxnigt.config` importable without brax

    if isinstance(v, str) and v.startswith(playground.PREFIX) and not playground.available():
        raise ConfigError(f"{path}: {playground.missing_text(v)}")
    return _choice(_env_names)(path, v, ctx)


def _physics(path, v, ctx):
    """``{mass: [...], friction: [...], goal: [[dx, dy], ...]}``: per-type physics."""
    from jaxnigt.envs.physics import PhysicsTypes

    if not isinstance(v, Mapping) or not v:
        raise ConfigError(
            f"{path}: got {v!r}; expected a mapping with any of mass, friction, goal "
            "(one entry per worker type)"
        )
    unknown = sorted(set(v) - {"mass", "friction", "goal"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: mass, friction, goal")
    scales = {
        k: _list(_float(), what="scales per type")(f"{path}.{k}", v[k], ctx)
        for k in ("mass", "friction")
        if v.get(k) is not None
    }
    goal = v.get("goal")
    if goal is not None:
        pair = _list(_float(None), what="(dx, dy)")
        goal = _list(pair, what="(dx, dy) offsets per type")(f"{path}.goal", goal, ctx)
    if not scales and goal is None:
        raise ConfigError(f"{path}: give at least one of mass, friction, goal")
    try:
        return PhysicsTypes.of(**scales, goal=goal)
    except ValueError as e:
        raise ConfigError(f"{path}{str(e).removeprefix('physics')}") from None


def _profile(*, positive: bool) -> Check:
    def check(path, v, ctx):
        if isinstance(v, bool) or not isinstance(v, list | tuple | str | int | float):
            raise ConfigError(f"{path}: got {v!r}; expected {timing.PROFILE_TEXT}")
        if isinstance(v, list | tuple):
            v = tuple(_float()(f"{path}[{i}]", x, ctx) for i, x in enumerate(v))
        elif not isinstance(v, str):
            v = _float()(path, v, ctx)
        try:
            timing.check_profile(v, ctx["n"], name=path, allow_zero=not positive)
        except ValueError as e:
            raise ConfigError(f"{path}: {e}") from None
        return v

    return check


def _noise(path, v, ctx):
    if not isinstance(v, str):
        raise ConfigError(f"{path}: got {v!r}; expected {timing.NOISE_TEXT}")
    try:
        timing.parse_noise(v)
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None
    return v


def _power(path, v, ctx):
    if not isinstance(v, str):
        raise ConfigError(f"{path}: got {v!r}; expected {power_sources.SOURCE_TEXT}")
    try:
        power_sources.parse_power(v)
    except ValueError as e:
        raise ConfigError(f"{path}: {str(e).removeprefix('power: ')}") from None
    return v


def _batch(path, v, ctx):
    """A synchronous batch per worker: an integer >= 1 or ``match_M``; ``null`` is how
    configs before the third edition spelled ``match_M`` (their default), so their run
    directories keep meaning what they ran."""
    if v is None or v == MATCH_M:
        return MATCH_M
    if isinstance(v, str):
        raise ConfigError(f"{path}: got {v!r}; expected an integer >= 1 or {MATCH_M!r}")
    return _int(1)(path, v, ctx)


def _rule_option(parse) -> Check:
    """A round rule's option, checked and normalized by the rule's own ``parse``."""

    def check(path, v, ctx):
        try:
            return parse(v)
        except ValueError as e:
            raise ConfigError(f"{path}: {e}") from None

    return check


def _algorithms(path, v, ctx):
    if isinstance(v, str):
        v = [v]
    v = _list(_choice(algorithms.names), what=str(list(algorithms.names())))(path, v, ctx)
    if len(set(v)) != len(v):
        raise ConfigError(f"{path}: got {list(v)}; expected no duplicates")
    return v


def _plugins(path, v, ctx):
    """A list (maybe empty) of plugin module names or ``.py`` paths (:mod:`jaxnigt.plugins`)."""
    v = [v] if isinstance(v, str) else [] if v is None else v
    return _list(_str, what="plugin modules")(path, v, ctx) if v else ()


def _opt(check: Check, default=None, **kw) -> Any:
    """A dataclass field with ``default`` and the validator ``check``."""
    return field(default=default, metadata={"check": check}, **kw)


def _with_choices(cls: type) -> type:
    """``cls`` (a frozen config dataclass) made again with one more field per named choice of
    the cluster model (:data:`jaxnigt.cluster.model.CHOICES`) after its own: a string whose
    default, check and ``Attributes:`` entry are the choice's, so that each choice, its
    values and its help are written once."""
    own = [(f.name, f.type, _opt(f.metadata["check"], f.default)) for f in dataclasses.fields(cls)]
    named = [(c.name, str, _opt(_choice(c.values), c.default)) for c in model.CHOICES]
    entries = "".join(f"      {c.name}: {c.help}.\n" for c in model.CHOICES)
    doc = f"{cls.__doc__.rstrip()}\n{entries}    "
    namespace = {"__doc__": doc, "__module__": cls.__module__}
    return dataclasses.make_dataclass(
        cls.__name__, [*own, *named], frozen=True, namespace=namespace
    )


# ------------------------------------------------------------------------------ sections


@dataclass(frozen=True)
class EnvConfig:
    """Environment section.

    Attributes:
      name: brax MJX environment name (``reacher``, ``hopper``, ...) or a toy env name.
      horizon: trajectory length H; ``None`` uses the environment's default.
      heterogeneous: ``None`` (homogeneous) or ``"sign_flip"`` (type 0 sees (s, 0), type 1
        sees (−s, 1); docs/getting_started.md).
      types: explicit worker → type assignment (length n); default ``i mod V``.
      solver_iterations: optional MJX constraint-solver iterations (speed/accuracy knob).
      ls_iterations: optional MJX line-search iterations.
      lanes: rollout lanes per trajectory of a batch, in (0, 1]: below 1, lanes whose
        episode terminated take the batch's next trajectory (refill); the trajectories are
        the same.  Default: ``envs.DEFAULT_LANES`` for tasks that terminate, else 1.
      physics: ``None``, or worker types whose MJX model differs:
        ``{mass: [...], friction: [...], goal: [[dx, dy], ...]}``, one entry per type (mass
        and inertia scales, sliding-friction scales, goal-body offsets; docs/getting_started.md).
    """

    name: str = _opt(_env_name, "reacher")
    horizon: int | None = _opt(_optional(_int(1)))
    heterogeneous: str | None = _opt(_optional(_choice(HETEROGENEOUS)))
    types: tuple[int, ...] | None = _opt(_optional(_list(_int(0), what="type ids")))
    solver_iterations: int | None = _opt(_optional(_int(1)))
    ls_iterations: int | None = _opt(_optional(_int(1)))
    lanes: float | None = _opt(_optional(_float(0.0, 1.0)))
    physics: Any = _opt(_optional(_physics))


@_with_choices
@dataclass(frozen=True)
class ClusterConfig:
    """Simulated cluster (docs/cluster_model.md), from which a run's cluster model is built;
    the keys after ``per_step`` are the model's named choices.

    Attributes:
      n: number of workers.
      h: compute time per gradient of each worker: a profile (a name of
        ``jaxnigt.cluster.timing.PROFILES``), a number, or a list of n positive values.
      noise: the compute times' multiplicative noise: a kind of
        ``jaxnigt.cluster.timing.NOISE_KINDS`` with its parameters (``lognormal:0.5``).
      kappa: time of one vector exchange of each worker: a profile, number or list (>= 0).
      scale_by_dim: multiply κ by d^(1/4) (d = number of policy parameters).
      per_step: h is per environment step (a trajectory costs H·h_i).
      power: each worker's computation power over time (docs/cluster_model.md, "Computation
        power"): ``constant`` (speed 1), ``outages:UP:DOWN`` (alternately up and down for
        exponential times of these means, numbers or profile names, drawn per run),
        ``periodic:PERIOD:LOW`` (speed 1 for half of each period, LOW for the other half) or
        ``trace:FILE`` (a CSV of ``worker,start,speed`` changes; a relative FILE in a config
        file is in the config file's folder, one ``--set`` gives in the working directory,
        and the run's ``config.yaml`` records it absolute).
      power_horizon: the simulated time a drawn or periodic power covers (default: the
        budget); past it every worker is up at speed 1.
    """

    n: int = _opt(_int(1), 10)
    h: Any = _opt(_profile(positive=True), "sqrt")
    noise: str = _opt(_noise, "deterministic")
    kappa: Any = _opt(_profile(positive=False), 0.0)
    scale_by_dim: bool = _opt(_bool, False)
    per_step: bool = _opt(_bool, False)
    power: str = _opt(_power, "constant")
    power_horizon: float | None = _opt(_optional(_float(0.0)))


@dataclass(frozen=True)
class HParams:
    """Algorithm hyperparameters (the sweepable ones are traced in the compiled program).

    Attributes:
      learning_rate: step size α (NIGT's normalized step; plain PG's gradient step).
      eta: NIGT/AFedPG momentum weight η ∈ (0, 1].
      M: gradients aggregated per round (Rennala: total; Malenia: harmonic-mean target;
        the synchronous methods read it only with ``per_worker_batch: match_M``).
      M_init: gradients of the initial aggregation (round 0); default M.
      gamma: discount γ of the policy-gradient estimator.
      per_worker_batch: synchronous methods' (``sync_nigt``, ``sync_pg``, ``a2c``)
        gradients per worker and round: default 1 (the paper's Sync NIGT: one trajectory per
        worker, a round lasts about the slowest worker's time); ``match_M``: max(1,
        ceil(M/n)), about M per round like Rennala (the sensitivity variant).
      malenia_capacity: max gradients per worker per Malenia round (overflow stops the run).
      msync_m: ``msync_nigt``'s round waits for the fastest m workers' one gradient each
        (default ceil(n/2); at most n; m = n is ``sync_nigt`` with one per worker).
      mindflayer_time_limit: ``mindflayer_nigt``'s and ``mindflayer_pg``'s time limit t_i of
        an attempt (docs/cluster_model.md, "MindFlayer"): ``median`` (t_i = h_i times the
        noise's median: about half of the attempts succeed), ``quantile:U``, a number c
        (t_i = c h_i) or a list of n times.
      mindflayer_attempts: their attempts B_i per worker and round: ``prescribed`` (the
        library's reading of the paper's allocation for M expected successes, from the
        noise's distribution), an integer (every worker) or a list of n.
      mindflayer_empty: what their update does after a round in which no attempt succeeded:
        ``skip`` (the point and the optimizer's state stay; the clock goes on) or ``zero``
        (the update is applied to a zero gradient).
      ringleader_point: the point ``ringleader_nigt``'s and ``ringleader_pg``'s workers compute
        at after an exchange that is not their update: ``held`` (their own: the paper's, a
        new point at most once a cycle) or ``current`` (the server's: the authors' code).
      ringmaster_R: ``ringmaster_pg``'s delay threshold R (default n): a gradient whose delay
        (server updates since its worker was dispatched) is at least R is not applied.
      ringmaster_stops: ``ringmaster_pg`` cancels a gradient as soon as its delay reaches R
        (the variant with calculation stops; default false: it is discarded on arrival).
      async_block: arrivals processed per logged step of the asynchronous methods
        (default n).
      async_wave: the asynchronous methods roll out at most this many ready arrivals as one
        batch (default: from the cluster's times, see ``waves.default_wave``; 1
        rolls out one arrival at a time; every value gives the same results).
      admm_rho: ``admm_pg``'s penalty ρ > 0 of the augmented Lagrangian
        J_i(θ_i) − λ_iᵀ(θ_i − z) − (ρ/2)‖θ_i − z‖² (also the dual step size).
      admm_local_steps: ``admm_pg``'s local policy-gradient steps K per round (≥ 1).
      admm_local_batch: ``admm_pg``'s trajectories B per local step and worker: default 1
        (as the synchronous batch); ``match_M``: max(1, ceil(M/n)), so one local step
        collects about M trajectories in all.
      value_coef: actor-critic methods (``a2c``, ``a3c``, ``impala``): weight of the value
        loss (traced).
      entropy_coef: their entropy bonus (traced).
      gae_lambda: λ of generalized advantage estimation (``a2c``, ``a3c``; traced).
      ac_optimizer: their optax optimizer: ``adam`` or ``rmsprop``.
      impala_batch: trajectories per learner update of ``impala`` (default n).
      impala_learner_time: simulated time of one learner update (default 0); actors that
        arrive before it completes receive the previous parameters.
      seed_batch: trajectories per learner update of ``seed_rl`` (default n).
      seed_learner_time: simulated time of one ``seed_rl`` learner update (default 0).
      seed_inference_time: the ``seed_rl`` learner's inference time per environment step
        (default 0): an actor's step ends that long after its exchange.
      seed_message_time: time of one ``seed_rl`` step exchange (observation up, action
        down) on the server link; default: each worker's κ_i, with ``scale_by_dim``
        scaled by (o + a)^(1/4) (the message's size: observation and action) instead of
        d^(1/4).
      seed_versions: parameter versions the ``seed_rl`` learner keeps for the steps of
        trajectories still under way (default 8); a step that lags more stops the run.
    """

    learning_rate: float = _opt(_float(0.0, open_low=False), 2.0**-5)
    eta: float = _opt(_float(0.0, 1.0), 0.1)
    M: int = _opt(_int(1), 20)
    M_init: int | None = _opt(_optional(_int(1)))
    gamma: float = _opt(_float(0.0, 1.0), 0.99)
    per_worker_batch: int | str = _opt(_batch, 1)
    malenia_capacity: int | None = _opt(_optional(_int(1)))
    msync_m: int | None = _opt(_optional(_int(1)))
    mindflayer_time_limit: str | float | tuple[float, ...] = _opt(
        _rule_option(mindflayer.parse_time_limit), "median"
    )
    mindflayer_attempts: str | int | tuple[int, ...] = _opt(
        _rule_option(mindflayer.parse_attempts), "prescribed"
    )
    mindflayer_empty: str = _opt(_choice(mindflayer.EMPTY), "skip")
    ringleader_point: str = _opt(_choice(ringleader.POINTS), "held")
    ringmaster_R: int | None = _opt(_optional(_int(1)))
    ringmaster_stops: bool = _opt(_bool, False)
    async_block: int | None = _opt(_optional(_int(1)))
    async_wave: int | None = _opt(_optional(_int(1)))
    admm_rho: float = _opt(_float(0.0), 1.0)
    admm_local_steps: int = _opt(_int(1), 1)
    admm_local_batch: int | str = _opt(_batch, 1)
    value_coef: float = _opt(_float(0.0, open_low=False), 0.5)
    entropy_coef: float = _opt(_float(0.0, open_low=False), 0.0)
    gae_lambda: float = _opt(_float(0.0, 1.0, open_low=False), 0.95)
    ac_optimizer: str = _opt(_choice(("adam", "rmsprop")), "adam")
    impala_batch: int | None = _opt(_optional(_int(1)))
    impala_learner_time: float = _opt(_float(0.0, open_low=False), 0.0)
    seed_batch: int | None = _opt(_optional(_int(1)))
    seed_learner_time: float = _opt(_float(0.0, open_low=False), 0.0)
    seed_inference_time: float = _opt(_float(0.0, open_low=False), 0.0)
    seed_message_time: float | None = _opt(_optional(_float(0.0, open_low=False)))
    seed_versions: int = _opt(_int(1), 8)


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation of the deploy params (NIGT's iterate x_t).

    Attributes:
      every: steps between evaluations (also the length of one compiled chunk).
      every_time: when set, evaluate about every ``every_time`` units of *simulated* time
        instead: each algorithm's chunk is ``max(1, round(every_time / step_time))`` steps,
        with ``step_time`` the mean simulated time of one of its steps (its clock alone,
        16 steps, key 0). Comparisons across algorithms whose steps differ in length (a
        Rennala round against a block of asynchronous arrivals) then get curves of
        comparable resolution; ``every`` is ignored.
      episodes: episodes per evaluation.
      deterministic: evaluate the mean action (True) or sample (False).
    """

    every: int = _opt(_int(1), 10)
    every_time: float | None = _opt(_optional(_float(0.0)))
    episodes: int = _opt(_int(1), 8)
    deterministic: bool = _opt(_bool, True)


def _grid(name: str) -> Check:
    """A grid's values of ``hparams.<name>``: null, or a non-empty list whose every value
    passes that field's own check (a grid point is that value of the field)."""
    item = {f.name: f for f in dataclasses.fields(HParams)}[name].metadata["check"]
    return _optional(_list(item, what=f"values hparams.{name} allows"))


@dataclass(frozen=True)
class GridConfig:
    """Optional hyperparameter grid run as one vmapped program (values are traced).

    Attributes:
      learning_rate: step sizes α of the grid, each >= 0 as ``hparams.learning_rate``;
        ``null``: the algorithm's own (one point).
      eta: momentum weights η of the grid, each in (0, 1]; ``null``: the algorithm's own.
        The grid is every (α, η) pair, each with every seed, in one program per algorithm.
    """

    learning_rate: tuple[float, ...] | None = _opt(_grid("learning_rate"))
    eta: tuple[float, ...] | None = _opt(_grid("eta"))


def _per_algorithm(path, v, ctx):
    if not isinstance(v, Mapping):
        raise ConfigError(f"{path}: got {v!r}; expected a mapping algorithm -> hparams")
    out = {}
    names = list(algorithms.names())
    for name, section in v.items():
        if name not in names:
            raise ConfigError(
                f"{path}.{name}: unknown algorithm; {checks.suggestion(name, names)}"
                f"expected one of {names}"
            )
        if section is None:
            raise checks.empty_section(f"{path}.{name}", HParams)
        out[name] = checks.parse_dataclass(HParams, section, f"{path}.{name}", base=ctx["hparams"])
    return out


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole scenario: several algorithms × seeds on one simulated cluster.

    Attributes:
      plugins: modules (names or ``.py`` paths) that register rules, algorithms or
        environments, loaded before the rest of the config is checked (:mod:`jaxnigt.plugins`).
      name: run name (default run directory ``runs/<name>``): one path component, no slash
        or backslash, not ``.`` or ``..``.
      algorithms: algorithms to run, one compiled program each.
      seeds: seeds per algorithm (and grid point), vmapped in one program.
      seed: base seed; seed s uses ``fold_in(key(seed), s)``.
      first_seed: the run's seeds are ``first_seed … first_seed + seeds - 1``, so seeds
        can be added to a finished run (``first_seed`` = its ``seeds``) without rerunning
        it: seed s's result does not depend on which other seeds share its program.
      budget: simulated-time budget; every seed stops at its first round past it.
      max_rounds: optional cap on rounds (arrival blocks for asynchronous methods).
      target_return: optional return whose first simulated time the summary reports.
      env, cluster, hparams, eval, grid: the sections above.
      per_algorithm: ``{algorithm: {key: value}}``: ``hparams`` keys for one algorithm
        alone, over ``hparams`` (a key it does not set keeps ``hparams``' value).
      checkpoint_every: chunks between checkpoints (0 disables); see ``--resume``.
      on_nonfinite: ``stop`` (stop the run, keep the last good checkpoint, exit non-zero)
        or ``mark`` (freeze the diverged seed, report it, continue the others).
      devices: number of local devices to shard over (``null`` = all).
      live_every_s: while a run goes on, ``metrics.csv``, ``worker_counts.csv`` and
        ``summary.json`` are rewritten after a chunk at most this often (seconds).
      plot_every_s: and ``curves.png`` / ``counts.png`` at most this often.
      tensorboard: also log the scalars of every chunk for TensorBoard under
        ``RUN_DIR/tensorboard/<algorithm>`` (needs the ``tb`` extra: tensorboardX).
    """

    plugins: tuple[str, ...] = _opt(_plugins, ())
    name: str = _opt(checks.path_component, "experiment")
    algorithms: tuple[str, ...] = _opt(_algorithms, ("rennala_nigt",))
    seeds: int = _opt(_int(1), 3)
    seed: int = _opt(_int(0), 0)
    first_seed: int = _opt(_int(0), 0)
    budget: float | None = _opt(_optional(_float(0.0)), 1000.0)
    max_rounds: int | None = _opt(_optional(_int(1)))
    target_return: float | None = _opt(_optional(_float()))
    env: EnvConfig = field(default_factory=EnvConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    hparams: HParams = field(default_factory=HParams)
    per_algorithm: Mapping[str, HParams] = field(
        default_factory=dict, metadata={"check": _per_algorithm}
    )
    eval: EvalConfig = field(default_factory=EvalConfig)
    grid: GridConfig = field(default_factory=GridConfig)
    checkpoint_every: int = _opt(_int(0), 10)
    on_nonfinite: str = _opt(_choice(ON_NONFINITE), "stop")
    devices: int | None = _opt(_optional(_int(1)))
    live_every_s: float = _opt(_float(0.0, open_low=False), 30.0)
    plot_every_s: float = _opt(_float(0.0, open_low=False), 300.0)
    tensorboard: bool = _opt(_bool, False)

    def hparams_for(self, algorithm: str) -> HParams:
        """The hyperparameters of one algorithm (per-algorithm overrides applied)."""
        return self.per_algorithm.get(algorithm, self.hparams)

    def to_dict(self) -> dict[str, Any]:
        """Plain-YAML-serializable dict that :func:`from_dict` reads back."""
        from jaxnigt.config import text  # PyYAML: not needed to check a config

        out = dataclasses.asdict(self)
        out["per_algorithm"] = {k: _diff(v, self.hparams) for k, v in self.per_algorithm.items()}
        return text.plain(out)


def _diff(hp: HParams, base: HParams) -> dict[str, Any]:
    return {
        f.name: getattr(hp, f.name)
        for f in dataclasses.fields(hp)
        if getattr(hp, f.name) != getattr(base, f.name)
    }
