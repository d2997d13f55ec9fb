"""A3C-style asynchronous SGD: on every arrival the server applies θ += α g with the stale
gradient g that the worker computed at the point it was dispatched with."""

from jaxnigt.algorithms import updates
from jaxnigt.algorithms.engines import async_engine

TRAITS = async_engine.TRAITS
make = async_engine.factory(update=updates.SGD)
