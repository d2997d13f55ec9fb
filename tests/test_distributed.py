"""Two processes on 127.0.0.1 (jax.distributed, gloo collectives) vs one process."""

import csv
import os
import socket

import numpy as np
import pytest
from children import Child, child_env, cli_argv

from jaxnigt import cli
from jaxnigt.run.distributed import is_writer, to_host

TINY = """
name: tiny_mp
algorithms: [rennala_nigt]
seeds: 2
budget: 30.0
env: {name: timed_point_mass}
cluster: {n: 3, h: sqrt, kappa: 1.0, noise: exponential}
hparams: {M: 6, learning_rate: 0.05, eta: 0.3}
eval: {every: 4, episodes: 4}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _numbers(path):
    rows = list(csv.DictReader(open(path)))
    cols = ["sim_time", "env_steps", "comms", "train_return", "eval_return"]
    return rows, np.array([[float(r[c]) if r[c] else np.nan for c in cols] for r in rows])


def test_single_process_helpers():
    assert is_writer()
    np.testing.assert_array_equal(to_host({"a": np.arange(3)})["a"], np.arange(3))


@pytest.mark.parametrize(
    "address, said",
    [
        ("nohostport", "got 'nohostport'; expected HOST:PORT, e.g. 10.0.0.1:12345"),
        (":1234", "got ':1234'; expected HOST:PORT"),
        ("host:0", "got 'host:0'; the port '0' is not an integer from 1 to 65535"),
        ("host:http", "got 'host:http'; the port 'http' is not an integer from 1 to 65535"),
        ("::1:1234", "(an IPv6 host in brackets: [::1]:12345)"),
    ],
)
def test_a_malformed_coordinator_is_one_line_before_jax_distributed(
    tmp_path, capsys, address, said
):
    """JAX fails on these deep inside jax.distributed (an IndexError for 'nohostport'):
    the command checks HOST:PORT first and starts nothing."""
    from jaxnigt.run import distributed

    out = tmp_path / "out"
    argv = [
        "run",
        "demo",
        "--out",
        str(out),
        "--coordinator",
        address,
        "--num-processes",
        "2",
        "--process-id",
        "0",
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxnigt: error: --coordinator: got "), err
    assert said in err[0] and not out.exists()
    with pytest.raises(ValueError, match=r"^coordinator: got "):
        distributed.initialize(address, 2, 0)
    for fine in ("127.0.0.1:12345", "node-3.cluster:80", "[::1]:12345"):
        assert distributed.coordinator_problem(fine) is None


def _two_processes(cfg, out, log_dir):
    """``jaxnigt run`` as processes 0 and 1 of a two-process job on 127.0.0.1; returns the
    children after both ended. A free port can be taken by someone else between our probe
    and the coordinator's bind: then the job is started again on another port (3 tries)."""
    env = child_env()
    # Each process has one CPU device: drop a forced device count, keep the other flags.
    flags = os.environ.get("XLA_FLAGS", "").split()
    env["XLA_FLAGS"] = " ".join(f for f in flags if "device_count" not in f)
    for attempt in range(3):
        port = _free_port()
        args = ["run", str(cfg), "--out", str(out), "--no-progress", "--overwrite"]
        args += ["--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
        children = [
            Child(cli_argv(*args, "--process-id", str(i)), log_dir, name=f"{attempt}_{i}", env=env)
            for i in range(2)
        ]
        try:
            codes = [c.wait() for c in children]
        finally:
            for c in children:
                c.kill()
        said = " ".join(c.stdout + c.stderr for c in children).lower()
        if not (any(codes) and "address already in use" in said):
            return children
    return children


def test_two_processes_match_one(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    one = tmp_path / "one"
    assert cli.main(["run", str(cfg), "--out", str(one), "--no-progress"]) == 0

    two = tmp_path / "two"
    children = _two_processes(cfg, two, tmp_path / "logs")
    outputs = [c.stdout + c.stderr for c in children]
    codes = [c.poll() for c in children]
    if any("gloo" in o.lower() and code for o, code in zip(outputs, codes, strict=True)):
        pytest.skip("this platform's jaxlib lacks gloo CPU collectives")
    assert codes == [0, 0], children[0].tail() + children[1].tail()
    assert "connected" in outputs[1].lower(), outputs[1][-2000:]

    rows1, a = _numbers(one / "metrics.csv")
    rows2, b = _numbers(two / "metrics.csv")
    assert [(r["seed"], r["round"]) for r in rows1] == [(r["seed"], r["round"]) for r in rows2]
    # Each process rolls out a batch of 1 instead of 2: code generation differs, so float32
    # trajectories agree to rounding, not bitwise (see PERF-NOTES); episodes end at steps
    # drawn at reset (timed_point_mass), so rounding cannot end one earlier.
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert (two / "summary.json").is_file() and (two / "curves.png").is_file()
