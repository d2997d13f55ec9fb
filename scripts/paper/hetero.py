"""Heterogeneous environments with the 2026 rival: the rows registered in
docs/results/hetero.md before any run.

    python scripts/paper hetero run [ROW ...]      # tune, then the seed blocks the rule needs
    python scripts/paper hetero store [ROW ...]    # the finished runs into docs/results/hetero/
    python scripts/paper hetero analyze [ROW ...]  # the registered comparisons, from the store

Malenia NIGT against Ringleader NIGT (the paper's cycles) and AFedPG by ``second_half``; the
machinery is :mod:`paper.rows`.
"""

from __future__ import annotations

from paper.rows import Rows

POINT_MASS = ("--lr-exp=-12:-1", "--eta", "0.001,0.01,0.1", "--M", "20,30,50")
REACHER = ("--lr-exp=-12:-5", "--eta", "0.1", "--M", "20,30,50")
SPEC = Rows(
    name="hetero",
    reference="malenia_nigt",
    baselines=("ringleader_nigt", "afedpg"),
    statistic="second_half",
    rows={
        "point_mass_rivals_n2": (POINT_MASS, 40),
        "point_mass_rivals_n10": (POINT_MASS, 40),
        "reacher_rivals_n10": (REACHER, 20),
        "reacher_rivals_n2": (REACHER, 20),
    },
    families={
        "point_mass": ("point_mass_rivals_n2", "point_mass_rivals_n10"),
        "reacher": ("reacher_rivals_n2", "reacher_rivals_n10"),
    },
    beside=("time_to_80", "worker_time_to_80"),
)
