"""Analysis of finished runs: statistics of curves, comparisons with intervals, verdicts.

* :mod:`~jaxnigt.analysis.stats`: the per-seed statistics of evaluation curves (average
  return, second half, time to a target) and the target rule: one definition of each.
* :mod:`~jaxnigt.analysis.run_data`: a run directory read back as methods and seeds.
* :mod:`~jaxnigt.analysis.verdicts`: bootstrap intervals, the outcome of one comparison and
  the verdict of a claim.
* :mod:`~jaxnigt.analysis.comparison`: a reference against every baseline of a run (what
  ``jaxnigt compare`` prints); its names are this package's too (``analysis.compare``,
  ``analysis.load_run``, ``analysis.STATISTICS``, ...), loaded on first use, so importing
  one submodule (``jaxnigt.analysis.stats``) loads nothing else.
* :mod:`~jaxnigt.analysis.sequential`: deciding a comparison by adding seeds in stages
  (``jaxnigt compare --sequential``).
* :mod:`~jaxnigt.analysis.error_rate`: that rule's error rate and power, by simulation and on
  nulls split from real per-seed values.
* :mod:`~jaxnigt.analysis.report_text`: the Markdown of a comparison.

The training loop reads none of this: it writes the files (:mod:`jaxnigt.run.metrics`)
that this package reads.
"""

import importlib

_SUBMODULES = (
    "comparison",
    "error_rate",
    "report_text",
    "run_data",
    "sequential",
    "stats",
    "verdicts",
)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"jaxnigt.analysis.{name}")
    comparison = importlib.import_module("jaxnigt.analysis.comparison")
    if hasattr(comparison, name):
        return getattr(comparison, name)
    raise AttributeError(f"module 'jaxnigt.analysis' has no attribute {name!r}")
