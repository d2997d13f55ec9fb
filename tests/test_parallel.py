"""Tests for jaxnigt.run.devices: sharded runs equal the single-device run (4 fake CPU devices)."""

import json
import os
import sys
import textwrap

import jax
from children import child_env, run, with_tests_on_path

from jaxnigt.run import devices

SCRIPT = textwrap.dedent(
    """
    import json
    import tasks
    tasks.register_test_envs()
    import jax
    import numpy as np
    from jaxnigt import config as config_lib
    from jaxnigt.run.devices import batch_sharding, device_plan, make_mesh
    from jaxnigt.run.loop import run_algorithm

    assert len(jax.devices()) == 4, jax.devices()
    out = {}
    four, one = make_mesh(), make_mesh(1)
    out["batch_sharding"] = {
        "4 devices, batch 3": batch_sharding(four, 3) is None,
        "4 devices, batch 8": tuple(batch_sharding(four, 8).spec),
        "1 device, batch 8": batch_sharding(one, 8) is None,
    }
    # 4 seeds: batch axis sharded; 1 seed: slot axis sharded (Malenia's per-worker means;
    # Rennala's slot-sharded program is checked below for its cross-device all-reduce).
    for algorithm, seeds in (("rennala_nigt", 4), ("malenia_nigt", 1)):
        res = {}
        for devices in (1, 4):
            cfg = config_lib.from_dict({
                "env": {"name": "timed_point_mass", "heterogeneous": "sign_flip"},
                "cluster": {"n": 4, "h": "sqrt", "kappa": 1.0},
                "algorithms": [algorithm], "seeds": seeds, "devices": devices,
                "hparams": {"M": 8, "learning_rate": 0.05, "eta": 0.3},
                "budget": 20.0, "eval": {"every": 4, "episodes": 4},
            })
            mesh, slot_mesh = device_plan(cfg.devices, seeds)
            m = run_algorithm(cfg, algorithm, progress=False, log=lambda s: None)
            res[devices] = (m, mesh is not None, slot_mesh is not None)
        a, b = res[1][0], res[4][0]
        diff = max(
            float(np.nanmax(np.abs(a[k] - b[k])))
            for k in ("sim_time", "train_return", "eval_return", "env_steps")
        )
        out[f"{algorithm}/{seeds}"] = {
            "diff": diff, "batch_sharded": res[4][1], "slot_sharded": res[4][2],
            "same_shape": a["sim_time"].shape == b["sim_time"].shape,
        }
    # Slot sharding turns the gradient's sum over slots into a cross-device all-reduce.
    from jaxnigt.run.trainer import make_trainer
    texts = {}
    for mesh in (None, make_mesh()):
        tr = make_trainer(cfg, "rennala_nigt", mesh=mesh)
        st = jax.vmap(tr.init)(jax.random.split(jax.random.key(0), 1), tr.hyper(batch=1))
        prog = jax.jit(jax.vmap(lambda s: tr.run_chunk(s, 1)))
        texts[mesh is not None] = prog.lower(st).compile().as_text()
    out["all_reduce"] = {"sharded": "all-reduce" in texts[True],
                         "single": "all-reduce" in texts[False]}
    print("RESULT" + json.dumps(out))
    """
)


def test_make_mesh_and_single_device_plan():
    mesh = devices.make_mesh()
    assert mesh.axis_names == (devices.AXIS,)
    assert mesh.size == len(jax.devices())
    assert devices.batch_sharding(None, 8) is None
    assert devices.batch_sharding(devices.make_mesh(1), 8) is None
    assert devices.device_plan(1, 8) == (None, None)


def test_sharded_runs_equal_single_device(tmp_path):
    env = child_env(
        XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4",
        JAX_PLATFORMS="cpu",
    )
    env = with_tests_on_path(env)  # the child imports tasks
    code, stdout, stderr = run([sys.executable, "-c", SCRIPT], tmp_path, env=env)
    assert code == 0, stderr[-3000:]
    line = next(x for x in stdout.splitlines() if x.startswith("RESULT"))
    result = json.loads(line[len("RESULT") :])
    assert result.pop("all_reduce") == {"sharded": True, "single": False}
    assert result.pop("batch_sharding") == {
        "4 devices, batch 3": True,
        "4 devices, batch 8": ["shard"],
        "1 device, batch 8": True,
    }
    for name, r in result.items():
        assert r["same_shape"], name
        assert r["diff"] < 1e-3, (name, r)
        seeds = int(name.split("/")[1])
        assert r["batch_sharded"] == (seeds == 4), (name, r)
        assert r["slot_sharded"] == (seeds == 1), (name, r)
