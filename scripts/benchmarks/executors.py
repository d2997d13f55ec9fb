"""The same 4-program tuning in sequence, in 2 local processes and on a 2-node Ray cluster.

``jaxnigt tune`` of one point_mass config (Rennala NIGT at M = 20 and 30, Sync NIGT and
AFedPG: four programs of 3 α × 2 seeds, no extension), as fresh commands: ``--jobs 1``,
``--jobs 2``, and ``--ray`` against a cluster of a head and a second node with one CPU each
on 127.0.0.1 (started by a child process, ``ray.cluster_utils.Cluster``, and ended with it).
Reported: each wall time, the ratios to ``--jobs 1``, the cluster's start-up, and Ray's
overhead per program against the local pool, ``(wall(ray) − wall(--jobs 2)) / (programs /
2)``.  Every side's ``tuned.yaml`` must agree.

Usage::

    python scripts/bench.py executors [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
name: bench_executors
algorithms: [rennala_nigt, sync_nigt, afedpg]
seeds: 2
budget: {budget}
env: {{name: point_mass}}
cluster: {{n: 10, h: sqrt, kappa: sqrt}}
hparams: {{M: 20, eta: 0.1}}
eval: {{every_time: {every}, episodes: 4}}
checkpoint_every: 0
"""
FLAGS = ["--lr-exp=-8:-4:2", "--eta", "0.1", "--M", "20,30", "--max-extensions", "0",
         "--no-progress"]  # fmt: skip
CHILD = """
import json, os, sys, time
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
t0 = time.perf_counter()
import ray
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
try:
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address)
    up = time.perf_counter() - t0
    from jaxnigt import cli
    t1 = time.perf_counter()
    status = cli.main(sys.argv[1:] + ["--ray", cluster.address])
    print(json.dumps({"status": status, "up_s": up, "wall_s": time.perf_counter() - t1}))
finally:
    ray.shutdown()
    cluster.shutdown()
"""


def _tune(config: Path, out: Path, extra: list[str]) -> float:
    argv = [sys.executable, "-m", "jaxnigt.cli", "tune", str(config), "--out", str(out), *FLAGS,
            *extra]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return time.perf_counter() - t0


def _ray(config: Path, out: Path) -> dict:
    argv = [sys.executable, "-c", CHILD, "tune", str(config), "--out", str(out), *FLAGS]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
    lines = [x for x in done.stdout.splitlines() if x.startswith('{"status"')]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the Ray side exited {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(lines[-1])


def _tuned(out: Path) -> str:
    return (out / "tuned.yaml").read_text().split("\n", 2)[2]  # past the header


def run(quick: bool = False) -> list[dict]:
    budget = 1000.0 if quick else 4000.0
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench_executors.yaml"
        config.write_text(CONFIG.format(budget=budget, every=budget / 40))
        one = _tune(config, Path(tmp) / "one", ["--jobs", "1"])
        two = _tune(config, Path(tmp) / "two", ["--jobs", "2"])
        ray = _ray(config, Path(tmp) / "ray")
        same = _tuned(Path(tmp) / "one") == _tuned(Path(tmp) / "two") == _tuned(Path(tmp) / "ray")
        programs = len(list((Path(tmp) / "one" / "runs").iterdir()))
    return [{"programs": programs, "budget": budget, "jobs1_s": one, "jobs2_s": two,
             "ray_s": ray["wall_s"], "ray_up_s": ray["up_s"], "speedup_jobs2": one / two,
             "speedup_ray": one / ray["wall_s"],
             "ray_overhead_per_program_s": (ray["wall_s"] - two) / (programs / 2),
             "same_tuned": same}]  # fmt: skip


def format_rows(rows: list[dict]) -> str:
    from benchmarks.common import format_table

    cols = (
        ("programs", "programs", "d"),
        ("budget", "budget", ",.0f"),
        ("jobs1_s", "--jobs 1 s", ".1f"),
        ("jobs2_s", "--jobs 2 s", ".1f"),
        ("ray_s", "Ray 2 nodes s", ".1f"),
        ("ray_up_s", "cluster start s", ".1f"),
        ("speedup_jobs2", "1 / jobs 2", ".2f"),
        ("speedup_ray", "1 / Ray", ".2f"),
        ("ray_overhead_per_program_s", "(Ray − jobs 2) / program s", ".1f"),
        ("same_tuned", "same tuned.yaml", ""),
    )
    return format_table(rows, cols)
