"""The simulated cluster: when each worker's gradient is done and what a round or an arrival
collects (core dependencies only: jax, numpy).

* :mod:`~jaxnigt.cluster.model`: the cluster model as one value, a
  :class:`~jaxnigt.cluster.model.ClusterModel` record (per-worker arrays and the named
  choices), built once and passed whole to everything below; the draws of compute times.
* :mod:`~jaxnigt.cluster.timing`: the time model's specs (compute-time profiles h_i, noise
  kinds, communication-time profiles κ_i).
* :mod:`~jaxnigt.cluster.schedules`: one round of each collection rule (Rennala, Malenia,
  synchronous, m-synchronous) with its compute times drawn;
  :mod:`~jaxnigt.cluster.round_kernels` the same rules on given times, and
  :mod:`~jaxnigt.cluster.rounds` the round's record and the end-of-round conventions every
  rule shares (start, end, AllReduce, in-flight work).
* :mod:`~jaxnigt.cluster.aggregators`: the weights a round's gradients are averaged with.
* :mod:`~jaxnigt.cluster.events`: the per-arrival clock of the asynchronous methods (the
  server link, bounded delays); :mod:`~jaxnigt.cluster.step_clock`: central inference's
  per-step clock.
* :mod:`~jaxnigt.cluster.padding`: records padded to more workers than a run has (sizes as
  values of the run), stacked so that runs of different n share one program.
* :mod:`~jaxnigt.cluster.simulation`: the clock alone over many rounds or arrivals (what
  ``jaxnigt clock`` runs); :mod:`~jaxnigt.cluster.theory`: closed-form values to check it by.
"""
