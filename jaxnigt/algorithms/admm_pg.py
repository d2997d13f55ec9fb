"""ADMM consensus policy gradient (``admm_pg``, docs/algorithms.md).

Consensus form of the distributed problem ``max Σ_i J_i(θ_i)`` s.t. ``θ_i = z``: worker i
keeps its own parameters θ_i and a multiplier λ_i, and each round

.. math::
    θ_i &\\leftarrow θ_i + α \\big(g_i(θ_i) − λ_i − ρ (θ_i − z)\\big)
        \\quad \\text{(K times: ascent on } L_i = J_i(θ_i) − λ_i^T(θ_i − z)
        − \\tfrac{ρ}{2}\\|θ_i − z\\|^2 \\text{)} \\\\
    z &\\leftarrow \\tfrac{1}{n} \\textstyle\\sum_i (θ_i + λ_i / ρ)
        \\quad \\text{(one AllReduce)} \\\\
    λ_i &\\leftarrow λ_i + ρ (θ_i − z)

where ``g_i(θ_i)`` is the mean of ``B`` trajectory gradients ``g_H(τ, θ_i)`` rolled out by
worker i in its own environment type at its own θ_i (each local step draws fresh
trajectories). Local steps warm-start from the previous round's θ_i (inexact ADMM). Since
``Σ_i λ_i = 0`` after every dual update, ``z = mean_i θ_i`` from round 1 on.

State layout (:class:`~jaxnigt.algorithms.core.TrainState`): ``params`` = z (what
``eval_params`` returns; ``opt_state`` is ``optax.EmptyState()``), ``extra`` =
:class:`AdmmExtra` with θ and λ as pytrees with a leading worker axis ``[n, ...]``;
``hyper`` holds the traced local learning rate α, γ and ρ (ρ defaults to the config's
``admm_rho``; pass ``hyper["rho"]`` to ``init`` to sweep it). K and B are shapes: static.

Time: a round is the synchronous schedule with ``K·B`` gradients per worker
(``schedules.sync``, drawing ``K·B`` compute times per worker from
``timing.sample_compute_times``): ``max_i Σ_{k<KB} τ_{i,k} + max_i κ_i``; one AllReduce,
no wasted work, ``K·B`` trajectories per worker. Trajectory (k, i, b) — local step k,
worker i, b-th trajectory of that step — uses the key
``slot_keys(round_key, i, k·B + b)``, the key of the synchronous schedule's
``(k·B + b)``-th gradient of worker i, so with K = 1 a round sees exactly the trajectories
of a ``sync_pg`` round with per-worker batch B.

References: Boyd et al. (2011), *Distributed Optimization and Statistical Learning via
the Alternating Direction Method of Multipliers*, §7.1 (global consensus); the signs here
are for ascent on J (minimizing −J gives the same updates).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxnigt.algorithms import core, updates
from jaxnigt.algorithms.core import Algorithm, Setup, TrainState
from jaxnigt.cluster import schedules
from jaxnigt.rl.collect import slot_keys
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.rollout import rollout


class AdmmOptions(NamedTuple):
    """Static options of one run (from the config's ``admm_*`` hyperparameters)."""

    rho: float  # default ρ (traced in the state as hyper["rho"])
    local_steps: int  # K
    local_batch: int  # B

    @classmethod
    def resolve(cls, setup: Setup, hparams: Any) -> AdmmOptions:
        """K, B and ρ of a run; B is 1 by default, ``max(1, ceil(M/n))`` with ``match_M``,
        like the synchronous batch."""
        return cls(
            rho=float(hparams.admm_rho),
            local_steps=int(hparams.admm_local_steps),
            local_batch=schedules.sync_batch(setup.M, setup.n, hparams.admm_local_batch),
        )


class AdmmExtra(NamedTuple):
    """Per-worker ADMM state: pytrees shaped like the params with a leading ``[n]`` axis."""

    theta: Any  # θ_i
    lam: Any  # λ_i


KEYS = ("admm_rho", "admm_local_steps", "admm_local_batch")

# A synchronous round: every worker takes its K local steps, nothing is in flight and all
# join the consensus AllReduce, so only down_exchange (whether that AllReduce waits for a
# down worker) changes it.
TRAITS = core.Traits(cluster_options=("down_exchange",), options=KEYS)


def make(setup: Setup, hparams: Any) -> Algorithm:
    """``admm_pg`` with K, B and the default ρ from ``hparams``.

    Args:
      setup: the run's setup.
      hparams: the config's hyperparameters.

    Returns:
      The :class:`~jaxnigt.algorithms.core.Algorithm`.
    """
    opts = AdmmOptions.resolve(setup, hparams)
    schedule = functools.partial(schedules.sync, per_worker=opts.local_steps * opts.local_batch)
    return Algorithm(
        init=functools.partial(admm_init, setup, opts),
        step=functools.partial(admm_step, setup, opts),
        eval_params=updates.held_params,
        simulate_clock=functools.partial(schedules.round_clock, schedule, setup.cluster),
        traits=TRAITS,
    )


def lagrangian_ascent(grads: Any, theta: Any, lam: Any, z: Any, rho: jax.Array) -> Any:
    """``∇_θ L_i = g_i − λ_i − ρ (θ_i − z)``; leaves ``[n, ...]`` (z ``[...]`` broadcasts)."""
    return jax.tree.map(lambda g, t, lm, c: g - lm - rho * (t - c), grads, theta, lam, z)


def consensus_update(
    theta: Any, lam: Any, rho: jax.typing.ArrayLike, *, axis_name: str | None = None
) -> tuple[Any, Any]:
    """The consensus and dual steps: ``z = mean_i(θ_i + λ_i/ρ)``, ``λ_i += ρ (θ_i − z)``.

    Args:
      theta: pytree of local parameters, leaves ``[n, ...]`` (or one worker's ``[...]``
        when ``axis_name`` is given).
      lam: multipliers, like ``theta``.
      rho: penalty ρ > 0 (may be traced).
      axis_name: named worker axis to ``pmean`` over (under ``jax.vmap(...,
        axis_name=...)``), or None for a leading batch axis.

    Returns:
      ``(z, lam)``: the consensus point (leaves ``[...]``) and the new multipliers.

    Example::

      z, lam = consensus_update(theta, lam, 1.0)
      # or, with one worker's values per vmap lane:
      z, lam = jax.vmap(functools.partial(consensus_update, rho=1.0, axis_name="w"),
                        axis_name="w")(theta, lam)
    """
    rho = jnp.asarray(rho, jnp.float32)
    shifted = jax.tree.map(lambda t, lm: t + lm / rho, theta, lam)
    if axis_name is None:
        z = jax.tree.map(lambda s: jnp.mean(s, axis=0), shifted)
    else:
        z = jax.lax.pmean(shifted, axis_name)
    lam = jax.tree.map(lambda lm, t, c: lm + rho * (t - c), lam, theta, z)
    return z, lam


def consensus_residual(theta: Any, z: Any) -> jax.Array:
    """``[n]`` primal residuals ``‖θ_i − z‖`` (over all leaves)."""
    sq = [
        jnp.sum(jnp.reshape(t - c, (t.shape[0], -1)) ** 2, axis=1)
        for t, c in zip(jax.tree.leaves(theta), jax.tree.leaves(z), strict=True)
    ]
    return jnp.sqrt(sum(sq))


def admm_init(
    setup: Setup, opts: AdmmOptions, key: jax.Array, hyper: core.TracedHParams
) -> TrainState:
    """z_0 = x_0 (as the round engine's init), θ_i = z_0, λ_i = 0, time 0."""
    k_init, k_run = jax.random.split(key)
    z = setup.policy.init(k_init)
    theta = core.stack_workers(z, setup.n)
    hyper = {**hyper, "rho": jnp.asarray(hyper.get("rho", opts.rho), jnp.float32)}
    extra = AdmmExtra(theta, jax.tree.map(jnp.zeros_like, theta))
    model = core.run_cluster(setup, key)
    return core.initial_state(setup, z, optax.EmptyState(), k_run, hyper, extra, cluster=model)


def _local_step(setup: Setup, opts: AdmmOptions, state: TrainState, k_roll, theta, k):
    """Local ascent step k of every worker on its augmented Lagrangian (B trajectories each)."""
    n, B = setup.n, opts.local_batch
    alpha, gamma, rho = (state.hyper[name] for name in ("learning_rate", "gamma", "rho"))
    worker = jnp.repeat(jnp.arange(n, dtype=jnp.int32), B)  # slot s = i·B + b
    rank = jnp.tile(jnp.arange(B, dtype=jnp.int32), n)
    types = setup.cluster.worker_types[worker]
    weights = jnp.full((n * B,), 1.0 / B, jnp.float32)
    keys = slot_keys(k_roll, worker, k * B + rank)
    at = jax.tree.map(lambda t: jnp.repeat(t, B, axis=0), theta)
    traj = rollout(setup.task, setup.policy, at, keys, types, per_slot_params=True)
    g_slot, stats = policy_gradient(setup.policy, at, traj, weights, gamma, per_slot_params=True)
    g = jax.tree.map(lambda x: jnp.sum(x.reshape(n, B, *x.shape[1:]), axis=1), g_slot)
    d = lagrangian_ascent(g, theta, state.extra.lam, state.params, rho)
    theta = jax.tree.map(lambda t, di: t + alpha * di, theta, d)
    out = {name: stats[name] for name in ("sum_return", "sum_length", "count")}
    return theta, {**out, "finite": core.all_finite(g)}


def admm_step(setup: Setup, opts: AdmmOptions, state: TrainState, budget: jax.Array):
    """One round: K local steps per worker, one AllReduce, dual update."""
    del budget  # a round is applied whole once it starts before the budget
    key, k_sched, k_roll = jax.random.split(state.key, 3)
    sched = schedules.sync(
        core.cluster_of(setup, state),
        k_sched,
        state.counters.time,
        state.busy_until,
        per_worker=opts.local_steps * opts.local_batch,
    )
    local = functools.partial(_local_step, setup, opts, state, k_roll)
    ks = jnp.arange(opts.local_steps, dtype=jnp.int32)
    theta, out = jax.lax.scan(local, state.extra.theta, ks)
    z, lam = consensus_update(theta, state.extra.lam, state.hyper["rho"])
    count = jnp.sum(out["count"])
    new = state._replace(
        params=z,
        key=key,
        steps=state.steps + 1,
        counters=core.advance(
            state.counters,
            time=sched.t_end,
            env_steps=jnp.sum(out["sum_length"]),
            comms=sched.comms,
            worker_time=sched.worker_time,  # its workers' local steps (no work in flight)
        ),
        busy_until=sched.busy_until,
        extra=AdmmExtra(theta, lam),
    )
    return new, core.step_metrics(
        new,
        round_time=sched.t_end - sched.t_start,
        grads=count,
        train_return=core.mean_return(jnp.sum(out["sum_return"]), count),
        counts=sched.counts,
        finite=jnp.all(out["finite"]) & core.all_finite((z, theta, lam)),
        overflow=sched.overflow,
    )
