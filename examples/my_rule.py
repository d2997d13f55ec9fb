"""A round rule of one's own, as a plugin: Rennala, but the round also ends once half of the
workers have delivered a gradient.

Load it with ``jaxnigt --plugin examples/my_rule.py ...`` (or ``plugins: [examples/my_rule.py]``
in a config); then ``--rule half`` in ``jaxnigt clock`` and the algorithm ``half_nigt`` in a
config's ``algorithms`` work like the library's own, padded sweeps and power traces included.
"""

import jax.numpy as jnp

from jaxnigt import algorithms
from jaxnigt.algorithms import updates
from jaxnigt.cluster import aggregators, rules


@rules.register_rule("half", pads=True)
def half(model, key, t0, busy_until, size):
    """Rennala's first M gradients, or fewer once half of the workers have delivered."""
    # [n, M + 1] compute times; the extra column is each worker's gradient in flight at the end
    tau = rules.draw_times(model, key, size)

    def stop(done):  # done[i, k]: when worker i finishes its (k+1)-th gradient of the round
        m_th = rules.kth_smallest(done, size.value("M"))  # Rennala: the M-th gradient overall
        half_of = (rules.worker_count(model) + 1) // 2  # the run's workers, never model.n
        return jnp.minimum(m_th, rules.kth_smallest(done[:, 0], half_of))

    return rules.collect_until(model, tau, t0, busy_until, stop, slots=size.M)


# Rennala NIGT's parts on the new rule: the delivered gradients averaged, a NIGT step.
algorithms.register_round_algorithm(
    "half_nigt", rule="half", weights=aggregators.rennala_weights, update=updates.NIGT
)
