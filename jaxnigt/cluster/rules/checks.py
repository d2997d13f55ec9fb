"""A rule's padded rounds held to its unpadded rounds (:func:`check_padding`).

A padded program runs several runs of different sizes in one program; a rule that says it
pads (:func:`~jaxnigt.cluster.rules.registry.register_rule`, ``pads=True``) must give each run
the rounds it would have alone.  The round engine calls :func:`check_padding` before it first
uses a rule that is not the library's own.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.cluster import padding
from jaxnigt.cluster.model import make_cluster_model
from jaxnigt.cluster.rounds import RoundSize, run_rounds
from jaxnigt.cluster.rules.malenia import malenia_threshold
from jaxnigt.cluster.rules.registry import get_rule

__all__ = ["check_padding"]


@functools.cache
def check_padding(name: str) -> None:
    """Holds a registered rule's padded rounds to its unpadded ones on a small cluster.

    Three rounds of ``name`` on 3 workers (h = 1, 2, 3, exponential noise, M = 3) are run
    as they are and padded to 5 rows: the round ends, the gradients each of the 3 workers
    delivers and their slots must agree.  A rule that counts ``model.n`` where it means
    the run's workers (:func:`~jaxnigt.cluster.rounds.worker_count`) fails here, not silently
    in a sweep.

    Args:
      name: a registered rule's name.

    Raises:
      ValueError: the padded rounds differ (the message says which field), or the rule
        was registered without ``pads``.
    """
    rule = get_rule(name)
    if not rule.pads:
        raise ValueError(f"rule {name!r} was registered without pads=True: it runs unpadded")
    model = make_cluster_model(3, h=(1.0, 2.0, 3.0), noise="exponential")
    size = RoundSize(M=3, capacity=18, per_worker=1, m=2)
    # what a padded program gives every rule: the run's sizes as values (round_engine)
    run = {"M": 3, "capacity": 18, "m": 2, "threshold": malenia_threshold(3, 3)}
    run = {k: jnp.asarray(v) for k, v in run.items()}
    key = jax.random.key(0)
    fn = lambda sz: lambda m, k, t, b: rule.round(m, k, t, b, sz)
    plain = run_rounds(fn(size), model, key, 3)
    padded = run_rounds(fn(size._replace(run=run)), padding.pad(model, 5), key, 3)
    for field, a, b in (
        ("t_end", plain.t_end, padded.t_end),
        ("counts", plain.counts, padded.counts[:, :3]),
        ("num_slots", plain.num_slots, padded.num_slots),
    ):
        if not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5):
            raise ValueError(
                f"rule {name!r} pads wrongly: its {field} on 3 workers padded to 5 rows "
                f"({np.asarray(b).tolist()}) differs from 3 workers ({np.asarray(a).tolist()}); "
                "count the run's workers with rules.worker_count(model), not model.n, "
                "and read sizes with size.value(...)"
            )
