"""A3C-style asynchronous SGD: on every arrival the server applies θ += α g with the stale
gradient g that the worker computed at the point it was dispatched with."""

from jaxnigt.algorithms.base import AsyncSpec, sgd_optimizer

SPEC = AsyncSpec(optimizer=sgd_optimizer)
