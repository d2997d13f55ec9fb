"""A real Ray cluster on this machine for tests/test_executors.py, and the driver that runs
the tests' commands on it (run as a script, so Ray binds to 127.0.0.1 from its first import):
a head and a second node, one CPU each, started once for the test module; then, for each
request, ``jaxnigt ARGS... --ray ADDRESS`` in this driver.

A request is one JSON line on stdin: ``{"argv": [...], "kill": bool, "term": bool,
"result": PATH}``.  With ``kill``, the worker that runs a program on the second node is
killed (SIGKILL, by the pid its task.json names) while it runs; with ``term``, this driver
sends itself SIGTERM once a program has checkpointed, then runs the same command again with
``--resume``.  The answer, written to PATH (atomically): ``{"status", "first", "killed"}``
(what was killed), or ``{"error"}`` (the traceback of what the command raised).  When stdin
closes, the cluster's processes end with this driver (Cluster.shutdown)."""

import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # listen on 127.0.0.1 only


def _kill_one(out: Path, node_id: str, killed: dict, done: threading.Event) -> None:
    """Kills the first task found running on ``node_id`` (its ``task.json``)."""
    while not done.is_set():
        for f in out.glob("*/task.json"):
            state = json.loads(f.read_text() or "{}")
            if state.get("node") == node_id and not killed:
                time.sleep(1.0)  # inside the program: imports, compiling, running
                os.kill(state["pid"], signal.SIGKILL)
                killed.update(point=f.parent.name, pid=state["pid"])
                return
        time.sleep(0.2)


def _term_once(out: Path) -> None:
    """SIGTERM to this driver once a program has written a checkpoint."""
    while not list(out.glob("*/checkpoints/*/*")):
        time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGTERM)


def _serve(request: dict, address: str, second: str) -> dict:
    """One command of a test on the cluster (the module docstring)."""
    from jaxnigt import cli

    args, kill, term = request["argv"], request.get("kill"), request.get("term")
    out = Path(args[args.index("--out") + 1])
    killed: dict = {}
    done = threading.Event()
    if kill:
        threading.Thread(target=_kill_one, args=(out, second, killed, done), daemon=True).start()
    if term:
        threading.Thread(target=_term_once, args=(out,), daemon=True).start()
    try:
        status = cli.main([*args, "--ray", address])
        first = status
        if term:
            status = cli.main([*args, "--ray", address, "--resume"])
    finally:
        done.set()
    return {"status": status, "first": first, "killed": killed}


def main() -> int:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        second = cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address)
        print(json.dumps({"ready": cluster.address}), flush=True)
        for line in sys.stdin:
            request = json.loads(line)
            try:
                result = _serve(request, cluster.address, second.node_id)
            except BaseException as e:  # the test fails with it; the next one may still run
                result = {"error": "".join(traceback.format_exception(e))}
            path = Path(request["result"])
            path.with_suffix(".tmp").write_text(json.dumps(result))
            path.with_suffix(".tmp").replace(path)
            print(json.dumps({"answered": str(path)}), flush=True)
        return 0
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
