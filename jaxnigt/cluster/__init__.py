"""The simulated cluster: when each worker's gradient is done and what a round or an arrival
collects (core dependencies only: jax, numpy).

* :mod:`~jaxnigt.cluster.model`: the cluster model as one value, a
  :class:`~jaxnigt.cluster.model.ClusterModel` record (per-worker arrays and the named
  choices), built once and passed whole to everything below; the draws of compute times.
* :mod:`~jaxnigt.cluster.timing`: the time model's specs (compute-time profiles h_i, noise
  kinds, communication-time profiles κ_i).
* :mod:`~jaxnigt.cluster.rules`: the round rules by name, an open registry (a rule of one's
  own is one registered function), each of the library's in one module with its draws and
  weights (``rules.rennala``, ``rules.malenia``, ``rules.sync``, ``rules.msync``);
  :mod:`~jaxnigt.cluster.rounds` a round's sizes, its record and the end-of-round conventions
  every rule shares (start, end, AllReduce, in-flight work);
  :mod:`~jaxnigt.cluster.schedules` the library's rules at static sizes.
* :mod:`~jaxnigt.cluster.aggregators`: the weights a round's gradients are averaged with;
  :mod:`~jaxnigt.cluster.reductions`: the same averages as pure reductions of per-worker
  gradient sums and counts (for a loop of your own).
* :mod:`~jaxnigt.cluster.events`: the per-arrival clock of the asynchronous methods (the
  server link, bounded delays); :mod:`~jaxnigt.cluster.step_clock`: central inference's
  per-step clock.
* :mod:`~jaxnigt.cluster.padding`: records padded to more workers than a run has (sizes as
  values of the run), stacked so that runs of different n share one program.
* :mod:`~jaxnigt.cluster.simulation`: the clock alone over many rounds or arrivals (what
  ``jaxnigt clock`` runs); :mod:`~jaxnigt.cluster.theory`: closed-form values to check it by.

**The public names** (``__all__``), to use the cluster from code of your own as one uses
rlax or optax (``examples/rennala_nigt_minimal.py`` runs Rennala NIGT with them); each is
documented in its module (docs/api.md):

* the cluster: ``make_cluster`` (:func:`~jaxnigt.cluster.model.make_cluster_model`, also
  under that name), :class:`~jaxnigt.cluster.model.ClusterModel`,
  :func:`~jaxnigt.cluster.model.sample_compute_times` and
  :func:`~jaxnigt.cluster.model.realize` (a model's outages drawn for one run);
* the round rules (``ROUND_RULES``): :func:`~jaxnigt.cluster.schedules.rennala`,
  :func:`~jaxnigt.cluster.schedules.malenia`, :func:`~jaxnigt.cluster.schedules.sync` and
  :func:`~jaxnigt.cluster.schedules.msync` draw a round's compute times and return its
  :class:`~jaxnigt.cluster.schedules.RoundSchedule`; the same rules on given times,
  :func:`~jaxnigt.cluster.schedules.rennala_from_times`,
  :func:`~jaxnigt.cluster.schedules.malenia_from_times`,
  :func:`~jaxnigt.cluster.schedules.sync_from_times` and
  :func:`~jaxnigt.cluster.schedules.msync_from_times`; Rennala's two halves,
  :func:`~jaxnigt.cluster.schedules.sample_rennala_times` (the draws) and
  :func:`~jaxnigt.cluster.schedules.rennala_round` (which gradients land); the
  synchronous batch :func:`~jaxnigt.cluster.schedules.sync_batch`;
* a rule of one's own (:mod:`~jaxnigt.cluster.rules`):
  :func:`~jaxnigt.cluster.rules.register_rule`, :func:`~jaxnigt.cluster.rules.rule_names`,
  :class:`~jaxnigt.cluster.rules.RoundSize` and the module's building blocks
  (``draw_times``, ``collect_until``, ``kth_smallest``, ``worker_count``);
* rounds of a rule from time 0: :func:`~jaxnigt.cluster.schedules.run_rounds` (a rule as a
  function), :func:`~jaxnigt.cluster.schedules.round_clock` (its trajectories and end times)
  and :func:`~jaxnigt.cluster.simulation.simulate_rule_rounds` (a rule by name, jitted,
  per-round arrays);
* the aggregation: slot weights (:func:`~jaxnigt.cluster.aggregators.rennala_weights`,
  :func:`~jaxnigt.cluster.aggregators.malenia_weights`,
  :func:`~jaxnigt.cluster.aggregators.sync_weights`,
  :func:`~jaxnigt.cluster.aggregators.mean_weights`,
  :func:`~jaxnigt.cluster.aggregators.per_worker_mean_weights`) and per-worker reductions
  (:func:`~jaxnigt.cluster.reductions.worker_sums`,
  :func:`~jaxnigt.cluster.reductions.rennala_reduce`,
  :func:`~jaxnigt.cluster.reductions.malenia_reduce`).

The modules stay importable as before.
"""

from jaxnigt.cluster.aggregators import (
    malenia_weights,
    mean_weights,
    per_worker_mean_weights,
    rennala_weights,
    sync_weights,
)
from jaxnigt.cluster.model import (
    ClusterModel,
    make_cluster_model,
    realize,
    sample_compute_times,
)
from jaxnigt.cluster.reductions import malenia_reduce, rennala_reduce, worker_sums
from jaxnigt.cluster.rules import RoundSize, register_rule, rule_names
from jaxnigt.cluster.schedules import (
    RoundSchedule,
    malenia,
    malenia_from_times,
    msync,
    msync_from_times,
    rennala,
    rennala_from_times,
    rennala_round,
    round_clock,
    run_rounds,
    sample_rennala_times,
    sync,
    sync_batch,
    sync_from_times,
)
from jaxnigt.cluster.simulation import ROUND_RULES, simulate_rule_rounds

#: The public name of the cluster constructor (:func:`jaxnigt.cluster.model.make_cluster_model`).
make_cluster = make_cluster_model

__all__ = [
    "ROUND_RULES",
    "ClusterModel",
    "RoundSchedule",
    "RoundSize",
    "make_cluster",
    "make_cluster_model",
    "malenia",
    "malenia_from_times",
    "malenia_reduce",
    "malenia_weights",
    "mean_weights",
    "msync",
    "msync_from_times",
    "per_worker_mean_weights",
    "realize",
    "register_rule",
    "rennala",
    "rennala_from_times",
    "rennala_reduce",
    "rennala_round",
    "rennala_weights",
    "round_clock",
    "rule_names",
    "run_rounds",
    "sample_compute_times",
    "sample_rennala_times",
    "simulate_rule_rounds",
    "sync",
    "sync_batch",
    "sync_from_times",
    "sync_weights",
    "worker_sums",
]
