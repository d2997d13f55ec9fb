"""Ringleader policy gradient: Ringleader's rounds (every worker delivers at least once, the
mean over workers of each worker's mean; :mod:`jaxnigt.algorithms.ringleader_nigt`) with a
plain step θ += α g: Ringleader ASGD's estimator and step (Maranjyan & Richtárik, ICLR 2026)
on the policy gradient, one update per round where the paper makes one per worker."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.ringleader_nigt import factory

TRAITS, make = factory(updates.SGD)
