"""What every algorithm shares: the static setup, the run state, the step metrics, the interface.

An algorithm is an :class:`Algorithm`: pure functions over a :class:`TrainState` (init, step,
eval_params, and optionally first_step and simulate_clock) that a factory
``make(setup, hparams)`` builds by composing a shared engine (:mod:`jaxnigt.algorithms.engines`)
with a schedule, aggregator weights, an estimator and an optax update.  Every step returns a
:class:`StepMetrics`, whose simulated-time counters are advanced by one helper
(:func:`advance`), so the metric names live in one place and the CSV columns derive from it.

Everything is a pure function of explicit state; the sweepable hyperparameters (learning
rate, η, γ, ...) live in the state as arrays, so seeds and grids are a ``vmap`` away.
Gradients are ascent directions on J; the optimizers descend, so they receive ``−g``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxnigt.cluster import model as cluster_model
from jaxnigt.cluster import padding
from jaxnigt.cluster.model import ClusterModel

# Traced hyperparameters: {"learning_rate", "eta", "gamma", ...} as float32 arrays (the config's
# HParams hold the Python values; these are what the compiled program sees).
TracedHParams = dict[str, jax.Array]
OptimizerFactory = Callable[[TracedHParams], optax.GradientTransformation]
#: ``(policy, params, traj, weights, hyper, *, per_slot_params) -> (grads, stats)``: the
#: weighted gradient (an ascent direction) of a batch of trajectories and its statistics
#: ``sum_return``, ``sum_length``, ``count``, in one backward pass.
Estimator = Callable[..., tuple[Any, dict]]


def reinforce(policy, params, traj, weights, hyper: TracedHParams, *, per_slot_params=False):
    """The policy-gradient estimator g_H (:func:`jaxnigt.rl.estimator.policy_gradient`)."""
    from jaxnigt.rl.estimator import policy_gradient

    return policy_gradient(
        policy, params, traj, weights, hyper["gamma"], per_slot_params=per_slot_params
    )


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """Everything about one algorithm's run that its steps close over, and its cluster.

    Compared and hashed by identity (``eq=False``): it holds arrays, and jit caches the step
    per Setup object.

    Attributes:
      task: the ``TaskEnv``.
      policy: the ``GaussianPolicy``.
      cluster: the cluster model (:class:`~jaxnigt.cluster.model.ClusterModel`): its
        per-worker arrays (compute and communication times, message times, worker types) and
        its named choices (in-flight work, the AllReduce, the server link). Concrete arrays,
        or inside a program built with :meth:`with_cluster` that program's arguments
        (tracers): the runner passes the record to its jitted programs as an argument, so
        compile time does not grow with the number of workers (closed-over arrays would be
        embedded in the program as constants, and XLA folds expressions of them at compile
        time).
      M: gradients per round.
      M_init: gradients of round 0.
      mesh: optional device mesh over which each round's trajectory slots are split
        (``jaxnigt.run.devices``); None keeps everything on one device.
      host: the concrete record behind a traced ``cluster`` (set by :meth:`with_cluster`;
        None when ``cluster`` is concrete): what a factory reads on the host while it builds
        an algorithm (option defaults such as the asynchronous wave), via
        :attr:`host_cluster`.

    Every engine receives the cluster model whole; its algorithms'
    :attr:`Traits.cluster_options` name the choices that change them. What only one engine
    reads (the synchronous batch, Malenia's capacity, the asynchronous block, IMPALA's
    learner, ADMM's local steps, the actor-critic losses) is that engine's options, resolved
    from the config's hyperparameters by the engine (:attr:`Traits.options` lists the keys).
    """

    task: Any
    policy: Any
    cluster: ClusterModel
    M: int
    M_init: int
    mesh: Any = None
    host: ClusterModel | None = None

    @property
    def n(self) -> int:
        """The number of workers."""
        return int(self.cluster.n)

    @property
    def host_cluster(self) -> ClusterModel:
        """The concrete cluster model (``cluster`` itself outside a program built on it)."""
        return self.cluster if self.host is None else self.host

    def with_cluster(self, cluster: ClusterModel) -> Setup:
        """This setup on another record of the same cluster.

        Args:
          cluster: typically a jitted program's traced argument.

        Returns:
          The setup with ``cluster`` and, as :attr:`host`, the concrete record.
        """
        return dataclasses.replace(self, cluster=cluster, host=self.host_cluster)

    @property
    def horizon(self) -> int:
        """The trajectory length H."""
        return int(self.task.horizon)


class Counters(NamedTuple):
    """Cumulative simulated-cluster counters (float32 scalars; per seed under vmap).

    ``worker_time`` is the total worker time by ``time``: the sum over workers of the time
    each spent computing (docs/howto/metrics.md), gradients that entered no update and the
    work in flight at ``time`` (up to ``time``) included.
    """

    time: jax.Array
    env_steps: jax.Array
    env_steps_wasted: jax.Array
    comms: jax.Array
    worker_time: jax.Array


class TrainState(NamedTuple):
    """State of one run (one seed, one hyperparameter point).

    Attributes:
      params: the point where rollouts happen (NIGT: the extrapolated y_t; ADMM: z).
      opt_state: the optax state.
      key: the round engines' PRNG key of the next round (split every round); the event
        engines draw from the keys in ``extra`` (by server version) and keep here the run's
        key, which no step reads.
      steps: int32 steps done (rounds, or blocks of arrivals for asynchronous methods).
      counters: :class:`Counters`.
      busy_until: ``[n]`` when each worker is free to start the next round's work.
      hyper: :data:`TracedHParams`.
      extra: engine-specific state (asynchronous engine, ADMM's per-worker θ and λ).
      sizes: a padded program's run sizes (:data:`jaxnigt.algorithms.sizes.SIZES` and
        Malenia's thresholds, traced), apart from the hyperparameters; None in an ordinary
        program, whose sizes are its static ones.
      drawn: what the run drew of its cluster record (its outages, from its key:
        :func:`jaxnigt.cluster.model.realize`), kept so every step simulates the same record
        (:func:`cluster_of`); None when nothing of the record is drawn per run.
    """

    params: Any
    opt_state: Any
    key: jax.Array
    steps: jax.Array
    counters: Counters
    busy_until: jax.Array
    hyper: TracedHParams
    extra: Any
    sizes: Any = None
    drawn: Any = None


class StepMetrics(NamedTuple):
    """What one step reports (all ``[]``; stacked along a leading axis by ``lax.scan``).

    The fields up to ``worker_time`` are ``metrics.csv`` columns, in order (the runner adds
    the evaluation returns); ``overflow`` and ``nonfinite`` are health flags;
    ``worker_counts`` feeds ``worker_counts.csv``.

    Attributes:
      round: int32 steps done after this one (rounds, or blocks of arrivals).
      sim_time, env_steps, env_steps_wasted, comms: the :class:`Counters` after the step.
      grads: gradients that entered an update.
      round_time: simulated time of the step.
      train_return: mean undiscounted return of the step's trajectories.
      counts_min, counts_mean, counts_max: per-worker gradient counts of the step.
      staleness_min, staleness_mean, staleness_max: server versions between dispatch and
        arrival (asynchronous methods; NaN otherwise).
      link_util: server link busy time / step time (asynchronous methods; NaN otherwise).
      messages: small exchanges so far (central inference's observation up, action down,
        one per environment step: ``seed_rl``); ``comms`` counts the vector exchanges
        (gradients, parameters), so 0 for methods that send no small messages.
      worker_time: the :class:`Counters`' total worker time by ``sim_time``.
      overflow: Malenia's capacity was too small.
      nonfinite: a parameter, gradient or return was not finite.
      worker_counts: ``[n]`` float32 gradients of each worker that entered the step's update.
    """

    round: jax.Array
    sim_time: jax.Array
    env_steps: jax.Array
    env_steps_wasted: jax.Array
    comms: jax.Array
    grads: jax.Array
    round_time: jax.Array
    train_return: jax.Array
    counts_min: jax.Array
    counts_mean: jax.Array
    counts_max: jax.Array
    staleness_min: jax.Array
    staleness_mean: jax.Array
    staleness_max: jax.Array
    link_util: jax.Array
    messages: jax.Array
    worker_time: jax.Array
    overflow: jax.Array
    nonfinite: jax.Array
    worker_counts: jax.Array


HEALTH_FLAGS = ("overflow", "nonfinite")
LOGGED = tuple(f for f in StepMetrics._fields if f not in (*HEALTH_FLAGS, "worker_counts"))


class Traits(NamedTuple):
    """What an algorithm is, for the code that runs, tunes and compares it without a setup.

    Each algorithm module holds its own ``TRAITS`` (:func:`jaxnigt.algorithms.traits` reads
    it) and its built :class:`Algorithm` carries the same value.

    Attributes:
      cluster_options: the named choices of the cluster model
        (:data:`jaxnigt.cluster.model.CHOICES`, the ``cluster:`` keys of docs/cluster_model.md:
        ``inflight``, ``link``, ``allreduce``, ``down_exchange``) whose value changes this
        algorithm's runs; under every other choice its runs are the same (a model variant
        retunes only the algorithms it affects).
      tuned_shapes: the shape-changing hyperparameters the tuning protocol tunes for it
        (docs/results.md: ``M`` = ``M_init`` for Rennala's and Malenia's collections), each value
        its own compiled program.
      overflow: what its ``overflow`` flag means, with the fix (None: never raised).
      step_sizes: the traced step-size hyperparameters its update reads (the axes of its
        tuning grid): ``learning_rate``, and ``eta`` for the NIGT updates.
      options: the family-specific ``hparams`` keys it reads (its engine's options, beyond
        the :data:`COMMON` ones every algorithm reads); a config that sets one that none of
        its algorithms reads is an error (:mod:`jaxnigt.config`).
      pads: its engine reads the number of workers and its sizes from the run, so runs of
        several n or M share one padded program (:mod:`jaxnigt.run.padded`); a round
        method's is its rule's (:func:`jaxnigt.cluster.rules.register_rule`).
      rule: a round method's registered round rule (None: not a round method).
    """

    cluster_options: tuple[str, ...] = ()
    tuned_shapes: tuple[str, ...] = ()
    overflow: str | None = None
    step_sizes: tuple[str, ...] = ("learning_rate",)
    options: tuple[str, ...] = ()
    pads: bool = False
    rule: str | None = None

    def using(self, update: Any) -> Traits:
        """These traits with the step sizes of ``update`` (an
        :class:`~jaxnigt.algorithms.updates.Update`)."""
        return self._replace(step_sizes=update.step_sizes)

    def reading(self, *keys: str) -> Traits:
        """These traits reading the ``hparams`` keys ``keys`` too."""
        return self._replace(options=(*self.options, *(k for k in keys if k not in self.options)))


#: The ``hparams`` keys every algorithm reads (the step sizes, the collection size, γ); the
#: other keys belong to one engine or family (:attr:`Traits.options`).
COMMON = ("learning_rate", "eta", "M", "M_init", "gamma")


class Algorithm(NamedTuple):
    """The pure functions of one algorithm's run (unbatched; vmap them over seeds and grids).

    Attributes:
      init: ``(key, hyper) -> TrainState`` at x_0, simulated time 0 (no rollouts).
      step: ``(state, budget) -> (state, StepMetrics)``: one round (or block of arrivals).
        ``budget`` is the simulated-time budget: a step that starts before it is applied
        whole, except that an asynchronous block stops at its first arrival past it.
      eval_params: ``state -> params`` to evaluate and deploy (NIGT: the iterate x_t).
      first_step: round 0 with ``M_init`` gradients when ``M_init != M`` (a second compiled
        shape); None when round 0 is an ordinary ``step``.
      simulate_clock: ``(key, steps) -> (trajectories [steps], end_time [steps])``: the
        algorithm's clock alone, no rollouts (``steps`` static): how many trajectories each
        step rolls out and when it ends, from time 0 (the planner uses it).
      trajectories_per_update: ``None`` when a step is one update (a round); otherwise the
        trajectories one server update takes (1: an update per arrival; IMPALA: its learner
        batch), so that updates = trajectories / this; 0 when no fixed share of them is
        (Ringleader: n updates a cycle, whatever the exchanges; the planner shows none).
      traits: its :class:`Traits`.
      events_per_step: the exchanges a step's clock processes one after another, each
        looking at every worker (so a step costs about this × n operations: the event
        engines); None when a step's clock is vectorised over the workers (the rounds).
      round_schedule: a round method's ``(state, first) -> (schedule, round key, size)``:
        the round the next step takes from ``state`` (``first``: round 0 of ``M_init``),
        without its rollouts, for a picture of a run's rounds (:mod:`jaxnigt.run.timeline`).
    """

    init: Callable[[jax.Array, TracedHParams], TrainState]
    step: Callable[[TrainState, jax.Array], tuple[TrainState, StepMetrics]]
    eval_params: Callable[[TrainState], Any]
    first_step: Callable[[TrainState, jax.Array], tuple[TrainState, StepMetrics]] | None = None
    simulate_clock: Callable[[jax.Array, int], tuple[jax.Array, jax.Array]] | None = None
    trajectories_per_update: int | None = None
    traits: Traits = Traits()
    events_per_step: int | None = None
    round_schedule: Callable[[TrainState, bool], Any] | None = None


AlgorithmFactory = Callable[[Setup, Any], Algorithm]


# ------------------------------------------------------------------------------ helpers


def run_cluster(setup: Setup, key: jax.Array) -> ClusterModel:
    """One run's cluster record, what it draws per run (outages) drawn once from ``key``
    (:func:`jaxnigt.cluster.model.realize`); :func:`initial_state` keeps it in the state."""
    return cluster_model.realize(setup.cluster, key)[0]


def cluster_of(setup: Setup, state: TrainState) -> ClusterModel:
    """The cluster record a step of ``state``'s run simulates (:func:`run_cluster`'s)."""
    return cluster_model.with_trace(setup.cluster, state.drawn)


def initial_state(
    setup: Setup,
    params: Any,
    opt_state: Any,
    key: jax.Array,
    hyper: TracedHParams,
    extra=(),
    cluster: ClusterModel | None = None,
) -> TrainState:
    """A run's state at simulated time 0: no steps, zero counters, idle workers.

    Args:
      setup: the run's setup (its number of workers).
      params: the held params.
      opt_state: the optimizer's state.
      key: the state's key.
      hyper: the traced hyperparameters (a padded run's sizes among them go to the state's
        ``sizes``, :func:`split_sizes`).
      extra: the engine's state.
      cluster: the run's cluster record (:func:`run_cluster`; None: the setup's, nothing
        drawn per run).

    Returns:
      The :class:`TrainState`.
    """
    zero = jnp.zeros([], jnp.float32)
    hyper, sizes = split_sizes(hyper)
    return TrainState(
        params=params,
        opt_state=opt_state,
        key=key,
        steps=jnp.int32(0),
        counters=Counters(zero, zero, zero, zero, zero),
        busy_until=jnp.zeros((setup.n,), jnp.float32),
        hyper=hyper,
        extra=extra,
        sizes=sizes,
        drawn=None if cluster is None else cluster_model.run_draws(setup.cluster, cluster),
    )


def split_sizes(hyper: TracedHParams) -> tuple[TracedHParams, dict[str, jax.Array] | None]:
    """``(hyperparameters, sizes)``: a padded program's run sizes taken out of the traced
    values it is given (None when there are none: an ordinary program).

    Args:
      hyper: the traced values a run starts from.

    Returns:
      The hyperparameters alone, and the run's sizes or None.
    """
    from jaxnigt.algorithms import sizes as sizes_lib

    names = (*sizes_lib.SIZES, *sizes_lib.THRESHOLD_KEYS)
    found = {k: v for k, v in hyper.items() if k in names}
    return {k: v for k, v in hyper.items() if k not in names}, found or None


def advance(
    counters: Counters,
    *,
    time: jax.Array,
    env_steps: jax.Array,
    comms: jax.Array,
    env_steps_wasted: jax.Array = 0.0,
    worker_time: jax.Array = 0.0,
) -> Counters:
    """The counters after a step that ends at ``time`` and used the given amounts
    (``worker_time``: the total worker time's growth from the step's start to ``time``)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    return Counters(
        time=f32(time),
        env_steps=counters.env_steps + f32(env_steps),
        env_steps_wasted=counters.env_steps_wasted + f32(env_steps_wasted),
        comms=counters.comms + f32(comms),
        worker_time=counters.worker_time + f32(worker_time),
    )


def step_metrics(
    state: TrainState,
    *,
    round_time: jax.Array,
    grads: jax.Array,
    train_return: jax.Array,
    counts: jax.Array,
    finite: jax.Array,
    active: jax.Array | None = None,
    staleness: tuple[jax.Array, jax.Array, jax.Array] | None = None,
    link_util: jax.Array | None = None,
    messages: jax.typing.ArrayLike = 0.0,
    overflow: jax.Array = False,
) -> StepMetrics:
    """:class:`StepMetrics` of a step that produced ``state`` (its counters and step count).

    ``counts`` ``[n]`` are the step's gradients per worker (``active``: of a padded record's
    own workers); ``staleness`` is ``(min, mean, max)``; absent values are NaN; ``messages``
    is the run's count of small exchanges so far."""
    nan = jnp.full([], jnp.nan, jnp.float32)
    staleness = staleness if staleness is not None else (nan, nan, nan)
    counts = counts.astype(jnp.float32)
    c = state.counters
    lo, mean, hi = padding.worker_stats(counts, active)
    return StepMetrics(
        round=state.steps,
        sim_time=c.time,
        env_steps=c.env_steps,
        env_steps_wasted=c.env_steps_wasted,
        comms=c.comms,
        grads=jnp.asarray(grads, jnp.float32),
        round_time=jnp.asarray(round_time, jnp.float32),
        train_return=train_return,
        counts_min=lo,
        counts_mean=mean,
        counts_max=hi,
        staleness_min=staleness[0],
        staleness_mean=staleness[1],
        staleness_max=staleness[2],
        link_util=nan if link_util is None else link_util,
        messages=jnp.asarray(messages, jnp.float32),
        worker_time=c.worker_time,
        overflow=jnp.asarray(overflow, bool),
        nonfinite=~(finite & jnp.isfinite(train_return)),
        worker_counts=counts,
    )


def all_finite(tree: Any) -> jax.Array:
    """Whether every leaf of ``tree`` is finite (a scalar bool)."""
    leaves = jax.tree.leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def negate(tree: Any) -> Any:
    return jax.tree.map(jnp.negative, tree)


def descend(opt: optax.GradientTransformation, grads: Any, opt_state: Any, params: Any):
    """``(params, opt_state)`` after one optimizer step on the ascent direction ``grads``
    (the optimizer descends, so it receives ``−grads``)."""
    updates, opt_state = opt.update(negate(grads), opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def select(flag: jax.Array, new: Any, old: Any) -> Any:
    """``new`` where the scalar ``flag`` holds, else ``old`` (pytrees of the same structure);
    a :class:`TrainState`'s ``drawn`` (its run's cluster draws, fixed for the run) is
    ``old``'s."""

    def pick(a, b):
        if isinstance(a, TrainState):
            return TrainState(*pick(tuple(a[:-1]), tuple(b[:-1])), drawn=b.drawn)
        return jax.tree.map(lambda x, y: jnp.where(flag, x, y), a, b)

    return jax.tree.map(pick, new, old, is_leaf=lambda x: isinstance(x, TrainState))


def push_newest(stack: Any, x: Any) -> Any:
    """``x`` put at the front of the newest-first ``stack`` (a pytree of ``[R, ...]``
    arrays), the oldest entry dropped: a learner's kept versions and their done times."""
    return jax.tree.map(lambda h, v: jnp.concatenate([jnp.asarray(v)[None], h[:-1]]), stack, x)


def stack_workers(tree: Any, n: int) -> Any:
    """``tree`` repeated along a new leading worker axis ``[n, ...]``."""
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (n, *p.shape)), tree)


def mean_return(sum_return: jax.Array, count: jax.Array) -> jax.Array:
    """Mean return from summed statistics (``count`` clipped at 1)."""
    return sum_return / jnp.maximum(count, 1.0)
