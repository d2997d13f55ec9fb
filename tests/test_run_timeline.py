"""A finished run's first rounds replayed from its run directory (jaxnigt.run.timeline):
the round ends and counts are the run's own, read back from its metrics.csv."""

import csv

import numpy as np
import pytest

from jaxnigt import cli
from jaxnigt.run import timeline

CONFIG = """
name: replay
algorithms: [rennala_nigt, afedpg]
seeds: 2
budget: 15.0
env: {name: point_mass}
cluster: {n: 3, h: sqrt, kappa: 0.5, noise: exponential}
hparams: {M: 4, M_init: 6, learning_rate: 0.05, eta: 0.3}
eval: {every: 4, episodes: 2}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("replay")
    (root / "c.yaml").write_text(CONFIG)
    assert cli.main(["run", str(root / "c.yaml"), "--out", str(root / "run"), "--no-progress"]) == 0
    return root / "run"


def test_the_replayed_rounds_are_the_runs_rounds(run):
    """Round 0 collects M_init = 6 gradients, later rounds M = 4; each round ends where the
    run's metrics.csv says seed 0's step ended."""
    tl = timeline.run_timeline(run, rounds=4)
    rows = [r for r in csv.DictReader((run / "metrics.csv").open())]
    steps = [r for r in rows if r["algorithm"] == "rennala_nigt" and r["seed"] == "0"]
    steps = [r for r in steps if int(r["round"]) >= 1][:4]
    np.testing.assert_allclose(tl.round_end, [float(r["sim_time"]) for r in steps], rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(tl.counts).sum(axis=1), [6, 4, 4, 4])
    assert tl.exact and tl.rule == "rennala"


def test_the_command_draws_it_and_refuses_what_it_cannot(run, capsys):
    assert cli.main(["plot", str(run), "--timeline", "--rounds", "3"]) == 0
    assert (run / "timeline.png").stat().st_size > 0
    capsys.readouterr()
    assert cli.main(["plot", str(run), "--timeline", "--algorithm", "afedpg"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxnigt: error: --algorithm: got 'afedpg'") and "rennala_nigt" in err
    assert cli.main(["plot", str(run), "--timeline", "--rounds", "0"]) == 2
    assert "--rounds: got 0" in capsys.readouterr().err
