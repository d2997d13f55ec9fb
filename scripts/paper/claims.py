"""The paper's claims: one :class:`Claim` type, each edition's claims, and their verdicts.

A claim names its reference method, its kind (``"ahead"`` or ``"tie"``, the kinds of
:func:`jaxnigt.analysis.verdicts.verdict`; None for a comparison that is no paper claim), the
baselines it is about (None: every other method of the run) and its primary statistic,
fixed before the runs (:data:`jaxnigt.analysis.stats.STATISTICS`).  Every interval, outcome
and verdict is the library's (:mod:`jaxnigt.analysis`); nothing here computes one.
"""

from __future__ import annotations

import dataclasses

from jaxnigt.analysis import verdicts


@dataclasses.dataclass(frozen=True)
class Claim:
    """What a scenario tests: ``reference`` ``kind`` ``baselines`` by ``statistic``."""

    reference: str
    kind: str | None
    baselines: tuple[str, ...] | None = None
    statistic: str = "average"

    def text(self, comparisons) -> str:
        """The claim in words, e.g. ``rennala_nigt ahead of sync_nigt, afedpg``."""
        if self.kind is None:
            return "– (not a paper claim)"
        names = ", ".join(self.baselines or comparisons)
        return f"{self.reference} {'ahead of' if self.kind == 'ahead' else 'tied with'} {names}"


# The second edition: every claim by the average return over the budget.
CLAIMS = {
    "equal": Claim("rennala_nigt", "tie", ("sync_nigt",)),
    "fastest": Claim("rennala_nigt", "ahead"),
    "hetero": Claim("malenia_nigt", "ahead", ("afedpg",)),
    "actor_critic": Claim("rennala_nigt", None),
    # SEED RL against IMPALA (per-step messages against one per trajectory) and Rennala NIGT
    "central_inference": Claim("seed_rl", None),
    # the asynchronous baselines beyond the paper, each against Rennala NIGT
    "beyond_paper": Claim("rennala_nigt", None),
}
# The third edition's primary statistics (why: docs/results.md, "The third edition's
# statistics"): a claim about speed by a statistic of speed.
THIRD_CLAIMS = {
    "fastest": dataclasses.replace(CLAIMS["fastest"], statistic="time_to_80"),
    "equal": CLAIMS["equal"],
    "hetero": dataclasses.replace(CLAIMS["hetero"], statistic="second_half"),
}
# The lead-growth claim: the reference's lead over each of these grows from <env>_sqrt to
# <env>_sqrt_dim (more communication).
GAP = ("sqrt", "sqrt_dim")
GAP_BASELINES = ("sync_nigt", "afedpg")


def row(a: dict, baseline: str) -> dict:
    """A comparison of the analysis JSON ``a`` with its outcome (JSON written before
    outcomes were stored: derived from the average-return interval by the same rule)."""
    c = dict(a["comparisons"][baseline])
    if "outcome" not in c:
        c["outcome"] = verdicts.outcome(c["average_return_difference"], identical=c["identical"])
    return c


def claim_verdict(a: dict) -> dict | None:
    """``{"verdict", "needed_seeds"}`` of a second-edition scenario's claim over its
    baselines (the analysis JSON ``a``); None when the scenario tests no claim."""
    claim = CLAIMS[a["claim"]]
    if claim.kind is None:
        return None
    rows = [row(a, b) for b in claim.baselines or a["comparisons"]]
    return verdicts.verdict(rows, claim.kind)
