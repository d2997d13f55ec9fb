"""Studies of many runs: a sweep over config values (:mod:`~jaxnigt.studies.sweep`, its
points grouped into padded programs by :mod:`~jaxnigt.studies.sweep_programs`), the tuning
of step sizes and shapes on held-out seeds (:mod:`~jaxnigt.studies.tuning`) and a results
store that keeps a study's programs in the repository, so that a fresh clone resumes it
(:mod:`~jaxnigt.studies.store`)."""
