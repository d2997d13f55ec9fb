"""AFedPG without its lookahead: the ablation the AFedPG paper itself reports.

As :mod:`jaxnigt.algorithms.afedpg` (per-arrival updates d ← (1−η) d + η g,
θ ← θ + α d/‖d‖ on every arrival, one exchange per gradient on the server link), but each
worker's trajectory is rolled out at the server point θ_k it was dispatched with, not at the
lookahead point θ_k + ((1−η)/η)(θ_k − θ_{k−1}): normalized momentum at the iterate
(:func:`jaxnigt.scale_by_normalized_momentum`). With η = 1 it is asynchronous normalized SGD.
"""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import async_engine

TRAITS = async_engine.TRAITS.using(updates.NORMALIZED_MOMENTUM)
make = async_engine.factory(update=updates.NORMALIZED_MOMENTUM)
