"""Heavy-tailed compute times: the rows registered in docs/results/heavy.md before any run.

    python scripts/paper heavy run [ROW ...]      # tune, then the seed blocks the rule needs
    python scripts/paper heavy store [ROW ...]    # the finished runs into docs/results/heavy/
    python scripts/paper heavy analyze [ROW ...]  # the registered comparisons, from the store

MindFlayer NIGT against Rennala NIGT and Sync NIGT by ``time_to_80``; the machinery is
:mod:`paper.rows`.
"""

from __future__ import annotations

from paper.rows import Rows

PAPER_GRID = ("--lr-exp=-10:-1", "--eta", "0.001,0.01,0.1", "--M", "20,30,50")
SPEC = Rows(
    name="heavy",
    reference="mindflayer_nigt",
    baselines=("rennala_nigt", "sync_nigt"),
    statistic="time_to_80",
    rows={
        "point_mass_heavy": (PAPER_GRID, 40),
        "point_mass_heavy_cancel": (PAPER_GRID, 40),
        "reacher_heavy": (("--lr-exp=-10:-5", "--eta", "0.1", "--M", "20,30,50"), 20),
    },
    families={
        "primary": ("point_mass_heavy", "reacher_heavy"),
        "model": ("point_mass_heavy_cancel",),
    },
    beside=("worker_time_to_80",),
)
