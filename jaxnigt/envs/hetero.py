"""Heterogeneous environments: worker types as observation transforms (docs/getting_started.md).

Worker type v ∈ {0, …, V−1} sees ``obs_transforms[v](s)``; rewards and dynamics are shared
(types whose dynamics differ: :mod:`jaxnigt.envs.physics`).
The paper's construction (``"sign_flip"``, V = 2): type 0 sees ``(s, 0)``, type 1 sees
``(−s, 1)``. Worker i gets type ``i mod V`` unless an assignment is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:
    from jaxnigt.envs import TaskEnv


@dataclasses.dataclass(frozen=True)
class SignFlip:
    """``s -> concat(sign · s, [flag])``; a value-hashable callable (jit caches stay shared)."""

    sign: float
    flag: float

    def __call__(self, obs: jax.Array) -> jax.Array:
        flag = jnp.full((*obs.shape[:-1], 1), self.flag, obs.dtype)
        return jnp.concatenate([self.sign * obs, flag], axis=-1)


SIGN_FLIP = (SignFlip(1.0, 0.0), SignFlip(-1.0, 1.0))


def make_heterogeneous(
    task: TaskEnv, transforms: str | Sequence[Callable[[jax.Array], jax.Array]] = "sign_flip"
) -> TaskEnv:
    """Returns ``task`` with V worker types given by observation transforms.

    Args:
      task: a homogeneous task (``task.num_types == 1``).
      transforms: ``"sign_flip"`` (V = 2: ``(s, 0)`` and ``(−s, 1)``) or a sequence of
        callables ``obs[raw_obs_size] -> obs'[k]`` that all produce the same size ``k``.
        Prefer value-hashable callables (module-level functions, frozen dataclasses) so
        equal tasks share jit caches.

    Returns:
      A :class:`TaskEnv` with ``obs_transforms`` set and ``obs_size = k``.

    Raises:
      ValueError: unknown transform name, empty list, mismatched output sizes, or a task that
        is already heterogeneous.
    """
    if task.num_types != 1:
        raise ValueError("task is already heterogeneous; build from the homogeneous task")
    if isinstance(transforms, str):
        if transforms != "sign_flip":
            raise ValueError(f"unknown transform set {transforms!r}; known: 'sign_flip'")
        transforms = SIGN_FLIP
    transforms = tuple(transforms)
    if not transforms:
        raise ValueError("need at least one transform")
    raw = jax.ShapeDtypeStruct((task.raw_obs_size,), jnp.float32)
    shapes = [jax.eval_shape(f, raw).shape for f in transforms]
    if any(s != shapes[0] for s in shapes) or len(shapes[0]) != 1:
        raise ValueError(f"transforms must map to one common vector size, got {shapes}")
    return dataclasses.replace(task, obs_transforms=transforms, obs_size=int(shapes[0][0]))


def worker_types(n: int, num_types: int, assignment: Sequence[int] | None = None) -> np.ndarray:
    """Environment type of each worker: ``i mod V`` unless ``assignment`` is given.

    Args:
      n: number of workers.
      num_types: V.
      assignment: optional explicit length-n list of types in ``[0, V)``.

    Returns:
      ``int32[n]``.

    Raises:
      ValueError: ``n < 1``, ``num_types < 1``, wrong length or out-of-range types.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if num_types < 1:
        raise ValueError(f"num_types must be >= 1, got {num_types}")
    if assignment is None:
        return (np.arange(n) % num_types).astype(np.int32)
    types = np.asarray(assignment)
    if types.shape != (n,):
        raise ValueError(f"assignment must have length {n}, got shape {types.shape}")
    if not np.issubdtype(types.dtype, np.integer):
        raise ValueError(f"assignment must hold integers, got {types.dtype}")
    if types.min() < 0 or types.max() >= num_types:
        raise ValueError(f"assignment types must lie in [0, {num_types}), got {types.tolist()}")
    return types.astype(np.int32)
