"""Stopping on signals (jaxnigt.run.signals): the first asks for a checkpoint and a stop, the
second exits at once, even when both arrive while the main thread is inside a long call."""

import os
import signal
import subprocess
import sys
import time

from jaxnigt.run import signals

CHILD = """
import sys, time
import numpy as np
from jaxnigt.run import signals

values = np.random.default_rng(0).random(20_000_000)
with signals.stop_on_signals() as stop:
    print("ready", flush=True)
    np.sort(values)  # seconds inside one C call: the Python-level handler waits for it
    time.sleep(20)
    print("survived", stop.requested, stop.received, flush=True)
"""


def test_two_signals_during_one_long_call_exit_at_once(tmp_path):
    """Two SIGTERMs 50 ms apart while the main thread sorts: a handler that runs between
    bytecodes sees them as one; the deliveries counted on the wakeup fd are two."""
    log = tmp_path / "child.err"
    with open(log, "w") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=err, text=True
        )
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        child.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        try:
            code = child.wait(timeout=15)  # well before the 20 s sleep ends
        finally:
            child.kill()
    assert code == 128 + signal.SIGTERM, log.read_text()
    assert "survived" not in child.stdout.read()
    assert log.read_text().count("finishing the current chunk") == 1


def test_one_signal_asks_once_and_the_previous_state_comes_back(capsys):
    before = signal.getsignal(signal.SIGINT), signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before[1])
    with signals.stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.time() + 5
        while stop.received < 1 and time.time() < deadline:  # the watcher's read
            time.sleep(0.01)
        assert stop.requested and stop.signum == signal.SIGINT and stop.received == 1
    assert signal.getsignal(signal.SIGINT) is before[0]
    assert signal.set_wakeup_fd(-1) == before[1]
    signal.set_wakeup_fd(before[1])
    assert capsys.readouterr().err.count("SIGINT: finishing the current chunk") == 1
