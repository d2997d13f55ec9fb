"""Training engine: ``make_trainer(config, algorithm)`` → pure ``init`` / ``step`` / ``evaluate``.

A run of one algorithm is ``init`` followed by ``lax.scan`` over ``step`` in chunks; between
chunks the runner evaluates, logs and checks stop criteria. Every function here is pure and
unbatched: seeds and hyperparameter grids are a ``jax.vmap`` over ``(key, hyper)``, and the
sweepable values (learning rate, η, γ) are traced arrays inside the state, so one compiled
program serves a whole grid.

Example::

    cfg = jaxnigt.config.load("configs/demo.yaml")
    tr = make_trainer(cfg, "rennala_nigt")
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(0), s))(jnp.arange(3))
    hyper = tr.hyper(batch=3)
    state = jax.jit(jax.vmap(tr.init))(keys, hyper)
    state, ms = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, 10, budget=500.0)))(state)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import algorithms, envs
from jaxnigt.algorithms import core, sizes
from jaxnigt.algorithms.core import Algorithm, Setup, StepMetrics, TrainState
from jaxnigt.cluster import model
from jaxnigt.cluster.model import ClusterModel
from jaxnigt.config import ExperimentConfig, HParams
from jaxnigt.rl import rollout
from jaxnigt.rl.policy import make_policy, num_params


@functools.lru_cache(maxsize=8)
def _cached_task(name, horizon, heterogeneous, solver_iterations, ls_iterations, lanes, physics):
    task = envs.make_env(
        name,
        horizon=horizon,
        solver_iterations=solver_iterations,
        ls_iterations=ls_iterations,
    )
    if heterogeneous is not None:
        task = envs.make_heterogeneous(task, heterogeneous)
    if physics is not None:
        task = envs.with_physics(task, physics)
    if lanes is None:
        lanes = envs.DEFAULT_LANES if task.terminates else 1.0
    return dataclasses.replace(task, lanes=lanes)


def make_task(config: ExperimentConfig):
    """The config's environment (cached per process: MJX model loading is slow)."""
    e = config.env
    return _cached_task(
        e.name, e.horizon, e.heterogeneous, e.solver_iterations, e.ls_iterations, e.lanes, e.physics
    )


def make_setup(config: ExperimentConfig, algorithm: str, *, mesh: Any = None) -> Setup:
    """Static pieces of one algorithm's run: task, policy, cluster model, sizes.

    Args:
      config: a validated config.
      algorithm: the algorithm whose hyperparameters (M, M_init) to take.
      mesh: an optional mesh (``jaxnigt.run.devices.make_mesh``) that splits each round's
        trajectory slots across devices; None keeps rounds on one device (or shards seeds
        instead).

    Returns:
      The :class:`~jaxnigt.algorithms.core.Setup`; its cluster model is built once here
      from ``config.cluster`` (:func:`jaxnigt.cluster.model.from_config`).
    """
    hp: HParams = config.hparams_for(algorithm)
    task = make_task(config)
    policy = make_policy(task)
    dim = num_params(jax.eval_shape(policy.init, jax.random.key(0)))
    types = envs.worker_types(config.cluster.n, task.num_types, config.env.types)
    cluster = model.from_config(
        config.cluster,
        worker_types=np.asarray(types, np.int32),
        dim=dim,
        horizon=task.horizon,
        message_size=policy.obs_size + policy.action_size,
        budget=config.budget,
    )
    return Setup(
        task=task, policy=policy, cluster=cluster, M=hp.M, M_init=hp.M_init or hp.M, mesh=mesh
    )


#: The hyperparameters that live in the state as arrays (sweepable without recompiling).
TRACED = ("learning_rate", "eta", "gamma", "value_coef", "entropy_coef", "gae_lambda")


@dataclasses.dataclass(frozen=True)
class Trainer:
    """Pure functions of one algorithm's run (all unbatched; vmap them over seeds/grids).

    Attributes:
      name: algorithm name.
      setup: the static :class:`~jaxnigt.algorithms.core.Setup`.
      algorithm: its :class:`~jaxnigt.algorithms.core.Algorithm` (init, step, eval_params,
        first_step).
      hparams: the config's hyperparameters of this algorithm.
      eval_episodes: episodes per evaluation.
      eval_deterministic: evaluate the mean action.
    """

    name: str
    setup: Setup
    algorithm: Algorithm
    hparams: HParams
    eval_episodes: int
    eval_deterministic: bool

    @property
    def init(self) -> Callable[[jax.Array, dict], TrainState]:
        """``(key, hyper) -> state`` at x_0, simulated time 0 (no rollouts)."""
        return self.algorithm.init

    @property
    def first_step(self) -> Callable | None:
        """Round 0 with ``M_init`` gradients when it differs from M (else None)."""
        return self.algorithm.first_step

    @property
    def dim(self) -> int:
        """The policy's parameter count d: the d of κ's d^{1/4} (``scale_by_dim``) and of
        the run's log line. An actor-critic's critic is not counted (its parameters travel
        uncharged, :mod:`jaxnigt.algorithms.actor_critic`)."""
        return num_params(jax.eval_shape(self.setup.policy.init, jax.random.key(0)))

    def bind(self, cluster: ClusterModel) -> Trainer:
        """This trainer on another record of its cluster model: the algorithm is built again
        around it.

        Args:
          cluster: typically a jitted program's argument (:meth:`program`).

        Returns:
          The trainer.
        """
        setup = self.setup.with_cluster(cluster)
        # What a factory computes on the host (option defaults from Setup.host_cluster)
        # stays concrete inside the program being traced.
        with jax.ensure_compile_time_eval():
            algorithm = algorithms.get(self.name)(setup, self.hparams)
        return dataclasses.replace(self, setup=setup, algorithm=algorithm)

    def program(self, fn: Callable[..., Any], **jit_kwargs: Any) -> ClusterProgram:
        """``fn(trainer, *args)`` as one jitted program that takes the cluster model
        (:attr:`Setup.cluster <jaxnigt.algorithms.core.Setup>`, every per-worker array) as an
        argument instead of closing over it as constants, so that compile time does not grow
        with n.

        Args:
          fn: ``(trainer, *args) -> outputs``.
          **jit_kwargs: for ``jax.jit`` (``static_argnums`` count ``args`` from 0).

        Returns:
          The :class:`ClusterProgram`.
        """
        static = jit_kwargs.pop("static_argnums", ())
        static = (static,) if isinstance(static, int) else tuple(static)
        jitted = jax.jit(
            lambda cluster, *args: fn(self.bind(cluster), *args),
            static_argnums=tuple(i + 1 for i in static),
            **jit_kwargs,
        )
        return ClusterProgram(jitted, self.setup.cluster)

    def clock_work(self, steps: int = 16) -> int:
        """About how many worker operations :meth:`clock` of ``steps`` steps costs: steps ×
        the exchanges per step × n for the event engines (each exchange looks at every
        worker; :attr:`Algorithm.events_per_step`), steps × n for the rounds."""
        return steps * (self.algorithm.events_per_step or 1) * self.setup.n

    def clock(self, steps: int = 16) -> tuple[float, float]:
        """``(trajectories per step, simulated time per step)``: means over ``steps`` steps of
        the algorithm's clock alone (:attr:`Algorithm.simulate_clock`, key 0; no rollouts).
        Only the steps before one that can never end count (a worker down for good under
        ``cluster.power``: its end is not finite); the time is inf when the first cannot."""
        if self.algorithm.simulate_clock is None:
            raise ValueError(f"{self.name} has no simulated clock")
        simulate = _clock_program(self)
        trajectories, ends = (np.asarray(x, np.float64) for x in simulate(jax.random.key(0), steps))
        finite = np.isfinite(ends)
        k = steps if finite.all() else int(np.argmin(finite))
        if k == 0:
            return float(trajectories[0]), float("inf")
        return float(trajectories[:k].mean()), float(ends[k - 1] / k)

    def eval_every(self, every: int, every_time: float | None) -> int:
        """Steps per evaluation chunk: ``every``, or with ``every_time`` the number of steps
        that take about that much simulated time on this algorithm's clock (at least 1)."""
        if every_time is None:
            return every
        return max(1, round(every_time / self.clock()[1]))

    def hyper(self, batch: int | None = None, **values: Any) -> dict[str, jax.Array]:
        """Traced hyperparameters (float32), from the config unless overridden.

        With ``batch``, every value is broadcast to a leading ``[batch]`` axis.  A padded
        program's run sizes (:data:`~jaxnigt.algorithms.sizes.SIZES`) are
        added when given.
        """
        out = {k: values.get(k, getattr(self.hparams, k)) for k in TRACED}
        out |= {k: v for k, v in values.items() if k in (*sizes.SIZES, *sizes.THRESHOLD_KEYS)}
        out = {k: jnp.asarray(v, jnp.float32) for k, v in out.items()}
        if batch is not None:
            out = {k: jnp.broadcast_to(v, (batch,)) for k, v in out.items()}
        return out

    def step(self, state: TrainState, budget: Any = jnp.inf) -> tuple[TrainState, StepMetrics]:
        """One step (round or block of arrivals) under the simulated-time ``budget``."""
        return self.algorithm.step(state, jnp.asarray(budget, jnp.float32))

    def run_chunk(
        self,
        state: TrainState,
        length: int,
        *,
        budget: Any = jnp.inf,
        max_rounds: Any = None,
        until: Any = None,
        cap: Any = None,
    ) -> tuple[TrainState, dict]:
        """Up to ``length`` steps; metrics stacked on a leading ``[length]`` axis.

        A step taken once the state's simulated time has reached ``budget`` (or its step
        count ``max_rounds``) is a no-op that keeps the state, and its metrics carry
        ``active = False``: under ``vmap`` every seed stops exactly at the first step that
        crosses the budget, whatever the other seeds do.

        Under a power trace (``cluster.power``), a step that would end at a time that is not
        finite (it waits for a worker down for good) never happens: a no-op with ``active =
        False`` and ``stalled = True`` (the runner stops that seed: :mod:`jaxnigt.run.loop`).

        With ``until`` (a simulated time; the next evaluation time of :meth:`eval_chunk`),
        the chunk also ends at the first step that reaches ``until``, and each step is
        given ``min(budget, until)`` as its budget, so that a step made of several updates
        (a block of asynchronous arrivals, a SEED RL or IMPALA step) stops after the first
        update past it: the chunk ends within one round or one arrival of ``until``. The
        steps then run as a ``lax.while_loop`` that stops once every seed has reached it
        (rows of steps not taken are zeros with ``active = False``); a seed whose
        ``length`` steps end before ``until`` is evaluated there, earlier.  ``cap`` (with
        ``until``; a run of a padded program) is the run's own ``length``, a value at most
        ``length``, which stays the rows' static size.
        """
        max_rounds = jnp.iinfo(jnp.int32).max if max_rounds is None else max_rounds
        stalls = lambda t: ~jnp.isfinite(t) if self.setup.cluster.power is not None else False
        if until is None:

            def body(s, _):
                live = (s.counters.time < budget) & (s.steps < max_rounds)
                new, metrics = self.step(s, budget)
                stalled = live & stalls(new.counters.time)
                active = live & ~stalled
                new = core.select(active, new, s)
                return new, {**metrics._asdict(), "active": active, "stalled": stalled}

            return jax.lax.scan(body, state, None, length=length)
        stop = jnp.minimum(jnp.asarray(budget, jnp.float32), until)
        return self._run_until(state, length, stop, max_rounds, stalls, cap)

    def _run_until(self, state, length: int, stop, max_rounds, stalls, cap):
        """:meth:`run_chunk` with ``until``: a ``lax.while_loop`` of at most ``length`` (and
        ``cap``) steps, each under the budget ``stop``, until every seed has reached it."""
        live = lambda s: (s.counters.time < stop) & (s.steps < max_rounds)
        shapes = jax.eval_shape(lambda s: self.step(s, stop)[1], state)._asdict()
        rows = {k: jnp.zeros((length, *x.shape), x.dtype) for k, x in shapes.items()}
        rows |= {flag: jnp.zeros((length,), bool) for flag in ("active", "stalled")}

        def one(carry):
            i, s, out, _ = carry
            new, metrics = self.step(s, stop)
            stalled = jnp.asarray(stalls(new.counters.time))
            row = {**metrics._asdict(), "active": ~stalled, "stalled": stalled}
            out = {k: out[k].at[i].set(row[k]) for k in out}
            return i + 1, core.select(stalled, s, new), out, stalled

        carry = (jnp.int32(0), state, rows, jnp.bool_(False))
        most = length if cap is None else jnp.minimum(cap, length)
        going = lambda c: (c[0] < most) & live(c[1]) & ~c[3]
        _, state, rows, _ = jax.lax.while_loop(going, one, carry)
        return state, rows

    def eval_chunk(self, every: int, every_time: float | None) -> tuple[int, float | None]:
        """``(length, every_time)`` of an evaluation chunk.

        By steps (``every_time`` None): ``every`` steps. By simulated time: a chunk ends at
        the first step that reaches the next multiple of ``every_time`` (or the budget), so
        that every method is evaluated at most ``every_time`` (plus one round, or one
        arrival) apart whatever its step's length; ``length`` caps the steps of a chunk at
        ``2 k + 2``, ``k`` the steps that take ``every_time`` on this algorithm's clock
        (:meth:`eval_every`).
        """
        if every_time is None:
            return every, None
        return 2 * self.eval_every(every, every_time) + 2, float(every_time)

    def chunk_and_evaluate(
        self,
        state: TrainState,
        eval_key: jax.Array,
        train: jax.Array,
        length: int,
        *,
        budget: Any = jnp.inf,
        max_rounds: Any = None,
        every_time: float | None = None,
        cap: Any = None,
    ) -> tuple[TrainState, dict, jax.Array]:
        """``length`` steps (skipped when ``train`` is False), then evaluate the result.

        With ``every_time`` the chunk ends at the first step that reaches the next multiple
        of ``every_time`` after the state's time (:meth:`run_chunk`'s ``until``).  One
        compiled program serves both the initial evaluation (``train=False``) and every
        training chunk, so an environment's rollout is compiled once for training and once
        for evaluation. Keep ``train`` unbatched under ``vmap`` so ``lax.cond`` stays a branch.
        ``cap``: a padded program's run's own chunk length (:meth:`run_chunk`).
        """
        until = None
        if every_time is not None:
            grid = jnp.float32(every_time)
            until = (jnp.floor(state.counters.time / grid) + 1.0) * grid
        run = lambda s: self.run_chunk(
            s, length, budget=budget, max_rounds=max_rounds, until=until, cap=cap
        )
        shapes = jax.eval_shape(run, state)[1]
        skip = lambda s: (s, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes))
        state, metrics = jax.lax.cond(train, run, skip, state)
        return state, metrics, self.evaluate(state, eval_key)

    def deploy_params(self, state: TrainState) -> Any:
        """Params to evaluate and deploy (NIGT's iterate x_t; otherwise the params)."""
        return self.algorithm.eval_params(state)

    def evaluate(self, state: TrainState, key: jax.Array) -> jax.Array:
        """Undiscounted returns ``[episodes]`` of the deploy params (episode e: type e mod V)."""
        return rollout.evaluate(
            self.setup.task,
            self.setup.policy,
            self.deploy_params(state),
            key,
            self.eval_episodes,
            deterministic=self.eval_deterministic,
        )


class ClusterProgram(NamedTuple):
    """A jitted program and the cluster model it is called with (:meth:`Trainer.program`).

    Attributes:
      jitted: the program, ``(cluster, *args) -> outputs``.
      cluster: the concrete record.
    """

    jitted: Any
    cluster: ClusterModel

    def __call__(self, *args: Any) -> Any:
        return self.jitted(self.cluster, *args)

    def lower(self, *args: Any) -> Any:
        """``jax.jit``'s ``lower`` with the arrays in place (for ``compile()`` and its memory)."""
        return self.jitted.lower(self.cluster, *args)


@functools.lru_cache(maxsize=32)
def _clock_program(trainer: Trainer) -> ClusterProgram:
    """The trainer's clock as a program (cached: ``eval_every`` and ``plan`` both ask)."""
    clock = lambda tr, key, steps: tr.algorithm.simulate_clock(key, steps)
    return trainer.program(clock, static_argnums=1)


def clock_program(trainer: Trainer) -> ClusterProgram:
    """The trainer's clock alone as a jitted program (:attr:`Algorithm.simulate_clock`; no
    rollouts, no training): the one :meth:`Trainer.clock` and :meth:`Trainer.eval_every` run,
    cached per trainer.

    Args:
      trainer: a :class:`Trainer` whose algorithm has a simulated clock.

    Returns:
      A :class:`ClusterProgram` called as ``program(key, steps)`` that returns each step's
      trajectories delivered and its end in simulated time (arrays of ``steps``).
    """
    return _clock_program(trainer)


def make_trainer(config: ExperimentConfig, algorithm: str, *, mesh: Any = None) -> Trainer:
    """Builds the :class:`Trainer` of one algorithm of an experiment config.

    Args:
      config: a validated config (:func:`jaxnigt.config.load`).
      algorithm: one of ``config.algorithms`` (a registered name).
      mesh: an optional ``jax.sharding.Mesh`` to shard the batch of runs over.

    Returns:
      The :class:`Trainer`: its ``init``, ``step`` and ``evaluate`` programs over the
      config's environment, policy, simulated cluster and hyperparameters."""
    algorithms.get(algorithm)  # a clear error for an unknown name before any env is built
    return build_trainer(
        make_setup(config, algorithm, mesh=mesh),
        algorithm,
        config.hparams_for(algorithm),
        eval_episodes=config.eval.episodes,
        eval_deterministic=config.eval.deterministic,
    )


def build_trainer(
    setup: Setup,
    algorithm: str,
    hparams: HParams,
    *,
    eval_episodes: int = 8,
    eval_deterministic: bool = True,
) -> Trainer:
    """A :class:`Trainer` from an explicit :class:`~jaxnigt.algorithms.core.Setup`.

    Use this to run an algorithm on your own ``TaskEnv``/policy/cluster model without a config.

    Args:
      setup: the environment, policy and simulated cluster.
      algorithm: a registered algorithm name.
      hparams: its hyperparameters.
      eval_episodes: episodes per evaluation.
      eval_deterministic: evaluate the mean action (True) or sample (False).

    Returns:
      The :class:`Trainer`.
    """
    return Trainer(
        name=algorithm,
        setup=setup,
        algorithm=algorithms.get(algorithm)(setup, hparams),
        hparams=hparams,
        eval_episodes=eval_episodes,
        eval_deterministic=eval_deterministic,
    )
