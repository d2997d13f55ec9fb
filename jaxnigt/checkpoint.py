"""Checkpoints of a running experiment (orbax), so a long sweep survives a crash.

A checkpoint holds one algorithm's vmapped training state (every array, PRNG keys stored as
their raw key data), the per-step metrics collected so far (evaluation columns included) and
the number of chunks done.
Restoring it into the state's own structure and continuing gives the same metrics as a run
that was never interrupted: the compiled program is deterministic and every key it uses is
either in the state or derived from the chunk count.

Layout: ``RUN_DIR/checkpoints/<algorithm>/chunk_<k>/`` (orbax), newest kept plus one older;
``RUN_DIR/checkpoints/done.json`` lists the algorithms whose metrics are final in
``metrics.csv``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.files import atomic_write_text

KEEP = 2
_COMPLETE = re.compile(r"chunk_\d{6}")  # orbax writes into "<name>.orbax-checkpoint-tmp*" first


def _complete(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and _COMPLETE.fullmatch(p.name))


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _checkpointer():
    import orbax.checkpoint as ocp

    return ocp.PyTreeCheckpointer()


def algorithm_dir(run_dir: str | Path, algorithm: str) -> Path:
    return Path(run_dir) / "checkpoints" / algorithm


def save(
    run_dir: str | Path,
    algorithm: str,
    state: Any,
    history: dict[str, np.ndarray],
    chunks: int,
) -> Path:
    """Writes a checkpoint after ``chunks`` chunks (atomically: orbax writes then renames)."""
    from jaxnigt.distributed import to_host

    # Every process calls save (orbax synchronizes them); arrays are gathered to the host.
    leaves = to_host([jax.random.key_data(x) if _is_key(x) else x for x in jax.tree.leaves(state)])
    payload = {
        "state": {f"{i:05d}": x for i, x in enumerate(leaves)},
        "history": {k: np.asarray(v) for k, v in history.items()},
        "chunks": np.asarray(chunks, np.int64),
    }
    root = algorithm_dir(run_dir, algorithm)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"chunk_{chunks:06d}"
    _checkpointer().save(path.resolve(), payload, force=True)
    for old in _complete(root)[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    for partial in root.glob("chunk_*.orbax-checkpoint-tmp*"):  # left by a killed save
        shutil.rmtree(partial, ignore_errors=True)
    return path


def latest(run_dir: str | Path, algorithm: str) -> Path | None:
    """The newest complete checkpoint of ``algorithm`` (None if there is none)."""
    found = _complete(algorithm_dir(run_dir, algorithm))
    return found[-1] if found else None


def restore(path: str | Path, template: Any):
    """Reads a checkpoint into the structure (and key types) of ``template``.

    Returns:
      ``(state, history, chunks)`` as given to :func:`save`.
    """
    raw = _checkpointer().restore(Path(path).resolve())
    leaves, treedef = jax.tree.flatten(template)
    saved = [raw["state"][f"{i:05d}"] for i in range(len(leaves))]
    restored = []
    for t, s in zip(leaves, saved, strict=True):
        if _is_key(t):
            restored.append(jax.random.wrap_key_data(jnp.asarray(s), impl=jax.random.key_impl(t)))
        else:
            restored.append(jnp.asarray(s, dtype=t.dtype))
    state = jax.tree.unflatten(treedef, restored)
    history = {k: np.asarray(v) for k, v in raw["history"].items()}
    return state, history, int(raw["chunks"])


def done_algorithms(run_dir: str | Path) -> list[str]:
    path = Path(run_dir) / "checkpoints" / "done.json"
    return json.loads(path.read_text()) if path.is_file() else []


def mark_done(run_dir: str | Path, algorithm: str) -> None:
    done = done_algorithms(run_dir)
    if algorithm not in done:
        done.append(algorithm)
    path = Path(run_dir) / "checkpoints" / "done.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(done) + "\n")
    shutil.rmtree(algorithm_dir(run_dir, algorithm), ignore_errors=True)
