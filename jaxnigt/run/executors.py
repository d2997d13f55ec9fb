"""Where a study's independent programs run: here, in local processes, or on a Ray cluster.

A sweep's points and a tuning's programs are independent run directories, each one jitted
computation, so they can run anywhere that sees the output folder.  :func:`make` returns an
*executor* with one interface (that of :class:`jaxnigt.run.processes.Pool`): ``submit(args,
name) -> id`` queues ``fn(*args, stop=flag)``, ``wait() -> [ids]`` blocks until some finish
(raising a failed job's error after stopping the others), ``busy`` says whether any is left,
and leaving the ``with`` block stops what still runs.

* **local** (``jobs`` processes, :class:`~jaxnigt.run.processes.Pool`): ``jobs == 1`` runs here,
  in order; more runs one ``spawn`` process per program.
* **Ray** (:class:`RayPool`, the ``ray`` extra): ``ray`` is ``"auto"`` (the cluster
  ``ray start`` began on this machine, else a local one) or a cluster's address.  Each
  program is a Ray task with one CPU, or ``gpus_per_program`` GPUs (Ray pins the task to
  them through ``CUDA_VISIBLE_DEVICES``; JAX's preallocation is turned off so several programs
  share a GPU).  A task whose worker or node dies is retried (``max_retries``) and resumes
  from its program's last checkpoint; the run directory must be on a filesystem every node
  sees.  The driver's SIGINT/SIGTERM cancels the running tasks, which checkpoint after their
  chunk (``--resume`` continues them).  Each running program writes
  ``RUN_DIR/task.json`` (node, pid, attempt start): where it runs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxnigt.run import processes
from jaxnigt.run import run_dir as run_dir_lib

POLL_S = 0.5
MAX_RETRIES = 3
CANCEL_WAIT_S = 120.0  # how long cancelled programs may take to checkpoint
TASK_FILE = "task.json"
# A GPU program shares its device: no preallocation of 75 % of its memory per process.
GPU_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


class ExecutorError(RuntimeError):
    """The executor asked for cannot be used; the message says why, in one line."""


class MissingRay(ExecutorError):
    """``--ray`` without the ``ray`` extra installed."""

    def __init__(self):
        super().__init__("Ray is not installed: pip install 'jaxnigt[ray]'")


def check(ray: str | None) -> None:
    """Raises :class:`MissingRay` when ``ray`` asks for a Ray cluster and the ``ray`` extra is
    not installed: a study calls it before it writes anything, so that a refused command
    leaves no record that a later command would have to continue."""
    if ray is not None:
        _import_ray()


def make(
    fn: Callable[..., Any],
    *,
    jobs: int = 1,
    ray: str | None = None,
    gpus_per_program: float = 0.0,
    stop=None,
    run_dir_arg: int | None = None,
):
    """The executor of ``fn``'s jobs (module docstring).  ``run_dir_arg``: the index of the
    job argument that is its run directory (where a Ray task writes ``task.json``)."""
    if ray is None:
        return processes.Pool(fn, workers=jobs, stop=stop)
    return RayPool(
        fn, address=ray, gpus_per_program=gpus_per_program, stop=stop, run_dir_arg=run_dir_arg
    )


def _import_ray():
    try:
        import ray
    except ImportError:
        raise MissingRay() from None
    return ray


def _task(fn, args: tuple, run_dir_arg: int | None):
    """A Ray task's body: says where it runs, then runs the job.  Ray cancels a task with a
    SIGINT to its worker: here that is the job's stop flag, so a cancelled program stops
    after its chunk and checkpoints, as a run does on SIGTERM."""
    if run_dir_arg is not None:
        run_dir = Path(args[run_dir_arg])
        run_dir.mkdir(parents=True, exist_ok=True)
        state = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        try:
            import ray

            state["node"] = ray.get_runtime_context().get_node_id()
        except Exception:
            pass
        run_dir_lib.atomic_write_text(run_dir / TASK_FILE, json.dumps(state) + "\n")
    from jaxnigt.run import signals

    with signals.stop_on_signals((signal.SIGINT,)) as flag:
        return fn(*args, stop=flag)


class RayPool(processes.JobQueue):
    """:class:`~jaxnigt.run.processes.Pool`'s interface over Ray tasks (module docstring)."""

    def __init__(
        self,
        fn,
        *,
        address: str,
        gpus_per_program: float = 0.0,
        stop=None,
        max_retries: int = MAX_RETRIES,
        run_dir_arg: int | None = None,
    ):
        ray = self.ray = _import_ray()
        if gpus_per_program < 0:
            raise ValueError(f"gpus_per_program: got {gpus_per_program}; expected >= 0")
        if not ray.is_initialized():
            _connect(ray, address)
        options: dict[str, Any] = {"num_cpus": 1, "max_retries": max_retries}
        if gpus_per_program:
            options.update(num_gpus=gpus_per_program, runtime_env={"env_vars": dict(GPU_ENV)})
        super().__init__()
        self.remote = ray.remote(**options)(_task)
        self.fn, self.stop, self.run_dir_arg = fn, stop, run_dir_arg
        total = ray.cluster_resources()
        per = total.get("GPU", 0) / gpus_per_program if gpus_per_program else total.get("CPU", 1)
        self.slots = max(1, int(per))
        self.running: dict[Any, int] = {}  # object ref -> job id
        self.done: set[int] = set()

    def wait(self) -> list[int]:
        """Blocks until a task finishes; returns the ids finished since the last call."""
        if not self.busy:
            raise ValueError("wait: no job is queued or running")
        while True:
            while self.queued and len(self.running) < self.slots:
                i = self.queued.pop(0)
                self.running[self.remote.remote(self.fn, self.jobs[i], self.run_dir_arg)] = i
            if self.stop is not None and self.stop.requested:
                self._cancel()
                from jaxnigt.run import signals

                raise signals.Interrupted(self.stop.signum, "the running programs", 0)
            ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=POLL_S)
            for ref in ready:
                i = self.running.pop(ref)
                try:
                    self.ray.get(ref)
                except Exception as e:
                    self._cancel()
                    raise _cause(e) from processes.JobError(f"in {self.names[i]}: {e}")
                self.done.add(i)
            new = sorted(self.done - self.reported)
            if new:
                self.reported.update(new)
                return new

    def _cancel(self) -> None:
        """Cancels the running tasks and waits for them to checkpoint (at most
        :data:`CANCEL_WAIT_S`); nothing queued starts."""
        refs = list(self.running)
        for ref in refs:
            self.ray.cancel(ref)
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_S)
        self.running.clear()
        self.queued.clear()

    def close(self) -> None:
        self._cancel()


def _connect(ray, address: str) -> None:
    """Joins the cluster at ``address``; ``auto`` joins the one ``ray start`` began on this
    machine, else starts a local one for this command (it ends with it)."""
    if address != "auto":
        try:
            ray.init(address=address, log_to_driver=True)
        except ConnectionError as e:
            raise ExecutorError(
                f"cannot join the Ray cluster at {address!r}: {str(e).splitlines()[0]}"
            ) from None
        return
    try:
        ray.init(address="auto", log_to_driver=True)
    except ConnectionError:
        ray.init(log_to_driver=True, include_dashboard=False)


def _cause(error: Exception) -> Exception:
    """The job's own exception inside Ray's wrapper (a task error carries it as ``cause``)."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, Exception) else error
