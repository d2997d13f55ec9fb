"""The engines the algorithms are composed from: each runs one kind of step on the
simulated cluster, and an algorithm is its engine plus a schedule or event rule, aggregator
weights, an estimator and an optax update.  Every engine reads the cluster model from its
setup (``Setup.cluster``, a :class:`~jaxnigt.cluster.model.ClusterModel`) and passes it whole
to the schedules and clocks of :mod:`jaxnigt.cluster`.

* :mod:`~jaxnigt.algorithms.engines.round_engine`: the AllReduce rounds (Rennala, Malenia,
  synchronous and m-synchronous collections).
* :mod:`~jaxnigt.algorithms.engines.async_engine`: one server update per arrival (AFedPG,
  asynchronous SGD, Ringmaster, A3C), in waves of ready arrivals
  (:mod:`~jaxnigt.algorithms.engines.waves`: their capacity).
* :mod:`~jaxnigt.algorithms.engines.impala_engine`: actors and a batching learner (IMPALA).
* :mod:`~jaxnigt.algorithms.engines.seed_engine`: central inference, one exchange per
  environment step (SEED RL).
"""
