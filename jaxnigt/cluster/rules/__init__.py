"""Round rules by name: the open registry every round consumer reads, and the rules.

A round rule is one function ``rule(model, key, t0, busy_until, size) -> RoundSchedule``
registered by name (:mod:`~jaxnigt.cluster.rules.registry`, :func:`register_rule`); the
round engine, ``jaxnigt clock --rule``, the simulation and padded programs look it up there.
The library's own each read in one module, its draws, its rule and its weights together:

* :mod:`~jaxnigt.cluster.rules.rennala` -- the first M gradients in total;
* :mod:`~jaxnigt.cluster.rules.malenia` -- every worker delivers, until the harmonic mean of
  the counts reaches M / n;
* :mod:`~jaxnigt.cluster.rules.sync` -- every worker's b gradients;
* :mod:`~jaxnigt.cluster.rules.msync` -- one gradient per worker, the fastest m count;
* :mod:`~jaxnigt.cluster.rules.mindflayer` -- B_i attempts per worker, each abandoned past
  its time limit t_i; the successful ones count.
* :mod:`~jaxnigt.cluster.rules.ringleader` -- every worker delivers once (the paper's
  cycle, optionally), then one update on the mean of per-worker means.

A rule of one's own (docs/development.md, "Adding a round rule"; ``examples/my_rule.py``) is
written with :mod:`~jaxnigt.cluster.rules.blocks` (:func:`draw_times`,
:func:`collect_until`, :func:`kth_smallest`), reads its sizes from its :class:`RoundSize`
and the run's workers from :func:`worker_count` (the one seam through which a padded program
reaches a rule: :mod:`jaxnigt.cluster.rounds`), and is registered from the user's own file.
"""

from jaxnigt.cluster.rounds import RoundSize, worker_count
from jaxnigt.cluster.rules import (  # noqa: F401 (registers)
    malenia,
    mindflayer,
    msync,
    rennala,
    ringleader,
    sync,
)
from jaxnigt.cluster.rules.blocks import collect_until, draw_times, kth_smallest
from jaxnigt.cluster.rules.checks import check_padding
from jaxnigt.cluster.rules.registry import (
    RUN_SIZES,
    Rule,
    builtin,
    get_rule,
    register_rule,
    rule_names,
    run_values,
)

__all__ = [
    "RUN_SIZES",
    "RoundSize",
    "Rule",
    "builtin",
    "check_padding",
    "collect_until",
    "draw_times",
    "get_rule",
    "kth_smallest",
    "register_rule",
    "rule_names",
    "run_values",
    "worker_count",
]
