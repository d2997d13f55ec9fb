"""The paper's experiments at CPU scale and on a GPU node, and docs/results.md.

* :mod:`paper.claims`: the registry of the paper's claims: each one's name, reference,
  baselines, statistic, methods, cluster settings and rows of the opening table, declared
  once; the lead-growth claim.
* :mod:`paper.scenarios`: one ``Scenario`` type (a cluster setting of a claim on an
  environment), the base config, the cluster overlays and the cluster models.
* :mod:`paper.third`: the third edition's protocol (a first look sizes the budget), which
  tunes every scenario the later editions run.
* :mod:`paper.third_scenarios`: the scenarios of the third and later editions, their grids
  and looks.
* :mod:`paper.sizing`: how that look sizes a scenario's budget and evaluation cadence.
* :mod:`paper.fourth`: the fourth edition (report seeds added in blocks until each claim is
  decided); :mod:`paper.outages`: its outage rows' scenarios and traces.
* :mod:`paper.fifth`: the fifth edition (the fourth's comparisons decided by exact tests).
* :mod:`paper.store`: where the results store is and how the editions lay it out (what a
  store keeps, so that a fresh clone resumes instead of rerunning: :mod:`jaxnigt.studies.store`).
* :mod:`paper.gpu`: the Humanoid scenarios on one GPU within a time limit.
* :mod:`paper.page`: the page, filled from the analysis JSON (:mod:`paper.fourth_page`,
  :mod:`paper.fifth_page`); the earlier editions' pages are frozen text.
* :mod:`paper.cli`: ``python scripts/paper COMMAND``.

Every statistic, interval and verdict is the library's (:mod:`jaxnigt.analysis`); tuning is
:mod:`jaxnigt.studies.tuning`.  What lives here is what the paper's experiments are: which
scenarios, which claims, which editions, and the page.  The second edition's pipeline and
the AdaStop cross-check ran to their end and are in the git history; their outputs are kept
(docs/results/second_edition.md, scripts/paper/configs, docs/results/fourth/adastop.*).
"""
