"""Sharding a run over devices: the batch (seed × grid) axis, or the trajectory-slot axis.

The simulated workers are an axis of arrays, so scaling out is a sharding decision, not a
different program. :func:`make_mesh` builds a 1-D mesh over local devices with the axis name
``"shard"``. The runner then either

* shards the **batch axis** (seeds × grid points) when it divides evenly — independent runs,
  no communication; or
* shards each round's **trajectory slots** (``Setup.mesh``): the rollout of a round is split
  across devices and the weighted gradient sum over slots becomes a cross-device all-reduce
  that XLA inserts (the rollouts constrain their slot axis to the mesh:
  :func:`jaxnigt.rl.sharding.constrain_slots`, along the axis :data:`AXIS` defined there).

Both give the same numbers as one device up to float reassociation of that sum.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxnigt.rl.sharding import AXIS


def make_mesh(devices: int | None = None) -> Mesh:
    """A 1-D mesh along :data:`AXIS` (``"shard"``) over the first ``devices`` devices.

    Args:
      devices: how many of the local devices, in order; None takes them all.

    Returns:
      The mesh.

    Raises:
      ValueError: ``devices`` is more than are available.
    """
    available = jax.devices()
    if devices is not None and devices > len(available):
        raise ValueError(f"devices: asked for {devices}, only {len(available)} available")
    return Mesh(np.asarray(available[: devices or len(available)]), (AXIS,))


def batch_sharding(mesh: Mesh | None, batch: int) -> NamedSharding | None:
    """Sharding of arrays with a leading batch axis.

    Args:
      mesh: the mesh, or None (one device).
      batch: the size of the batch axis.

    Returns:
      The sharding along :data:`AXIS`, or None without a mesh, on a one-device mesh or when
      ``batch`` does not divide evenly across it.
    """
    if mesh is None or mesh.size == 1 or batch % mesh.size:
        return None
    return NamedSharding(mesh, PartitionSpec(AXIS))


def shard_batch(tree, mesh: Mesh | None, batch: int):
    """Places every leaf's leading (batch) axis across the mesh.

    Args:
      tree: a pytree of arrays (keys included) with a leading batch axis of size ``batch``.
      mesh: the mesh, or None (one device).
      batch: the size of the batch axis.

    Returns:
      The tree with every leaf sharded as :func:`batch_sharding` says; ``tree`` itself when
      that is None.
    """
    sharding = batch_sharding(mesh, batch)
    if sharding is None:
        return tree
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    # Several processes: every process holds the same full array; each contributes the
    # shards of its own devices. Keys travel as raw key data and are re-wrapped.
    def global_array(x):
        is_key = jax.numpy.issubdtype(x.dtype, jax.dtypes.prng_key)
        data = np.asarray(jax.random.key_data(x) if is_key else x)
        out = jax.make_array_from_callback(data.shape, sharding, lambda index: data[index])
        if is_key:
            impl = jax.random.key_impl(x)
            out = jax.jit(lambda d: jax.random.wrap_key_data(d, impl=impl))(out)
        return out

    return jax.tree.map(global_array, tree)


def device_plan(devices: int | None, batch: int) -> tuple[Mesh | None, Mesh | None]:
    """Where a run's devices go: the batch axis if it divides them, else each round's slots.

    Args:
      devices: how many local devices (None: all of them).
      batch: the size of the batch axis (seeds × grid points).

    Returns:
      ``(batch_mesh, slot_mesh)``, at most one of them a mesh; ``(None, None)`` on a single
      device.
    """
    mesh = make_mesh(devices)
    if mesh.size == 1:
        return None, None
    if batch_sharding(mesh, batch) is not None:
        return mesh, None
    return None, mesh


#: XLA flags applied on an NVIDIA GPU unless XLA_FLAGS is set: the Triton GEMM emitter for
#: every matmul it supports, from JAX's GPU performance tips and MuJoCo MJX's tutorials (MJX
#: steps are many small matmuls). Not measured against XLA's default by this project (its one
#: GPU run, docs/benchmarks.md "gpu", ran with it on).
GPU_XLA_FLAGS = "--xla_gpu_triton_gemm_any=True"


def gpu_present() -> bool:
    """Whether an NVIDIA GPU and JAX's CUDA plugin (CUDA 12 or 13, e.g. a site install's) are
    there, checked without starting any JAX backend, so XLA flags can still be set.

    Returns:
      False with ``JAX_PLATFORMS=cpu``, without ``nvidia-smi``, when it lists no GPU or no
      CUDA plugin is installed; True otherwise.
    """
    import importlib.util
    import os
    import shutil
    import subprocess

    if os.environ.get("JAX_PLATFORMS", "") == "cpu" or shutil.which("nvidia-smi") is None:
        return False
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    plugin = any(
        importlib.util.find_spec(m) is not None
        for m in ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_plugins")
    )
    return plugin and listed.returncode == 0 and "GPU" in listed.stdout


def apply_gpu_flags() -> str:
    """Sets :data:`GPU_XLA_FLAGS` on a GPU when the user did not set XLA_FLAGS.

    Returns:
      What happened, in words, for :func:`backend_line`.
    """
    import os

    if "XLA_FLAGS" in os.environ:
        return "set by you"
    if gpu_present():
        os.environ["XLA_FLAGS"] = GPU_XLA_FLAGS
        return "set by jaxnigt for MJX on GPU; set XLA_FLAGS to override"
    return "none"


def backend_line(flags_source: str) -> str:
    """One line: the backend, the device kinds and count, the XLA flags in force.

    Args:
      flags_source: where the XLA flags came from (what :func:`apply_gpu_flags` returned).

    Returns:
      The line, without a newline.
    """
    import collections
    import os

    kinds = collections.Counter(d.device_kind for d in jax.devices())
    devices = ", ".join(f"{c} x {k}" for k, c in kinds.items())
    flags = os.environ.get("XLA_FLAGS", "")
    return (
        f"[jaxnigt] backend {jax.default_backend()}: {devices}; "
        f"XLA_FLAGS={flags!r} ({flags_source})"
    )
