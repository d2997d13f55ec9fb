"""Splitting a round's trajectory slots across devices: the mesh axis and its constraint.

A round's rollouts (:mod:`jaxnigt.rl.collect`) are a batch along the slot axis; on a device
mesh (built by :mod:`jaxnigt.run.devices`, along :data:`AXIS`) each rollout batch is split
across the devices and XLA turns the weighted gradient sum over slots into an all-reduce.
The axis name lives here, below the runner, so that the rollouts and the runner's meshes
share one definition.
"""

from __future__ import annotations

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

#: The name of the one axis of every mesh of the package.
AXIS = "shard"


def constrain_slots(x: jax.Array, mesh: Mesh | None) -> jax.Array:
    """Asks XLA to split a slot-axis array (leading axis) across the mesh.

    Inside ``vmap`` the constraint applies to the unbatched axes, so the batch axis stays
    replicated.

    Args:
      x: an array whose leading axis is the slot axis.
      mesh: a 1-D mesh along :data:`AXIS`, or None (one device).

    Returns:
      ``x`` under a sharding constraint along :data:`AXIS`; ``x`` itself without a mesh, on a
      one-device mesh, or when its leading axis does not divide the mesh (left to XLA).
    """
    if mesh is None or mesh.size == 1 or x.shape[0] % mesh.size:
        return x
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec(AXIS)))
