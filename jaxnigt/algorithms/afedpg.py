"""AFedPG (greedy asynchronous policy gradient), as reconstructed in docs/algorithms.md.

Each worker, dispatched at server version k, samples one trajectory at the lookahead point
ỹ = θ_k + ((1−η)/η)(θ_k − θ_{k−1}) and sends its gradient back after τ + its exchange on the
server link; on every arrival the server sets d ← (1−η) d + η g and θ ← θ + α d/‖d‖. That is
exactly the NIGT recurrence applied per arrival, with the held params being the lookahead
point, so the server update *is* :func:`jaxnigt.nigt`. The AFedPG paper's delay-adaptive
weights are not public; this reconstruction (no delay adaptation; one communication per
gradient) is the project's.
"""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import async_engine

TRAITS = async_engine.TRAITS.using(updates.NIGT)
make = async_engine.factory(update=updates.NIGT)
