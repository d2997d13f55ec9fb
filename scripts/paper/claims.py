"""The paper's claims, each declared once: the registry every edition, page and the GPU run
read.

A :class:`Claim` declares its name, its reference method and kind (``"ahead"`` or ``"tie"``,
the kinds of :func:`jaxnigt.analysis.verdicts.verdict`), the baselines it is about (None:
every other method of the run), its primary statistic (the third and fourth editions', fixed
before their runs), the methods the third and later editions run, the keys of the cluster
settings that test it (scenario ``<env>_<key>``) and its rows of the opening table of
docs/results.md (:class:`Row`).  :data:`GROWTH` is the lead-growth claim, which compares two
settings of one environment.  (The second edition's comparisons that were no paper claim
are in its frozen page, docs/results/second_edition.md.)

The editions build their scenarios from a setting's key (:meth:`paper.scenarios.Scenario.of`)
and find its claim here (:func:`claim_of`); the pages read the rows from here.  Every
interval, outcome and verdict is the library's (:mod:`jaxnigt.analysis`); nothing here
computes one.
"""

from __future__ import annotations

import dataclasses

from jaxnigt.analysis import verdicts

HOMOGENEOUS = ("rennala_nigt", "sync_nigt", "afedpg")
HETEROGENEOUS = ("malenia_nigt", "afedpg", "rennala_nigt")

_N10_SQRT_DIM = r"$n = 10$, $h_i = \sqrt{i}$, $\kappa_i = \sqrt{i}\,d^{1/4}$"


@dataclasses.dataclass(frozen=True)
class Row:
    """A row of the paper's experiment table, as the opening table of docs/results.md shows it:
    its name, its setting, what the paper observed, and the scenarios (and lead-growth claims,
    ``<env>_gap``: :data:`GROWTH`) that test it."""

    name: str
    setting: str
    paper: str
    scenarios: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Claim:
    """What a scenario tests: ``reference`` ``kind`` ``baselines`` by ``statistic``; the
    fields in full: the module docstring."""

    name: str
    reference: str
    kind: str
    baselines: tuple[str, ...] | None = None
    statistic: str = "average"
    methods: tuple[str, ...] = ()  # the methods the third and later editions run
    settings: tuple[str, ...] = ()  # the keys of its cluster settings
    rows: tuple[Row, ...] = ()


@dataclasses.dataclass(frozen=True)
class Growth:
    """The lead-growth claim: ``reference``'s lead over each of ``baselines`` grows from
    ``<env>_<settings[0]>`` to ``<env>_<settings[1]>`` (more communication), on each of
    ``envs``."""

    reference: str
    baselines: tuple[str, ...]
    settings: tuple[str, str]
    envs: tuple[str, ...]


GROWTH = Growth(
    "rennala_nigt", ("sync_nigt", "afedpg"), ("sqrt", "sqrt_dim"), ("point_mass", "reacher")
)

# The paper's claims.  Their statistics are the third and fourth editions' primary ones (why:
# docs/results.md, "The third edition's statistics"): a claim about speed by a statistic of
# speed.
_PAPER = (
    Claim(
        "equal",
        "rennala_nigt",
        "tie",
        ("sync_nigt",),
        methods=HOMOGENEOUS,
        settings=("equal",),
        rows=(
            Row(
                "Equal compute and communication",
                r"$n = 10$, $h_i = 1$, $\kappa_i = 0$",
                "the three methods perform about the same",
                ("point_mass_equal", "reacher_equal"),
            ),
        ),
    ),
    Claim(
        "fastest",
        "rennala_nigt",
        "ahead",
        statistic="time_to_80",
        methods=HOMOGENEOUS,
        settings=("sqrt", "sqrt_dim", "exponential", "straggler", "n100", "n100_decreasing"),
        rows=(
            Row(
                "Heterogeneous compute and communication",
                r"$n = 10$, $h_i = \sqrt{i}$, $\kappa_i = \sqrt{i}$",
                "Rennala NIGT converges faster",
                ("point_mass_sqrt", "reacher_sqrt"),
            ),
            Row(
                "More expensive communication",
                _N10_SQRT_DIM,
                "Rennala NIGT is the most robust; its lead grows with the communication cost",
                ("point_mass_sqrt_dim", "point_mass_gap", "reacher_sqrt_dim", "reacher_gap"),
            ),
            Row(
                "Other environments",
                _N10_SQRT_DIM,
                "a clear lead on Reacher, smaller gaps on Walker2d and Hopper",
                ("reacher_sqrt_dim", "hopper_sqrt_dim", "walker2d_sqrt_dim"),
            ),
            Row(
                "$n = 100$ workers",
                r"$n = 100$, $h_i = \sqrt{i}$, $\kappa_i = \sqrt{i}\,d^{1/4}$",
                "Rennala NIGT still fastest with heterogeneous times and costly communication",
                ("point_mass_n100", "reacher_n100"),
            ),
        ),
    ),
    Claim(
        "hetero",
        "malenia_nigt",
        "ahead",
        ("afedpg",),
        statistic="second_half",
        methods=HETEROGENEOUS,
        settings=("hetero",),
        rows=(
            Row(
                "Heterogeneous environments",
                r"$n = 2$, $h = (1, 10)$, $\kappa = 0$, one worker's observations negated",
                "Malenia NIGT clearly above AFedPG",
                ("point_mass_hetero", "reacher_hetero"),
            ),
        ),
    ),
)


# Beyond the paper: workers that disconnect (pre-registered in docs/results/fourth.md,
# 2026-12-05; scenarios: paper.outages).  The statistics are those of the same scenario's
# claim without outages: a claim about speed by a statistic of speed.
_OUTAGES = (
    Claim(
        "outages",
        "rennala_nigt",
        "ahead",
        statistic="time_to_80",
        methods=HOMOGENEOUS,
        settings=("sqrt_dim_outages", "sqrt_dim_outages_free"),
    ),
    Claim(
        "hetero_outages",
        "malenia_nigt",
        "ahead",
        ("afedpg",),
        statistic="second_half",
        methods=("malenia_nigt", "afedpg"),
        settings=("hetero_outages",),
    ),
)


_HETERO_DOWN = (
    r"$n = 2$, $h = (1, 10)$, $\kappa = 0$, sign_flip; the slow worker down about 10 % of the "
    "time in bouts of mean 150 (2.5 Malenia rounds)"
)
#: The outage rows: beyond the paper's table, so a table of their own on the results page
#: (and a Holm family of their own); ``paper`` holds what the clock predicted before the
#: runs (docs/results/fourth.md, 2026-12-05): each method's slowdown over the budget.
OUTAGE_ROWS = (
    Row(
        "A worker that disconnects",
        f"{_N10_SQRT_DIM}; each worker down about 10 % of the time in bouts of mean 75 (2.5 "
        "Sync rounds); `down_exchange: wait`",
        "Rennala NIGT 3.60× (reacher 3.22×), Sync NIGT 3.71× (3.26×), AFedPG 1.78× (1.63×): "
        "both round methods stall in the AllReduce over all ten workers",
        ("point_mass_sqrt_dim_outages", "reacher_sqrt_dim_outages"),
    ),
    Row(
        "A worker that stops computing",
        "the same outages; `down_exchange: free` (a down worker still exchanges)",
        "Rennala NIGT 1.02× (1.03×), Sync NIGT 2.55× (2.37×), AFedPG 1.00× (1.00×): Sync "
        "NIGT stalls, Rennala NIGT goes on",
        ("point_mass_sqrt_dim_outages_free", "reacher_sqrt_dim_outages_free"),
    ),
    Row(
        "Heterogeneous environments, the slow worker down",
        _HETERO_DOWN,
        "Malenia NIGT 1.10× fewer rounds (pre-registered: 1.07×, the clock at the default "
        "buffer, which overflows), AFedPG 1.01×: Malenia NIGT's lead shrinks a little",
        ("point_mass_hetero_outages",),
    ),
)


def _by_name(claims) -> dict[str, Claim]:
    found = {c.name: c for c in claims}
    keys = [key for c in claims for key in c.settings]
    if len(found) != len(claims) or len(set(keys)) != len(keys):
        raise ValueError("paper.claims: a claim's name or a setting's key is declared twice")
    return found


#: Every claim by name (the ``claim`` of an analysis JSON).
CLAIMS = _by_name((*_PAPER, *_OUTAGES))
#: The claims the third and fourth editions test.
THIRD_CLAIMS = {name: c for name, c in CLAIMS.items() if c.methods}
#: The opening table's rows, in the table's order.
ROWS = tuple(row for c in CLAIMS.values() for row in c.rows)
_SETTINGS = {key: c for c in CLAIMS.values() for key in c.settings}


def claim_of(key: str) -> Claim:
    """The claim that the cluster setting ``key`` tests."""
    if key not in _SETTINGS:
        raise KeyError(f"paper.claims: no claim declares the setting {key!r}")
    return _SETTINGS[key]


def row_scenarios(env: str) -> tuple[str, ...]:
    """The scenarios on ``env`` that the opening table's rows name, in the table's order
    (lead-growth entries left out)."""
    named = [s for row in ROWS for s in row.scenarios]
    return tuple(dict.fromkeys(s for s in named if s.removeprefix(f"{env}_") in _SETTINGS))


def row(a: dict, baseline: str) -> dict:
    """A comparison of the analysis JSON ``a`` with its outcome (JSON written before
    outcomes were stored: derived from the average-return interval by the same rule)."""
    c = dict(a["comparisons"][baseline])
    if "outcome" not in c:
        c["outcome"] = verdicts.outcome(c["average_return_difference"], identical=c["identical"])
    return c
