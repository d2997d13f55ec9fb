"""A real Ray cluster on this machine for tests/test_executors.py (run as a script, so Ray
binds to 127.0.0.1 from its first import): a head and a second node, one CPU each, then
``jaxnigt ARGS... --ray ADDRESS``; with ``--kill``, the worker that runs a program on the
second node is killed (SIGKILL, by the pid its task.json names) while it runs; with
``--term``, this driver sends itself SIGTERM once a program has checkpointed, then runs the
same command again with ``--resume``.  Prints one
JSON line: what was killed.  The cluster's processes end with it (Cluster.shutdown)."""

import json
import os
import signal
import sys
import threading
import time
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


def main() -> int:
    import ray
    from ray.cluster_utils import Cluster

    kill, term = "--kill" in sys.argv, "--term" in sys.argv
    args = [a for a in sys.argv[1:] if a not in ("--kill", "--term")]
    out = Path(args[args.index("--out") + 1])
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        second = cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address)
        killed: dict = {}
        done = threading.Event()
        if kill:
            threading.Thread(target=_kill_one, args=(out, second.node_id, killed, done),
                             daemon=True).start()  # fmt: skip
        if term:
            threading.Thread(target=_term_once, args=(out,), daemon=True).start()
        from jaxnigt import cli

        status = cli.main([*args, "--ray", cluster.address])
        first = status
        if term:
            status = cli.main([*args, "--ray", cluster.address, "--resume"])
        done.set()
        print(json.dumps({"status": status, "first": first, "killed": killed}), flush=True)
        return status
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
