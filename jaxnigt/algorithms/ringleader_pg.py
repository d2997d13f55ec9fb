"""Ringleader policy gradient: Ringleader ASGD (Maranjyan & Richtárik, ICLR 2026) on the
policy gradient, the paper's method whole: its cycles and gradient table on the event engine
(:mod:`jaxnigt.algorithms.ringleader_nigt`) with the paper's plain step θ += α g along the
table's mean, n updates per cycle."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.ringleader_nigt import factory

TRAITS, make = factory(updates.SGD)
