"""Child processes of tests (not a test module itself).

A child's stdout and stderr go to files, never to pipes: a pipe that nobody reads while the
test waits (for a checkpoint, for a second child) fills at 64 KiB and blocks the child until
the timeout. On a timeout the child is killed and the test fails with the tail of what it
wrote, so a slow or stuck child says why.

Timeouts are sized for an empty compilation cache on a loaded 2-core machine (CI): a child
that compiles a few small programs takes well under a minute there, so :data:`TIMEOUT` only
catches a child that hangs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: seconds a child may take before the test fails with its output's tail
TIMEOUT = 900


def child_env(**extra: str) -> dict[str, str]:
    """The test's environment for a child: the suite's compilation cache, plus ``extra``.

    Both the ``jaxnigt`` command (``JAXNIGT_CACHE_DIR``) and a plain ``python -c`` child that
    imports jax (``JAX_COMPILATION_CACHE_DIR``) use it, so a child loads what the test process
    compiled before it instead of compiling it again (the cache key holds the program and
    the XLA flags: a different program or device count compiles anew)."""
    cache = os.environ.get("JAXNIGT_TEST_CACHE", "")
    env = {**os.environ, "JAXNIGT_CACHE_DIR": cache}
    if cache:
        env["JAX_COMPILATION_CACHE_DIR"] = cache
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # as tests/conftest.py
    env.update(extra)
    return env


def with_tests_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with tests/ first on ``PYTHONPATH``: a ``python -c`` child imports
    :mod:`tasks` (the test-only environments) from there."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join([str(TESTS), *rest])}


def cli_argv(*args: str) -> list[str]:
    """``jaxnigt ARGS`` in a child, with the test-only environments of tasks.py registered."""
    return [sys.executable, str(TESTS / "child_cli.py"), *args]


class Child:
    """A started child process whose output goes to ``log_dir/name.{out,err}``."""

    def __init__(self, argv, log_dir: Path, *, name: str = "child", env=None, cwd=None):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                argv, env=env if env is not None else child_env(), cwd=cwd,
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, text=True,
            )  # fmt: skip

    @property
    def stdout(self) -> str:
        return self.out_path.read_text()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def poll(self) -> int | None:
        return self.proc.poll()

    def send_signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def tail(self, chars: int = 3000) -> str:
        return f"--- stdout ---\n{self.stdout[-chars:]}\n--- stderr ---\n{self.stderr[-chars:]}"

    def wait(self, timeout: float = TIMEOUT) -> int:
        """The exit code; kills the child and fails the test (with its output) on a timeout."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"child {self.proc.args!r} ran past {timeout} s\n{self.tail()}")


def run(argv, log_dir: Path, *, name: str = "child", env=None, timeout: float = TIMEOUT):
    """Runs a child to its end: ``(returncode, stdout, stderr)``."""
    child = Child(argv, log_dir, name=name, env=env)
    code = child.wait(timeout)
    return code, child.stdout, child.stderr


# --------------------------------------------- jobs of jaxnigt.run.processes (test_processes.py)


def write_job(path: str, text: str, *, stop=None) -> None:
    """Writes ``text`` and the process id to ``path``."""
    del stop
    Path(path).write_text(f"{text} {os.getpid()}")


def after_job(path: str, before: str | None, *, stop=None) -> None:
    """Writes ``path`` once the file ``before`` exists (None: at once); :data:`TIMEOUT` only
    catches one that never comes."""
    import time

    del stop
    deadline = time.monotonic() + TIMEOUT
    while before is not None and not Path(before).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: {before} did not come within {TIMEOUT} s")
        time.sleep(0.05)
    Path(path).write_text("done")


def failing_job(path: str, *, stop=None) -> None:
    del stop
    raise ValueError(f"bad job {Path(path).name}")


def waiting_job(path: str, *, stop=None) -> None:
    """Marks ``path`` as started, then waits for its stop flag and stops as a run does
    (``signals.Interrupted``); :data:`TIMEOUT` only catches a flag that never comes."""
    import time

    from jaxnigt.run import signals

    Path(path).write_text("started")
    deadline = time.monotonic() + TIMEOUT
    while not stop.requested:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: no stop within {TIMEOUT} s")
        time.sleep(0.05)
    Path(path).write_text("stopped")
    raise signals.Interrupted(stop.signum, Path(path).name, 1)


if __name__ == "__main__":  # a parent of waiting jobs, for test_processes.py (to kill it)
    from jaxnigt.run import processes

    processes.run_all(waiting_job, [(p,) for p in sys.argv[1:]], workers=len(sys.argv) - 1)
