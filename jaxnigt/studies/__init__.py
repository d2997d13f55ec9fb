"""Studies of many runs: a sweep over config values (:mod:`~jaxnigt.studies.sweep`) and the
tuning of step sizes and shapes on held-out seeds (:mod:`~jaxnigt.studies.tuning`)."""
