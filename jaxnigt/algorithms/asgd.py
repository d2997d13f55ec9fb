"""A3C-style asynchronous SGD: on every arrival the server applies θ += α g with the stale
gradient g that the worker computed at the point it was dispatched with."""

from jaxnigt.algorithms import async_engine, core

TRAITS = async_engine.TRAITS
make = async_engine.factory(update=core.SGD)
