"""The tuning grid: its defaults, the shape hyperparameters it may tune, and the flags that
give it (``--lr-exp``, ``--eta``, ``--M``, ``--msync-m``, ``--ringmaster-R``,
``--tune-seeds``). :mod:`jaxnigt.studies.tuning` describes the protocol."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from jaxnigt.analysis import stats

DEFAULT_LR_EXP = tuple(range(-10, 0))
DEFAULT_ETA = (0.001, 0.01, 0.1)
DEFAULT_TUNE_SEEDS = (100, 101)
MAX_EXTENSIONS = 4
TIE_TOL = 1e-6
SCORED = {
    "average": "the average return over [0, budget]",
    "second_half": "the return averaged over [budget/2, budget]",
    **{
        s: f"the time to the {round(100 * stats.fraction(s))} % target (pooled over the "
        "initial grids), a seed that does not reach it counting as the budget"
        for s in stats.TIME_STATISTICS
    },
}
TUNED, TABLE, RECORD = "tuned.yaml", "tuning.json", "tune.json"
TIE_RULE = (
    "scores within 1e-6·max(1, |best|) tie: (time statistics: the higher average return, then) "
    "the smaller α, then the larger η, then the smaller value of each tuned shape (M, msync_m, "
    "ringmaster_R)"
)
#: The printed table of a report (``jaxnigt tune``, the results pipeline ``scripts/paper``).


class TuningError(ValueError):
    """A bad tuning request: ``param`` names what is at fault in this module's words (a
    :class:`Grid` field, a parameter of :func:`tune`, or a config field such as ``budget``),
    ``reason`` says what is wrong, and the message is ``param: reason``.  The command line
    puts its flag for ``param`` in front instead."""

    def __init__(self, reason: str, *, param: str | None = None):
        super().__init__(f"{param}: {reason}" if param else reason)
        self.param, self.reason = param, reason


class Shape(NamedTuple):
    """A shape-changing hyperparameter ``jaxnigt tune`` can tune (a ``Traits.tuned_shapes``
    name): each value is its own compiled program."""

    keys: tuple[str, ...]  # the ``hparams`` keys one value sets
    what: str  # what it is, for the command line's help


#: The shape hyperparameters, in the tie rule's order (the command line's flags:
#: ``jaxnigt.cli.grids``).
SHAPES: dict[str, Shape] = {
    "M": Shape(("M", "M_init"), "M = M_init values for Rennala/Malenia"),
    "msync_m": Shape(("msync_m",), "workers an m-synchronous round waits for (msync_nigt)"),
    "ringmaster_R": Shape(("ringmaster_R",), "Ringmaster's delay threshold R (ringmaster_pg)"),
}


@dataclasses.dataclass(frozen=True)
class Grid:
    """The requested grid: α exponents, η values and ``shapes``, the values of each shape
    hyperparameter to tune (a :data:`SHAPES` name; one not given: each algorithm's own)."""

    lr_exp: tuple[int, ...] = DEFAULT_LR_EXP
    eta: tuple[float, ...] = DEFAULT_ETA
    shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    max_extensions: int = MAX_EXTENSIONS

    def __post_init__(self):
        object.__setattr__(self, "shapes", dict(self.shapes))

    def record(self) -> dict[str, Any]:
        """The grid as ``tune.json`` and ``tuning.json`` hold it: ``M`` (null: not tuned) and
        each other shape given under its name."""
        shapes = {k: list(v) for k, v in self.shapes.items()}
        return {
            "lr_exp": list(self.lr_exp),
            "eta": list(self.eta),
            "M": shapes.pop("M", None),
            "max_extensions": self.max_extensions,
            **shapes,
        }


# --------------------------------------------------------------------------------- parsing


def parse_lr_exp(text: str) -> tuple[int, ...]:
    """``A:B`` (every integer from A to B), ``A:B:S`` (step S) or ``e1,e2,...``."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] <= 0):
                raise ValueError
            start, stop, step = (*parts, 1)[:3]
            values = tuple(range(start, stop + 1, step))
        else:
            values = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise TuningError(
            f"got {text!r}; expected A:B, A:B:STEP or integers e1,e2 (α = 2^e)", param="lr_exp"
        ) from None
    if not values:
        raise TuningError(f"got {text!r}; the grid is empty (A:B needs A <= B)", param="lr_exp")
    return tuple(sorted(set(values)))


def parse_numbers(text: str, param: str, kind: type, low: float, high: float) -> tuple:
    """Comma-separated ``kind`` values in ``(low, high]`` for ``param`` (a :class:`Grid`
    field, named by the error otherwise)."""
    what = f"comma-separated {'integers' if kind is int else 'numbers'}"
    try:
        values = tuple(kind(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise TuningError(f"got {text!r}; expected {what}", param=param) from None
    if not values:
        raise TuningError(f"got {text!r}; the grid is empty", param=param)
    bad = [v for v in values if not low < v <= high]
    if bad:
        bound = f"in ({low:g}, {high:g}]" if math.isfinite(high) else f"> {low:g}"
        raise TuningError(f"got {bad[0]:g}; every value must be {bound}", param=param)
    return tuple(sorted(set(values)))


def parse_seeds(text: str) -> tuple[int, ...]:
    """``A,A+1,...``: consecutive non-negative seeds."""
    seeds = parse_numbers(text, "seeds", int, -1, math.inf)
    if list(seeds) != list(range(seeds[0], seeds[0] + len(seeds))):
        raise TuningError(
            f"got {text!r}; expected consecutive seeds A,A+1,... (a base seed and a count)",
            param="seeds",
        )
    return seeds
