"""The core install (jax, optax, chex, numpy only) in a fresh virtual environment: the README's
NIGT snippet and `jaxnigt clock` work; `jaxnigt run` says what is missing (heavy: a venv and
a pip install of jax, about a minute with cached wheels)."""

import re
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.heavy
def test_core_install_in_a_fresh_venv(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", str(ROOT)], capture_output=True, text=True
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    listed = subprocess.run([str(py), "-m", "pip", "list"], capture_output=True, text=True).stdout
    for heavy in ("brax", "mujoco", "flax", "matplotlib"):
        assert re.search(rf"^{heavy}\s", listed, flags=re.M | re.I) is None, heavy
    snippet = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)[0]
    done = subprocess.run([str(py), "-c", snippet], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    jaxnigt = env_dir / "bin" / "jaxnigt"
    out = tmp_path / "c.csv"
    clock = subprocess.run(
        [str(jaxnigt), "clock", "--n", "4", "--h", "sqrt", "--rounds", "3", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert clock.returncode == 0 and out.is_file(), clock.stderr[-3000:]
    run = subprocess.run(
        [str(jaxnigt), "run", str(ROOT / "configs" / "demo.yaml")], capture_output=True, text=True
    )
    assert run.returncode == 2
    err = run.stderr.strip().splitlines()
    assert len(err) == 1 and "pip install 'jaxnigt[rl]'" in err[0], run.stderr
