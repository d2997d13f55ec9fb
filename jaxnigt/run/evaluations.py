"""What a chunk's evaluations add to its rows: which step of each seed an evaluation belongs
to (:func:`evaluation_columns`), the row of time 0 (:func:`initial_metrics`) and each seed's
latest evaluation (:func:`last_finite`), and the line of seeds whose next step can never end
(:func:`stall_line`).  Pure numpy, read by :mod:`jaxnigt.run.loop`."""

from __future__ import annotations

import numpy as np

from jaxnigt.algorithms.core import HEALTH_FLAGS, LOGGED


def evaluation_columns(
    active: np.ndarray, returns: np.ndarray, worker_types: np.ndarray, num_types: int
) -> dict[str, np.ndarray]:
    """``evaluated``, ``eval_return`` (and ``eval_type{v}``) ``[B, L]`` of one chunk's steps.

    Each seed's evaluation belongs to its last active step of the chunk (NaN elsewhere); a
    seed with no active step was not evaluated.  Episode e of ``returns`` ``[B, E]`` ran in
    environment type ``e mod V``.  With several types, ``eval_return`` is the worker-weighted
    mean of the per-type means, the objective J = (1/n) Σ_i J_i: type v has weight
    (number of workers of type v) / n.
    """
    B, L = active.shape
    last = np.where(active.any(axis=1), L - 1 - np.argmax(active[:, ::-1], axis=1), -1)
    b = np.nonzero(last >= 0)[0]
    out = {"evaluated": np.zeros((B, L), bool)}
    out["evaluated"][b, last[b]] = True

    def at_last(values: np.ndarray) -> np.ndarray:
        col = np.full((B, L), np.nan, np.float32)
        col[b, last[b]] = values[b]
        return col

    if num_types <= 1:
        out["eval_return"] = at_last(returns.mean(axis=1))
        return out
    per_type = [returns[:, v::num_types].mean(axis=1) for v in range(num_types)]
    weights = np.bincount(worker_types, minlength=num_types) / len(worker_types)
    total = sum(np.float32(w) * t for w, t in zip(weights, per_type, strict=True))
    out["eval_return"] = at_last(np.asarray(total, np.float32))
    for v, values in enumerate(per_type):
        out[f"eval_type{v}"] = at_last(values)
    return out


def initial_metrics(batch: int, n: int) -> dict[str, np.ndarray]:
    """The row of step 0 before any update: counters at zero, no training statistics."""
    nan = np.full((batch, 1), np.nan, np.float32)
    zero = np.zeros((batch, 1), np.float32)
    row: dict[str, np.ndarray] = {c: nan for c in LOGGED}
    counters = ("sim_time", "env_steps", "env_steps_wasted", "comms", "grads", "worker_time")
    row.update({c: zero for c in counters})
    row.update({c: np.zeros((batch, 1), bool) for c in HEALTH_FLAGS})
    row.update(round=np.zeros((batch, 1), np.int32), active=np.ones((batch, 1), bool))
    row["worker_counts"] = np.zeros((batch, 1, n), np.float32)
    return row


def last_finite(values: np.ndarray) -> np.ndarray:
    """Per row, the last non-NaN value (NaN if none)."""
    ok = ~np.isnan(values)
    idx = values.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
    return np.where(ok.any(axis=1), values[np.arange(values.shape[0]), idx], np.nan)


def stall_line(
    algorithm: str, times: np.ndarray, seeds: np.ndarray, *, rounds: bool, others_go_on: bool
) -> str:
    """The line of seeds whose next step can never end (its end time is not finite: a worker
    it waits for is down for good under ``cluster.power``), which stop at their last finite
    ``times``.

    Args:
      algorithm: its name.
      times: ``[k]`` each such seed's last finite simulated time.
      seeds: ``[k]`` their seed numbers.
      rounds: a step is a round (else an update of a per-arrival or per-step engine).
      others_go_on: other seeds of the run go on.
    """
    low, high = float(np.min(times)), float(np.max(times))
    after = f"t = {low:g}" if low == high else f"t = {low:g} to {high:g}"
    what, who = ("round", "a worker") if rounds else ("update", "every worker")
    if others_go_on:
        numbers = sorted({int(s) for s in seeds})
        whom = f"seed{'s' * (len(numbers) > 1)} {', '.join(map(str, numbers))} stop there"
        whom += " (the others go on)"
    else:
        whom = "the run stops there"
    return (
        f"{algorithm}: no {what} can end after {after} ({who} it waits for is down for good: "
        f"cluster.power); {whom}"
    )
