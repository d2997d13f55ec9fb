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
    state, ms = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, 10)))(state)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt import envs, schedules, timing
from jaxnigt.algorithms import REGISTRY
from jaxnigt.algorithms import base as engine
from jaxnigt.algorithms.admm_pg import AdmmSpec
from jaxnigt.config import ExperimentConfig, HParams
from jaxnigt.policy import make_policy, num_params
from jaxnigt.rollout import evaluate as evaluate_returns


@functools.lru_cache(maxsize=8)
def _cached_task(name, horizon, heterogeneous, solver_iterations, ls_iterations):
    task = envs.make_env(
        name,
        horizon=horizon,
        solver_iterations=solver_iterations,
        ls_iterations=ls_iterations,
    )
    if heterogeneous is not None:
        task = envs.make_heterogeneous(task, heterogeneous)
    return task


def make_task(config: ExperimentConfig):
    """The config's environment (cached per process: MJX model loading is slow)."""
    e = config.env
    return _cached_task(e.name, e.horizon, e.heterogeneous, e.solver_iterations, e.ls_iterations)


def make_setup(config: ExperimentConfig, algorithm: str, *, mesh: Any = None) -> engine.Setup:
    """Static pieces of one algorithm's run: task, policy, time model, sizes.

    ``mesh`` (``jaxnigt.parallel.make_mesh``) splits each round's trajectory slots across
    devices; leave it None to keep rounds on one device (or to shard seeds instead).
    """
    hp: HParams = config.hparams_for(algorithm)
    task = make_task(config)
    policy = make_policy(task)
    dim = num_params(jax.eval_shape(policy.init, jax.random.key(0)))
    c = config.cluster
    tm = timing.make_time_model(
        c.n,
        h=c.h,
        noise=c.noise,
        kappa=c.kappa,
        scale_by_dim=c.scale_by_dim,
        dim=dim,
        per_step=c.per_step,
        horizon=task.horizon,
    )
    types = envs.worker_types(c.n, task.num_types, config.env.types)
    return engine.Setup(
        task=task,
        policy=policy,
        tm=tm,
        worker_types=np.asarray(types, np.int32),
        M=hp.M,
        M_init=hp.M_init or hp.M,
        per_worker_batch=hp.per_worker_batch,
        malenia_capacity=hp.malenia_capacity or schedules.default_malenia_capacity(hp.M, c.n),
        inflight=c.inflight,
        async_block=hp.async_block or c.n,
        mesh=mesh,
        allreduce=c.allreduce,
        link=c.link,
    )


@dataclasses.dataclass(frozen=True)
class Trainer:
    """Pure functions of one algorithm's run (all unbatched; vmap them over seeds/grids).

    Attributes:
      name: algorithm name.
      setup: the static :class:`~jaxnigt.algorithms.base.Setup`.
      init: ``(key, hyper) -> state`` at x_0, simulated time 0 (no rollouts).
      step: ``(state) -> (state, metrics)``, one round (or one block of arrivals).
      first_step: round 0 with ``M_init`` gradients when ``M_init != M`` (a second compiled
        shape); ``None`` when round 0 is an ordinary ``step``.
      hparams: the config's hyperparameters of this algorithm.
    """

    name: str
    setup: engine.Setup
    init: Callable[[jax.Array, dict], Any]
    step: Callable[[Any], tuple[Any, dict]]
    first_step: Callable[[Any], tuple[Any, dict]] | None
    hparams: HParams
    eval_episodes: int
    eval_deterministic: bool

    @property
    def dim(self) -> int:
        return num_params(jax.eval_shape(self.setup.policy.init, jax.random.key(0)))

    def hyper(self, batch: int | None = None, **values: Any) -> dict[str, jax.Array]:
        """Traced hyperparameters (float32), from the config unless overridden.

        With ``batch``, every value is broadcast to a leading ``[batch]`` axis.
        """
        out = {
            "learning_rate": values.get("learning_rate", self.hparams.learning_rate),
            "eta": values.get("eta", self.hparams.eta),
            "gamma": values.get("gamma", self.hparams.gamma),
        }
        out = {k: jnp.asarray(v, jnp.float32) for k, v in out.items()}
        if batch is not None:
            out = {k: jnp.broadcast_to(v, (batch,)) for k, v in out.items()}
        return out

    def run_chunk(
        self, state: Any, length: int, *, budget: Any = jnp.inf, max_rounds: Any = None
    ) -> tuple[Any, dict]:
        """``length`` steps as one ``lax.scan``; metrics stacked on a leading axis.

        A step taken once the state's simulated time has reached ``budget`` (or its round
        count ``max_rounds``) is a no-op that keeps the state, and its metrics carry
        ``active = False``: under ``vmap`` every seed stops exactly at the first round that
        crosses the budget, whatever the other seeds do.
        """
        max_rounds = jnp.iinfo(jnp.int32).max if max_rounds is None else max_rounds

        def body(s, _):
            active = (s.clock.time < budget) & (s.round < max_rounds)
            new, metrics = self.step(s)
            new = jax.tree.map(lambda a, b: jnp.where(active, a, b), new, s)
            return new, {**metrics, "active": active}

        return jax.lax.scan(body, state, None, length=length)

    def chunk_and_evaluate(
        self,
        state: Any,
        eval_key: jax.Array,
        train: jax.Array,
        length: int,
        *,
        budget: Any = jnp.inf,
        max_rounds: Any = None,
    ) -> tuple[Any, dict, jax.Array]:
        """``length`` steps (skipped when ``train`` is False), then evaluate the result.

        One compiled program serves both the initial evaluation (``train=False``) and every
        training chunk, so an environment's rollout is compiled once for training and once
        for evaluation. Keep ``train`` unbatched under ``vmap`` so ``lax.cond`` stays a branch.
        """
        run = lambda s: self.run_chunk(s, length, budget=budget, max_rounds=max_rounds)
        shapes = jax.eval_shape(run, state)[1]
        skip = lambda s: (s, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes))
        state, metrics = jax.lax.cond(train, run, skip, state)
        return state, metrics, self.evaluate(state, eval_key)

    def deploy_params(self, state: Any) -> Any:
        """Params to evaluate and deploy (NIGT's iterate x_t; otherwise the params)."""
        return engine.deploy_params(state.params, state.opt_state)

    def evaluate(self, state: Any, key: jax.Array) -> jax.Array:
        """Undiscounted returns ``[episodes]`` of the deploy params (episode e: type e mod V)."""
        return evaluate_returns(
            self.setup.task,
            self.setup.policy,
            self.deploy_params(state),
            key,
            self.eval_episodes,
            deterministic=self.eval_deterministic,
        )


def make_trainer(config: ExperimentConfig, algorithm: str, *, mesh: Any = None) -> Trainer:
    """Builds the :class:`Trainer` of one algorithm of an experiment config."""
    if algorithm not in REGISTRY:
        raise ValueError(f"unknown algorithm {algorithm!r}; available: {sorted(REGISTRY)}")
    return build_trainer(
        make_setup(config, algorithm, mesh=mesh),
        algorithm,
        config.hparams_for(algorithm),
        eval_episodes=config.eval.episodes,
        eval_deterministic=config.eval.deterministic,
    )


def build_trainer(
    setup: engine.Setup,
    algorithm: str,
    hparams: HParams,
    *,
    eval_episodes: int = 8,
    eval_deterministic: bool = True,
) -> Trainer:
    """A :class:`Trainer` from an explicit :class:`~jaxnigt.algorithms.base.Setup`.

    Use this to run an algorithm on your own ``TaskEnv``/policy/time model without a config.
    """
    if algorithm not in REGISTRY:
        raise ValueError(f"unknown algorithm {algorithm!r}; available: {sorted(REGISTRY)}")
    spec = REGISTRY[algorithm]
    first_step = None
    if isinstance(spec, engine.RoundSpec):
        init = functools.partial(engine.round_init, setup, spec)
        step = functools.partial(engine.round_step, setup, spec)
        if setup.M_init != setup.M:
            first_step = functools.partial(engine.round_first_step, setup, spec)
    elif isinstance(spec, AdmmSpec):
        init, step = spec.make(setup, hparams)
    else:
        init = functools.partial(engine.async_init, setup, spec)
        step = functools.partial(engine.async_step, setup, spec)
    return Trainer(
        name=algorithm,
        setup=setup,
        init=init,
        step=step,
        first_step=first_step,
        hparams=hparams,
        eval_episodes=eval_episodes,
        eval_deterministic=eval_deterministic,
    )
