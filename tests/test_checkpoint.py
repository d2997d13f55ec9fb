"""Tests for jaxnigt.run.checkpoint: exact round trip of a vmapped training state with keys."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt import config as config_lib
from jaxnigt.run import checkpoint
from jaxnigt.run.trainer import make_trainer


# afedpg: a per-arrival engine state; impala: per-actor parameters, learner history, critic
@pytest.mark.parametrize("algorithm", ["afedpg", "impala"])
def test_round_trip_restores_state_keys_and_history(tmp_path, algorithm):
    cfg = config_lib.from_dict(
        {"env": {"name": "point_mass"}, "cluster": {"n": 3}, "algorithms": [algorithm]}
    )
    tr = make_trainer(cfg, algorithm)
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(0), s))(jnp.arange(2))
    state = jax.jit(jax.vmap(tr.init))(keys, tr.hyper(batch=2))
    state, _ = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, 2)))(state)
    history = {
        "sim_time": np.arange(6, dtype=np.float32).reshape(2, 3),
        "eval_return": np.array([[1.0, np.nan, 2.0], [np.nan, 3.0, np.nan]], np.float32),
    }
    for chunks in (3, 4, 5):
        checkpoint.save(tmp_path, algorithm, state, history, chunks=chunks)
    kept = sorted(p.name for p in checkpoint.algorithm_dir(tmp_path, algorithm).iterdir())
    assert kept == ["chunk_000004", "chunk_000004.sha256", "chunk_000005", "chunk_000005.sha256"]

    template = jax.jit(jax.vmap(tr.init))(keys, tr.hyper(batch=2))
    restored, h, chunks = checkpoint.restore(checkpoint.latest(tmp_path, algorithm), template)
    assert chunks == 5
    for k, v in history.items():
        np.testing.assert_array_equal(h[k], v)
    data = lambda t: jax.tree.map(
        lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x, t
    )
    chex.assert_trees_all_equal(data(restored), data(state))
    # The restored state continues exactly like the original.
    step = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, 2)))
    chex.assert_trees_all_equal(step(restored)[1], step(state)[1])

    checkpoint.mark_done(tmp_path, algorithm)
    assert checkpoint.done_algorithms(tmp_path) == [algorithm]
    assert checkpoint.latest(tmp_path, algorithm) is None


def test_restore_latest_verifies_and_falls_back(tmp_path):
    cfg = config_lib.from_dict(
        {"env": {"name": "point_mass"}, "cluster": {"n": 3}, "algorithms": ["rennala_nigt"]}
    )
    tr = make_trainer(cfg, "rennala_nigt")
    state = jax.jit(tr.init)(jax.random.key(0), tr.hyper())
    history = {"sim_time": np.arange(3, dtype=np.float32)[None]}
    assert checkpoint.restore_latest(tmp_path, "rennala_nigt", state) is None
    for chunks in (1, 2):
        checkpoint.save(
            tmp_path, "rennala_nigt", state, {k: v + chunks for k, v in history.items()}, chunks
        )
    root = checkpoint.algorithm_dir(tmp_path, "rennala_nigt")
    (root / "chunk_000002.sha256").write_text("0" * 64 + "\n")  # the arrays no longer match
    logs = []
    path, _, h, chunks = checkpoint.restore_latest(tmp_path, "rennala_nigt", state, logs.append)
    assert (path.name, chunks) == ("chunk_000001", 1)
    np.testing.assert_array_equal(h["sim_time"], history["sim_time"] + 1)
    assert len(logs) == 1 and "chunk_000002 is unreadable" in logs[0]
    assert (root / "chunk_000002.corrupt").is_dir()
    assert [p.name for p in checkpoint.saved(tmp_path, "rennala_nigt")] == ["chunk_000001"]
    (root / "chunk_000001.sha256").unlink()
    assert checkpoint.saved(tmp_path, "rennala_nigt") == []  # no digest: not restorable
    with pytest.raises(checkpoint.CheckpointError, match="no readable checkpoint"):
        checkpoint.restore_latest(tmp_path, "rennala_nigt", state)
    assert (root / "chunk_000001").is_dir()  # nothing moved when none is readable
