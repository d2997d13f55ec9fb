"""The round engine of the AllReduce methods (Rennala/Malenia/Sync NIGT, Rennala/Sync PG, A2C).

Each round a schedule (:mod:`jaxnigt.cluster.schedules`) picks the trajectory slots that count, an
aggregator (:mod:`jaxnigt.cluster.aggregators`) weights them, the estimator reduces them to one
gradient at the broadcast point (:func:`jaxnigt.rl.collect.gradient_from_schedule`), and an optax
update moves the point.  :func:`make` composes those three parts into an
:class:`~jaxnigt.algorithms.core.Algorithm`; round 0 aggregates ``M_init`` gradients at x_0
(NIGT's d_0 = g_0), later rounds ``M``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxnigt.algorithms import core, updates
from jaxnigt.algorithms.core import Algorithm, Setup, TrainState
from jaxnigt.cluster import events, rounds, rules, schedules
from jaxnigt.rl.collect import gradient_from_schedule

# (model, key, t0, busy_until[, sizes]) -> schedule; ``sizes`` (the state's) holds a padded
# program's run sizes (:mod:`jaxnigt.algorithms.sizes`), read by the rule they are of.
ScheduleFn = Callable[..., schedules.RoundSchedule]
WeightsFn = Callable[[schedules.RoundSchedule], jax.Array]


class RoundOptions(NamedTuple):
    """The round engine's options, from the config's hyperparameters.

    Attributes:
      per_worker_batch: the synchronous collection's gradients per worker: an integer, or
        ``match_M`` for max(1, ceil(M/n)) of the round's M (:func:`jaxnigt.cluster.schedules.
        sync_batch`).
      malenia_capacity: Malenia's per-worker capacity of a round (resolved: the config's
        value or :func:`jaxnigt.cluster.schedules.default_malenia_capacity` of M and n).
      msync_m: the workers an m-synchronous round waits for (resolved: the config's value
        or :func:`jaxnigt.cluster.schedules.default_msync_m` of n).
    """

    per_worker_batch: int | str = 1
    malenia_capacity: int = 0
    msync_m: int = 1

    @classmethod
    def resolve(cls, setup: Setup, hparams: Any) -> RoundOptions:
        """The options of a run of ``setup`` with the config's ``hparams`` (defaults here)."""
        capacity = hparams.malenia_capacity
        m = hparams.msync_m or schedules.default_msync_m(setup.n)
        if m > setup.n:
            raise ValueError(f"hparams.msync_m ({m}) must be at most cluster.n ({setup.n})")
        return cls(
            per_worker_batch=hparams.per_worker_batch,
            malenia_capacity=capacity or schedules.default_malenia_capacity(setup.M, setup.n),
            msync_m=m,
        )


# A schedule factory ``(setup, options, M, size) -> ScheduleFn`` picks a rule and its static
# sizes; the rule reads the cluster model's choices (in-flight work, the AllReduce) from the
# record it is called on.  ``size`` names the sizes entry that holds the round's M in a padded
# program (``M``, or ``M_init`` for round 0).
ScheduleFactory = Callable[[Setup, RoundOptions, int, str], ScheduleFn]


def traits_of(rule: str, **overrides: Any) -> core.Traits:
    """What running the registered round ``rule`` makes a method
    (:class:`~jaxnigt.algorithms.core.Traits`): the cluster options that change its rounds,
    M tuned (its batch), its overflow's meaning, whether it pads; ``overrides`` replace
    fields (e.g. ``options``, ``tuned_shapes``)."""
    spec = rules.get_rule(rule)
    base = core.Traits(
        cluster_options=spec.cluster_options,
        tuned_shapes=("M",),
        overflow=spec.overflow,
        pads=spec.pads,
        rule=rule,
    )
    return base._replace(**overrides)


# Rennala stops at the M-th gradient, so work is in flight at a round's end and only the
# contributors need to join the AllReduce; Malenia waits for every worker (all contribute)
# but stops the others mid-gradient; a synchronous round waits for every worker's b
# gradients (nothing in flight, everyone contributes), so only down_exchange changes it; an
# m-synchronous round stops the n - m slower workers mid-gradient and its AllReduce may be
# over the m contributors only.  Every round ends with an AllReduce, which waits for a down
# worker (outages, a trace) or not: down_exchange changes every rule's rounds.
RENNALA = traits_of("rennala")
MALENIA = traits_of("malenia", options=("malenia_capacity",))
SYNC = traits_of("sync", tuned_shapes=(), options=("per_worker_batch",))
MSYNC = traits_of("msync", tuned_shapes=("msync_m",), options=("msync_m",))


def schedule(rule: str) -> ScheduleFactory:
    """The schedule factory of the registered round ``rule``: its :class:`~jaxnigt.cluster.
    rules.RoundSize` from the run's options (the round's M, Malenia's capacity, the
    synchronous batch, m-sync's m) and, in a padded program, the run's values of them.  A
    rule that is not the library's own and says it pads is held to its unpadded rounds
    (:func:`jaxnigt.cluster.rules.check_padding`, once a process) before its first use."""
    spec = rules.get_rule(rule)
    check = spec.pads and not rules.builtin(rule)
    return schedule_with(
        spec.round, pads=spec.pads, check=(lambda: rules.check_padding(rule)) if check else None
    )


def schedule_with(round_rule, *, pads: bool = True, check=None) -> ScheduleFactory:
    """The schedule factory of a round rule given as a function (``round_rule(model, key, t0,
    busy_until, size) -> RoundSchedule``): a registered rule's, or one made with other
    options (MindFlayer's and Ringleader's ``round_with``).  ``pads``: in a padded program
    the rule reads the run's sizes (``size.run``); ``check``: called before the first use."""

    def make_schedule(setup: Setup, options: RoundOptions, M: int, size: str = "M"):
        if check is not None:
            check()
        static = round_size(setup, options, M)

        def collect(model, key, t0, busy_until, sizes=None):
            run = rules.run_values(sizes, size) if pads else None
            return round_rule(model, key, t0, busy_until, static._replace(run=run))

        return collect

    return make_schedule


def round_size(setup: Setup, options: RoundOptions, M: int) -> rules.RoundSize:
    """The static :class:`~jaxnigt.cluster.rounds.RoundSize` of a round of batch ``M``."""
    b = schedules.sync_batch(M, setup.n, options.per_worker_batch)
    return rules.RoundSize(M=M, capacity=options.malenia_capacity, per_worker=b, m=options.msync_m)


rennala_schedule = schedule("rennala")
malenia_schedule = schedule("malenia")
sync_schedule = schedule("sync")
msync_schedule = schedule("msync")


def factory(
    *,
    schedule: ScheduleFactory,
    weights: WeightsFn,
    update: updates.Update,
    traits: core.Traits,
    estimator: core.Estimator = core.reinforce,
) -> core.AlgorithmFactory:
    """``make(setup, hparams)`` of a round-based algorithm.

    Args:
      schedule: its collection (a schedule factory such as :func:`rennala_schedule`).
      weights: its aggregator weights.
      update: its server update (:data:`~jaxnigt.algorithms.updates.NIGT` or ``SGD``).
      traits: its :class:`~jaxnigt.algorithms.core.Traits`.
      estimator: its gradient estimator (the policy gradient by default).

    Returns:
      The factory.
    """

    def make_algorithm(setup: Setup, hparams) -> Algorithm:
        options = RoundOptions.resolve(setup, hparams)
        parts = {"schedule": schedule, "weights": weights, "update": update, "traits": traits}
        return make(setup, options, estimator=estimator, **parts)

    return make_algorithm


def make(
    setup: Setup,
    options: RoundOptions,
    *,
    schedule: ScheduleFactory,
    weights: WeightsFn,
    update: updates.Update,
    traits: core.Traits,
    estimator: core.Estimator = core.reinforce,
) -> Algorithm:
    """A round-based algorithm.

    Args:
      setup: the run's setup.
      options: the engine's options.
      schedule: its collection (a schedule factory).
      weights: its aggregator weights.
      update: its server update.
      traits: its traits.
      estimator: its gradient estimator (the policy gradient by default).

    Returns:
      The :class:`~jaxnigt.algorithms.core.Algorithm`.
    """
    optimizer = update.optimizer

    def round_with(M: int, size: str = "M"):
        sched = schedule(setup, options, M, size)
        return functools.partial(_round, setup, M, sched, weights, optimizer, estimator)

    def round_schedule(state: TrainState, first: bool = False):
        M, size = (setup.M_init, "M_init") if first else (setup.M, "M")
        _, sched, k_sched = _schedule(setup, schedule(setup, options, M, size), state)
        return sched, k_sched, round_size(setup, options, M)

    return Algorithm(
        init=functools.partial(_init, setup, optimizer),
        step=round_with(setup.M),
        eval_params=update.eval_params,
        first_step=round_with(setup.M_init, "M_init") if setup.M_init != setup.M else None,
        simulate_clock=functools.partial(
            schedules.round_clock, schedule(setup, options, setup.M, "M"), setup.cluster
        ),
        traits=traits.using(update),
        round_schedule=round_schedule,
    )


def _schedule(setup: Setup, schedule: ScheduleFn, state: TrainState):
    """``(keys, schedule, round key)``: the round ``state``'s next step takes: its keys
    ``(next state key, rollout key)``, its schedule and the key it was drawn from."""
    key, k_sched, k_roll = jax.random.split(state.key, 3)
    model = core.cluster_of(setup, state)
    sched = schedule(model, k_sched, state.counters.time, state.busy_until, state.sizes)
    return (key, k_roll), sched, k_sched


class RoundExtra(NamedTuple):
    """Engine state kept in ``TrainState.extra``.

    Attributes:
      compute_end: ``[n]`` when each worker's computing of its latest round ends
        (:attr:`~jaxnigt.cluster.rounds.RoundSchedule.compute_end`): past the state's time
        only for a discarded gradient still being computed (``inflight: discard``), whose
        rest of the worker time comes later.
    """

    compute_end: jax.Array


def _init(setup: Setup, optimizer, key: jax.Array, hyper: core.TracedHParams) -> TrainState:
    """x_0 at time 0, nothing collected yet."""
    k_init, k_run = jax.random.split(key)
    params = setup.policy.init(k_init)
    opt_state = optimizer(hyper).init(params)
    cluster = core.run_cluster(setup, key)
    extra = RoundExtra(jnp.zeros((setup.n,), jnp.float32))
    return core.initial_state(setup, params, opt_state, k_run, hyper, extra, cluster=cluster)


def worker_time(model, state: TrainState, sched: rounds.RoundSchedule, extra: RoundExtra):
    """``(growth, extra)``: the total worker time's growth over a round that starts at
    ``state`` (its workers' computing, :attr:`~jaxnigt.cluster.rounds.RoundSchedule.
    worker_time`, counted by its end: a discarded gradient's computing past it counts when
    it is done, in later rounds) and the engine state after it.

    Args:
      model: the run's cluster record.
      state: the state the round starts from (its ``extra`` a :class:`RoundExtra`).
      sched: the round.
      extra: ``state.extra``.

    Returns:
      ``([] float32, RoundExtra)``.
    """
    growth = sched.worker_time
    compute_end = jnp.maximum(extra.compute_end, sched.compute_end)
    if model.inflight == "discard":  # the part of the computing still ahead of each end
        before = events.computing_ahead(model, extra.compute_end, state.counters.time)
        after = events.computing_ahead(model, compute_end, sched.t_end)
        growth = growth + before - after
    return growth, RoundExtra(compute_end)


def _round(
    setup: Setup,
    M: int,
    schedule: ScheduleFn,
    weights: WeightsFn,
    optimizer: core.OptimizerFactory,
    estimator: core.Estimator,
    state: TrainState,
    budget: jax.Array,
):
    """One round collecting ``M`` gradients: schedule, rollouts of the slots that count (in
    batches of ``M``), one update."""
    del budget  # a round is applied whole once it starts before the budget
    (key, k_roll), sched, _ = _schedule(setup, schedule, state)
    model = core.cluster_of(setup, state)
    w = weights(sched)
    grads, stats = gradient_from_schedule(
        setup.task,
        setup.policy,
        state.params,
        sched,
        w,
        k_roll,
        setup.cluster.worker_types,
        state.hyper["gamma"],
        chunk=min(M, sched.slot_worker.shape[0]),
        mesh=setup.mesh,
        estimator=functools.partial(estimator, setup.policy, hyper=state.hyper),
    )
    params, opt_state = core.descend(optimizer(state.hyper), grads, state.opt_state, state.params)
    spent, extra = worker_time(model, state, sched, state.extra)
    new = state._replace(
        params=params,
        opt_state=opt_state,
        key=key,
        steps=state.steps + 1,
        counters=core.advance(
            state.counters,
            time=sched.t_end,
            env_steps=stats["sum_length"],
            env_steps_wasted=sched.traj_wasted * setup.horizon,
            comms=sched.comms,
            worker_time=spent,
        ),
        busy_until=sched.busy_until,
        extra=extra,
    )
    return new, core.step_metrics(
        new,
        round_time=sched.t_end - sched.t_start,
        grads=stats["count"],
        train_return=core.mean_return(stats["sum_return"], stats["count"]),
        counts=sched.counts,
        active=model.active,
        finite=core.all_finite(grads) & core.all_finite(params),
        overflow=sched.overflow,
    )
