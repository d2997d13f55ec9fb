"""MindFlayer policy gradient: MindFlayer's rounds (B_i attempts per worker, each abandoned
past its time limit t_i; :mod:`jaxnigt.algorithms.mindflayer_nigt`) with a plain step
θ += α g on the mean of the successful gradients: MindFlayer SGD (Maranjyan, Shaikh Omar &
Richtárik, UAI 2025) on the policy gradient."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.mindflayer_nigt import factory

TRAITS, make = factory(updates.SGD)
