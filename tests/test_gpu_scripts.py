"""The offline GPU node's scripts (scripts/gpu/): the wheel list and run.sh's refusals.

Cheap checks only: scripts/test_site_jax.sh (in .ci/run) runs the whole path, with a fresh
Python 3.12 venv, the fetched wheels and run.sh's tiny CPU mode.
"""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "scripts" / "gpu"


def _names(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines()]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_wheel_list_pins_one_version_of_each_and_nothing_the_node_has():
    specs = [s for s in _names(GPU / "wheels.txt") if s]
    assert specs
    pinned = dict(re.fullmatch(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9.]+)", s).groups() for s in specs)
    assert len(pinned) == len(specs), "a distribution is listed twice"
    names = {_norm(n) for n in pinned}
    node = {_norm(n) for n in _names(GPU / "node_site.txt") if n}
    assert not names & node, names & node
    assert {"mujoco", "mujoco-core", "mujoco-mjx", "brax", "rlax"} <= names
    assert pinned["mujoco"] == pinned["mujoco-core"]  # mujoco 4 requires the same core
    assert not names & {"mujoco-studio", "glfw", "pyopengl"}  # not imported by any run


def _run_sh(*args, **env):
    return subprocess.run(
        ["bash", str(GPU / "run.sh"), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_sh_needs_an_out_dir_and_the_wheels(tmp_path):
    proc = _run_sh()
    assert proc.returncode == 2 and "usage" in proc.stderr
    assert _run_sh("--bogus", str(tmp_path)).returncode == 2
    empty = tmp_path / "whl"
    empty.mkdir()
    proc = _run_sh(str(tmp_path / "out"), JAXNIGT_WHEELS=str(empty))
    assert proc.returncode == 1 and "fetch_wheels.sh" in proc.stdout
    assert (tmp_path / "out" / "run.log").read_text().count("no wheels") == 1
