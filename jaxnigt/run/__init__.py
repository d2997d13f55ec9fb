"""Running experiments: from a config to a run directory, three levels apart.

* :mod:`~jaxnigt.run.trainer`: the pure functions of one algorithm's run (``init``, a chunk
  of steps, the evaluation), unbatched: seeds and grids are a ``vmap`` away.
* :mod:`~jaxnigt.run.loop`: one algorithm's seeds and grid points as one vmapped program on
  the host: chunks, evaluations, health checks, checkpoints, the progress bar.
* :mod:`~jaxnigt.run.experiment`: every algorithm of a config into a run directory.
* :mod:`~jaxnigt.run.padded`: one algorithm's runs of several configs that differ in n and
  the run sizes as one padded program, cut back into each config's results.

Around them: the program's batch (:mod:`~jaxnigt.run.batch`), the run directory and its
atomic writes (:mod:`~jaxnigt.run.run_dir`), checkpoints (:mod:`~jaxnigt.run.checkpoint`),
signals (:mod:`~jaxnigt.run.signals`), the metrics files and the summary
(:mod:`~jaxnigt.run.metrics`) and their figures (:mod:`~jaxnigt.run.plots`), devices and
hosts (:mod:`~jaxnigt.run.devices`, :mod:`~jaxnigt.run.distributed`), independent jobs in
child processes (:mod:`~jaxnigt.run.processes`), and what a run will cost before it runs
(:mod:`~jaxnigt.run.plan`, :mod:`~jaxnigt.run.sizing`).
"""
