"""Closed-form times of the simulated cluster: what the clock should show with exact times.

Pure numpy, no simulation: :mod:`jaxnigt.cluster.simulation` measures the same quantities, and
``jaxnigt clock`` prints these next to the measured ones; :mod:`jaxnigt.run.plots` draws
Rennala's round time on the sweep plots.

* Rennala's collection time with deterministic compute times ``h`` (communication ignored):
  the first ``M`` completions of ``n`` workers restarting at once take

      t* = min_m (sum_{i <= m} 1 / h_(i))^{-1} (M + m),  h sorted ascending

  (the fastest ``m`` workers together complete ``sum 1/h_(i)`` gradients per unit time, and
  each of them may have one gradient unfinished).
* The asynchronous engine's arrival rate over a shared server link is at most
  ``1 / min_i kappa_i``: exchanges over that link are served one at a time.
"""

from __future__ import annotations

import math

import numpy as np


def rennala_theory_time(h: np.ndarray, M: int) -> float:
    """Deterministic Rennala collection-time bound ``min_m (sum_{i<=m} 1/h_(i))^{-1} (M + m)``."""
    hs = np.sort(np.asarray(h, np.float64))
    m = np.arange(1, hs.size + 1)
    return float(np.min((M + m) / np.cumsum(1.0 / hs)))


def shared_link_rate_bound(kappa: np.ndarray) -> float:
    """Most arrivals per unit time through one shared server link: ``1 / min_i kappa_i``
    (``inf`` when some exchange is free)."""
    kappa_min = float(np.min(np.asarray(kappa, np.float64)))
    return 1.0 / kappa_min if kappa_min > 0 else math.inf
