"""Ringleader's rounds with a plain step: every worker delivers at least once, the mean over
workers of each worker's mean (:mod:`jaxnigt.algorithms.ringleader_round_nigt`), θ += α g,
one update per round where the paper makes one per worker (the paper's method:
:mod:`jaxnigt.algorithms.ringleader_pg`)."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.ringleader_round_nigt import factory

TRAITS, make = factory(updates.SGD)
