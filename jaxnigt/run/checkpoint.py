"""Checkpoints of a running experiment (orbax), so a long sweep survives a crash.

A checkpoint holds one algorithm's vmapped training state (every array, PRNG keys stored as
their raw key data), the per-step metrics collected so far (evaluation columns included) and
the number of chunks done.
Restoring it into the state's own structure and continuing gives the same metrics as a run
that was never interrupted: the compiled program is deterministic and every key it uses is
either in the state or derived from the chunk count.

Layout: ``RUN_DIR/checkpoints/<algorithm>/chunk_<k>/`` (orbax), newest kept plus one older,
each with ``chunk_<k>.sha256`` beside it (a digest of every array it holds);
``RUN_DIR/checkpoints/done.json`` lists the algorithms whose metrics are final in
``metrics.csv``.  :func:`restore_latest` verifies a checkpoint (orbax restore, then the
digest) and falls back to the previous one when the newest is unreadable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxnigt.run.run_dir import RunDirError, atomic_write_text

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


def _digest(payload: dict) -> str:
    """sha256 over every array of a checkpoint payload, in a fixed order."""
    h = hashlib.sha256()
    for group in ("state", "history"):
        for name in sorted(payload[group]):
            x = np.ascontiguousarray(np.asarray(payload[group][name]))
            h.update(f"{group}/{name}:{x.dtype}:{x.shape};".encode())
            h.update(x.tobytes())
    h.update(str(int(np.asarray(payload["chunks"]))).encode())
    return h.hexdigest()


@contextlib.contextmanager
def _quiet_failures():
    """Orbax reports a failed write from its background threads too (absl ERROR logs and
    thread tracebacks); the failure reaches the caller as one exception, so keep them quiet."""
    logger = logging.getLogger("absl")
    level, hook = logger.level, threading.excepthook
    logger.setLevel(logging.CRITICAL)
    threading.excepthook = lambda args: None
    try:
        yield
    finally:
        logger.setLevel(level)
        threading.excepthook = hook


#: After a failed save, partial files are removed until none has appeared for this long:
#: the save's other writes (tensorstore's threads) may still land after its exception.
PARTIAL_SETTLE_S = 0.25
_PARTIAL_LIMIT_S = 10.0


def _remove_partials(root: Path, *, settle: float = 0.0) -> None:
    """Removes the ``chunk_*.orbax-checkpoint-tmp*`` directories of unfinished saves under
    ``root``; with ``settle``, again until none has reappeared for ``settle`` seconds (at
    most :data:`_PARTIAL_LIMIT_S`)."""
    start = quiet = time.monotonic()
    while True:
        found = list(root.glob("chunk_*.orbax-checkpoint-tmp*"))
        for partial in found:
            shutil.rmtree(partial, ignore_errors=True)
        now = time.monotonic()
        quiet = now if found else quiet
        if now - quiet >= settle or now - start >= _PARTIAL_LIMIT_S:
            return
        time.sleep(0.02)


class CheckpointError(RuntimeError):
    """No checkpoint of an algorithm could be read; the message names each and why."""


def save(
    run_dir: str | Path,
    algorithm: str,
    state: Any,
    history: dict[str, np.ndarray],
    chunks: int,
) -> Path:
    """Writes a checkpoint after ``chunks`` chunks (atomically: orbax writes then renames)."""
    from jaxnigt.run.distributed import to_host

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
    try:
        with _quiet_failures():
            _checkpointer().save(path.resolve(), payload, force=True)
        atomic_write_text(path.with_suffix(".sha256"), _digest(payload) + "\n")
    except Exception as e:  # orbax/tensorstore wrap OS errors (disk full, ...) in their own
        _remove_partials(root, settle=PARTIAL_SETTLE_S)
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RunDirError(f"checkpoint {str(path)!r}: {reason[:300]}", started=True) from None
    # after the save (every process is past it): what an earlier killed save left
    _remove_partials(root)
    for old in _complete(root)[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
        old.with_suffix(".sha256").unlink(missing_ok=True)
    return path


def saved(run_dir: str | Path, algorithm: str) -> list[Path]:
    """The complete checkpoints of ``algorithm`` that carry their digest, oldest first (an
    interrupted save leaves neither; one whose digest was never written cannot be restored)."""
    found = _complete(algorithm_dir(run_dir, algorithm))
    return [p for p in found if p.with_suffix(".sha256").is_file()]


def latest(run_dir: str | Path, algorithm: str) -> Path | None:
    """The newest complete checkpoint of ``algorithm`` (None if there is none)."""
    found = _complete(algorithm_dir(run_dir, algorithm))
    return found[-1] if found else None


def restore(path: str | Path, template: Any):
    """Reads a checkpoint into the structure (and key types) of ``template``, verifying it
    against its digest.

    Returns:
      ``(state, history, chunks)`` as given to :func:`save`.

    Raises:
      ValueError: the arrays do not match the digest saved with them (or it is missing).
    """
    raw = _checkpointer().restore(Path(path).resolve())
    digest = Path(path).with_suffix(".sha256")
    if not digest.is_file() or digest.read_text().strip() != _digest(raw):
        raise ValueError("its arrays do not match the digest saved with it")
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


def restore_latest(run_dir: str | Path, algorithm: str, template: Any, log=print):
    """The newest readable checkpoint of ``algorithm``: ``(path, state, history, chunks)``,
    or None if it has none.  Unreadable newer ones are warned about in one line each and moved
    aside to ``chunk_<k>.corrupt``; if none is readable, :class:`CheckpointError` is raised and
    nothing is moved."""
    found = _complete(algorithm_dir(run_dir, algorithm))
    bad = []
    for path in reversed(found):
        try:
            state, history, chunks = restore(path, template)
        except Exception as e:  # orbax/tensorstore raise many kinds; every one means unreadable
            bad.append((path, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
            continue
        for corrupt, why in bad:
            log(
                f"[jaxnigt] checkpoint {corrupt} is unreadable ({why[:200]}); moved to "
                f"{corrupt.name}.corrupt, resuming from {path.name}"
            )
            corrupt.rename(corrupt.with_name(corrupt.name + ".corrupt"))
        return path, state, history, chunks
    if bad:
        names = "; ".join(f"{p.name} ({why[:120]})" for p, why in bad)
        raise CheckpointError(
            f"{algorithm}: no readable checkpoint in {str(bad[0][0].parent)!r}: {names}"
        )
    return None


def done_algorithms(run_dir: str | Path) -> list[str]:
    path = Path(run_dir) / "checkpoints" / "done.json"
    return json.loads(path.read_text()) if path.is_file() else []


def finished(run_dir: str | Path, config: Any = None) -> bool:
    """Whether ``run_dir`` holds a finished run: its result files are written and every
    algorithm of its ``config.yaml`` is done; with ``config``, also that it is a run of
    exactly that config (then a command may keep it instead of running it again)."""
    from jaxnigt import config as config_lib

    run_dir = Path(run_dir)
    if not all((run_dir / f).is_file() for f in ("config.yaml", "summary.json", "metrics.csv")):
        return False
    try:
        written = config_lib.from_dict(config_lib.read_yaml(run_dir / "config.yaml"))
    except config_lib.ConfigError:
        return False
    if config is not None and written != config:
        return False
    return set(done_algorithms(run_dir)) >= set(written.algorithms)


def mark_done(run_dir: str | Path, algorithm: str) -> None:
    done = done_algorithms(run_dir)
    if algorithm not in done:
        done.append(algorithm)
    path = Path(run_dir) / "checkpoints" / "done.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(done) + "\n")
    shutil.rmtree(algorithm_dir(run_dir, algorithm), ignore_errors=True)
