"""Multi-process runs on JAX's own distributed runtime (one process per host).

``jaxnigt run ... --coordinator HOST:PORT --num-processes N --process-id I`` calls
:func:`initialize` before anything touches a device; afterwards ``jax.devices()`` lists every
process's devices, the runner's mesh spans them all, and results computed on other hosts are
gathered with :func:`to_host`. On CPU the cross-process collectives use gloo. Only process 0
writes the run directory (:func:`is_writer`).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def coordinator_problem(address: str) -> str | None:
    """What is wrong with a coordinator address (None if it is ``HOST:PORT``: a host name or
    address, IPv6 in brackets, and a port 1 to 65535); JAX itself fails on a malformed one
    deep inside ``jax.distributed`` with an IndexError."""
    expected = "expected HOST:PORT, e.g. 10.0.0.1:12345"
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port:
        return f"got {address!r}; {expected}"
    bracketed = host.startswith("[") and host.endswith("]")
    if (":" in host or "[" in host or "]" in host) and not bracketed:
        return f"got {address!r}; {expected} (an IPv6 host in brackets: [::1]:12345)"
    if host.strip("[]") == "" or any(c.isspace() for c in host):
        return f"got {address!r}; {expected}"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"got {address!r}; the port {port!r} is not an integer from 1 to 65535"
    return None


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Starts ``jax.distributed`` (arguments default to what JAX reads from the environment,
    e.g. SLURM or ``JAX_COORDINATOR_ADDRESS``/``JAX_NUM_PROCESSES``/``JAX_PROCESS_ID``).

    Raises:
      ValueError: ``coordinator`` is not ``HOST:PORT`` (:func:`coordinator_problem`).
    """
    if coordinator is not None and (problem := coordinator_problem(coordinator)):
        raise ValueError(f"coordinator: {problem}")
    # Must run before any backend starts; only the CPU client reads it (GPUs use NCCL).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
    )


def is_writer() -> bool:
    """True on the process that writes files (process 0)."""
    return jax.process_index() == 0


def to_host(tree: Any) -> Any:
    """Numpy copies of every leaf, gathering arrays that live partly on other processes."""
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    from jax.experimental import multihost_utils

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(x)

    return jax.tree.map(one, tree)
