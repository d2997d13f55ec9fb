"""Tests for scripts/setup.sh's choice of jaxlib: the CUDA extra when a GPU is there."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _clean_env():
    """The test's environment without the user's JAXNIGT_GPU (a GPU host may set it)."""
    return {k: v for k, v in os.environ.items() if k != "JAXNIGT_GPU"}


def _fake_nvidia_smi(tmp_path, listing="GPU 0: NVIDIA H200 (UUID: GPU-0)"):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho '{listing}'\n")
    tool.chmod(0o755)
    return {**_clean_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _no_nvidia_smi(tmp_path):
    """A PATH with the tools detect_gpu.sh runs and no nvidia-smi, even on a GPU host (whose
    real nvidia-smi sits in /usr/bin)."""
    bin_dir = tmp_path / "bare"
    bin_dir.mkdir()
    for tool in ("bash", "grep", "sh"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    return {**_clean_env(), "PATH": str(bin_dir)}


def _detect(env):
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "detect_gpu.sh")], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), proc.stderr.strip()


def test_gpu_branch_adds_the_cuda_extra(tmp_path):
    env = _fake_nvidia_smi(tmp_path)
    extras, said = _detect(env)
    assert extras == "rl,tb,test,cuda" and "1 GPU(s)" in said and "JAXNIGT_GPU=0" in said
    assert _detect({**env, "JAXNIGT_GPU": "0"})[0] == "rl,tb,test"


def test_cpu_branch_unchanged(tmp_path):
    env = _no_nvidia_smi(tmp_path)
    extras, said = _detect(env)
    assert extras == "rl,tb,test" and "CPU jaxlib" in said
    assert _detect({**env, "JAXNIGT_GPU": "1"})[0] == "rl,tb,test,cuda"
    no_gpu = _fake_nvidia_smi(tmp_path, listing="No devices were found")
    assert _detect(no_gpu)[0] == "rl,tb,test"


@pytest.mark.heavy
def test_gpu_branch_resolves_the_cuda_plugin_of_the_pinned_jax(tmp_path):
    """setup.sh with a fake nvidia-smi and pip in dry-run mode: the resolved set holds the
    CUDA plugin of the same version as jax (network to the package registry; ~1 minute)."""
    import jax

    report = tmp_path / "report.json"
    env = {**_fake_nvidia_smi(tmp_path), "JAXNIGT_VENV": str(tmp_path / "venv")}
    env["JAXNIGT_PIP_DRY_RUN"] = str(report)
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    installed = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert installed.get("jax-cuda12-plugin") == jax.__version__, installed
