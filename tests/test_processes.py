"""Tests for jaxnigt.run.processes: jobs in child processes (their files, their pids), the
in-process path, a failing job's exception raised again in the parent, and a stop flag
forwarded to the children as SIGTERM.  The jobs live in ``tests/children.py``."""

import os
import signal
import sys
import threading
import time

import children
import pytest

from jaxnigt.run import processes, signals


def test_jobs_run_in_child_processes_and_every_one_finishes(tmp_path):
    paths = [tmp_path / f"job{i}" for i in range(3)]
    processes.run_all(
        children.write_job, [(str(p), f"job{i}") for i, p in enumerate(paths)], workers=2
    )
    texts = [p.read_text().split() for p in paths]
    assert [t[0] for t in texts] == ["job0", "job1", "job2"]
    pids = {int(t[1]) for t in texts}
    assert os.getpid() not in pids and len(pids) == 3  # a fresh process per job


def test_a_pool_returns_each_job_as_it_finishes(tmp_path):
    """``Pool.wait``: the job submitted second, and quicker, comes back first; a job submitted
    after that runs on the freed worker while the first still does (the first waits for the
    last's file, so it could not finish otherwise).  Which of those two the parent sees end
    first is a race (the last writes its file, then still has to exit), so only the pair is
    checked."""
    path = {name: str(tmp_path / name) for name in ("slow", "fast", "late")}
    with processes.Pool(children.after_job, workers=2) as pool:
        slow = pool.submit((path["slow"], path["late"]), "slow")
        fast = pool.submit((path["fast"], None), "fast")
        assert pool.wait() == [fast]
        late = pool.submit((path["late"], None), "late")
        done = pool.wait()
        done += [] if len(done) == 2 else pool.wait()
        assert sorted(done) == [slow, late] and not pool.busy
    with pytest.raises(ValueError, match="no job is queued or running"):
        pool.wait()


def test_one_worker_runs_the_jobs_here_in_order(tmp_path):
    order = []

    def job(name, *, stop=None):
        order.append((name, stop))

    flag = signals.StopFlag()
    processes.run_all(job, [("a",), ("b",)], workers=1, stop=flag)
    assert order == [("a", flag), ("b", flag)]
    with pytest.raises(ValueError, match="workers: got 0"):
        processes.run_all(job, [("a",)], workers=0)


def test_a_failing_job_raises_its_exception_here_with_the_childs_traceback(tmp_path):
    jobs = [(str(tmp_path / "ok"), "fine"), (str(tmp_path / "bad"),)]
    with pytest.raises(ValueError, match="bad job bad") as caught:
        processes.run_all(_either, jobs, workers=2, names=["ok", "bad"])
    cause = caught.value.__cause__
    assert isinstance(cause, processes.JobError) and "in bad:" in str(cause)
    assert "failing_job" in str(cause)  # the child's traceback


def _either(*args, stop=None):
    """(path, text): a job that writes; (path,): one that fails."""
    if len(args) == 2:
        children.write_job(*args, stop=stop)
    else:
        children.failing_job(*args, stop=stop)


def test_a_stop_reaches_the_running_jobs_and_starts_no_more(tmp_path):
    paths = [tmp_path / f"wait{i}" for i in range(3)]
    flag = signals.StopFlag()

    def stop_when_both_started():
        deadline = time.monotonic() + children.TIMEOUT
        while not (paths[0].exists() and paths[1].exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
        flag.signum = signal.SIGTERM

    watcher = threading.Thread(target=stop_when_both_started, daemon=True)
    watcher.start()
    with pytest.raises(signals.Interrupted) as caught:
        processes.run_all(children.waiting_job, [(str(p),) for p in paths], workers=2, stop=flag)
    watcher.join()
    assert caught.value.signum == signal.SIGTERM and caught.value.exit_status == 143
    assert caught.value.chunks == 1  # the child's own report, pickled across
    assert paths[0].read_text() == paths[1].read_text() == "stopped"
    assert not paths[2].exists()  # never started


def test_children_stop_when_their_parent_is_killed(tmp_path):
    """A parent killed by SIGKILL cannot forward a stop: its children see it gone and stop
    themselves (after their chunk) instead of running on unwatched."""
    paths = [tmp_path / f"orphan{i}" for i in range(2)]
    parent = children.Child(
        [sys.executable, children.__file__, *map(str, paths)], tmp_path, name="parent"
    )
    deadline = time.monotonic() + children.TIMEOUT
    while not all(p.exists() for p in paths):
        assert parent.poll() is None and time.monotonic() < deadline, parent.tail()
        time.sleep(0.05)
    parent.kill()  # SIGKILL
    while not all(p.read_text() == "stopped" for p in paths):
        assert time.monotonic() < deadline, [p.read_text() for p in paths]
        time.sleep(0.05)
