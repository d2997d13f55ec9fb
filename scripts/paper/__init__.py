"""The paper's experiments at CPU scale and on a GPU node, and docs/results.md.

* :mod:`paper.claims`: the registry of the paper's claims: each one's name, reference,
  baselines, statistic, methods, cluster settings and rows of the opening table, declared
  once; the lead-growth claim; the second edition's verdicts.
* :mod:`paper.scenarios`: one ``Scenario`` type (a cluster setting of a claim on an
  environment), the base config, the cluster overlays and the cluster models.
* :mod:`paper.second`: the second edition (families tuned at a fixed budget);
  :mod:`paper.second_analysis`: its analysis.
* :mod:`paper.third`: the third edition (the paper's protocol; a first look sizes the budget).
* :mod:`paper.third_scenarios`: the scenarios of the third and fourth editions, their grids
  and looks.
* :mod:`paper.sizing`: how that look sizes a scenario's budget and evaluation cadence.
* :mod:`paper.fourth`: the fourth edition (report seeds added in blocks until each claim is
  decided).
* :mod:`paper.store`: the results store: finished seed blocks and tuning programs, packed in
  the repository so that a fresh clone resumes instead of rerunning.
* :mod:`paper.gpu`: the Humanoid scenarios on one GPU within a time limit.
* :mod:`paper.page`: the page, filled from the analysis JSON of every edition.
* :mod:`paper.cli`: ``python scripts/paper COMMAND``.

Every statistic, interval and verdict is the library's (:mod:`jaxnigt.analysis`); tuning is
:mod:`jaxnigt.studies.tuning`.  What lives here is what the paper's experiments are: which
scenarios, which claims, which editions, and the page.
"""
