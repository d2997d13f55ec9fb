"""The paper's scenarios: one :class:`Scenario` type, the base config and the cluster overlays.

A scenario is an environment, cluster ``overrides`` over :func:`base`, the cluster setting
whose claim it tests (:mod:`paper.claims`), its report seeds and the cluster models it runs
under; the third and later editions size its budget from a first ``look``.
"""

from __future__ import annotations

import dataclasses

from jaxnigt.algorithms import traits
from jaxnigt.config import merge
from paper import claims

# The cluster models (link, allreduce); the first is the default.
DEFAULT_MODEL = ("shared", "all")
MODELS = (DEFAULT_MODEL, ("shared", "contributors"), ("independent", "all"))
MODELS += (("independent", "contributors"),)
# The cluster-model variants a scenario may need: the option and its value.  A variant's
# tuning retunes only the algorithms that option affects (their ``Traits.cluster_options``).
VARIANTS = {"independent": ("link", "independent"), "contributors": ("allreduce", "contributors")}

EQUAL = {"cluster": {"h": "equal", "kappa": 0.0, "scale_by_dim": False}}
SQRT = {"cluster": {"scale_by_dim": False}}
EXPONENTIAL = {"cluster": {"noise": "exponential"}}
STRAGGLER = {"cluster": {"noise": "straggler:0.1:10"}}
N100 = {"cluster": {"n": 100}}
DECREASING = {"cluster": {"n": 100, "h": "decreasing"}}
HETERO = {
    "env": {"heterogeneous": "sign_flip"},
    "cluster": {"n": 2, "h": [1.0, 10.0], "kappa": 0.0, "scale_by_dim": False},
    "eval": {"episodes": 16},
}
LOCOMOTION = {"env": {"horizon": 1000, "solver_iterations": 1, "ls_iterations": 4}}


def base(env: str, extra: dict | None = None) -> dict:
    """Every scenario's config before its overrides: n = 10, h_i = √i, κ_i = √i·d^{1/4}."""
    raw = {
        "env": {"name": env},
        "cluster": {"n": 10, "h": "sqrt", "kappa": "sqrt", "scale_by_dim": True},
        "hparams": {"M": 20, "M_init": 20, "gamma": 0.99, "eta": 0.1},
        "eval": {"every": 25, "episodes": 8},
        "checkpoint_every": 0,
    }
    return merge(raw, extra or {})


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A scenario of the claim of ``setting`` (:func:`paper.claims.claim_of`): ``env`` with the
    cluster ``overrides`` over :func:`base`.

    ``seeds`` report seeds from 0, under each of ``models``.  The third and fourth editions
    size the budget from a first look at ``look`` and may add the matched-batch Sync NIGT
    (``sensitivity``).
    ``only``: a subset of the claim's algorithms (a smoke test's).
    """

    name: str
    env: str
    overrides: dict
    setting: str
    seeds: int = 5
    models: tuple[tuple[str, str], ...] = (DEFAULT_MODEL,)
    look: float | None = None
    sensitivity: bool = False
    only: tuple[str, ...] = ()

    @classmethod
    def of(cls, env: str, setting: str, overrides: dict, **fields) -> Scenario:
        """The scenario ``<env>_<setting>``."""
        return cls(f"{env}_{setting}", env, overrides, setting, **fields)

    @property
    def claim(self) -> str:
        """The name of the claim it tests (:data:`paper.claims.CLAIMS`)."""
        return claims.claim_of(self.setting).name

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The claim's methods (the third and fourth editions' runs)."""
        every = claims.claim_of(self.setting).methods
        return tuple(a for a in every if not self.only or a in self.only)

    def model_dir(self, model: tuple[str, str]) -> str:
        return self.name if tuple(model) == DEFAULT_MODEL else f"{self.name}__{model[0]}_{model[1]}"


def affected(algorithms, variant: str | None) -> list[str]:
    """The algorithms whose runs a cluster-model ``variant`` changes (all without one)."""
    if variant is None:
        return list(algorithms)
    return [a for a in algorithms if VARIANTS[variant][0] in traits(a).cluster_options]


def parse_models(text: str) -> list[tuple[str, ...]]:
    """``--models shared/all,independent/all``: (link, allreduce) pairs."""
    return [tuple(m.split("/")) for m in text.split(",")]
