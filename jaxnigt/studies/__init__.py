"""Studies of many runs: a sweep over config values (:mod:`~jaxnigt.studies.sweep`, its
points grouped into padded programs by :mod:`~jaxnigt.studies.sweep_programs`) and the tuning
of step sizes and shapes on held-out seeds (:mod:`~jaxnigt.studies.tuning`)."""
