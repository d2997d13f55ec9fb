"""The tuning's search rule: the winner of a grid (the tie rule), whether it sits at an edge
of the α grid, the extension that follows, and the search over an algorithm's programs as a
generator of requests (:func:`search`), driven by a scheduler (:func:`drive`).
:mod:`jaxnigt.studies.tuning` describes the protocol."""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from jaxnigt.studies.grid import MAX_EXTENSIONS, SHAPES, TIE_TOL


def choose(points: Sequence[Mapping[str, Any]]) -> dict | None:
    """The winner among scored grid points (the module's tie rule); None if none is valid."""
    ok = [p for p in points if not p["diverged_seeds"] and math.isfinite(p["score"])]
    if not ok:
        return None
    tied = _best(ok, lambda p: p["score"])
    if any("secondary" in p for p in tied):  # a time score: the higher average return first
        tied = _best(tied, lambda p: p.get("secondary", -math.inf))
    return dict(min(tied, key=lambda p: (p["lr_exp"], -p["eta"], *_shape_values(p))))


def _best(points: Sequence[Mapping[str, Any]], value) -> list:
    """The points whose ``value`` is within the tie tolerance of the best."""
    top = max(value(p) for p in points)
    if not math.isfinite(top):  # e.g. every average return non-finite: all tie
        return [p for p in points if value(p) == top]
    return [p for p in points if value(p) >= top - TIE_TOL * max(1.0, abs(top))]


def _shape_values(point: Mapping[str, Any]) -> list:
    return [point[s] for s in SHAPES if s in point]


def edge(best: Mapping[str, Any] | None, lr_exp: Sequence[int]) -> str | None:
    """``"low"`` / ``"high"`` when the winner's α is the smallest / largest of the grid."""
    if best is None or len(lr_exp) < 2:
        return None
    if best["lr_exp"] == min(lr_exp):
        return "low"
    return "high" if best["lr_exp"] == max(lr_exp) else None


def extension(lr_exp: Sequence[int], side: str) -> list[int]:
    """Two more exponents beyond ``side`` at the grid's spacing there (α ≤ 1: none above 0)."""
    grid = sorted(lr_exp)
    if side == "low":
        step = grid[1] - grid[0]
        return [grid[0] - 2 * step, grid[0] - step]
    step = grid[-1] - grid[-2]
    return [e for e in (grid[-1] + step, grid[-1] + 2 * step) if e <= 0]


def search(
    run_points: Callable[[Any, list[int]], list[dict]],
    lr_exp: Sequence[int],
    programs: Sequence[Any],
    *,
    max_extensions: int = MAX_EXTENSIONS,
    log: Callable[[str], None] = print,
    name: str = "",
) -> dict[str, Any]:
    """Runs the grid and extends it while the winner's α sits at an edge.

    Args:
      run_points: ``(program, exponents) -> scored points`` (each with ``lr_exp``, ``eta``,
        its shape values such as ``M``, ``score``, ``diverged_seeds``): one program per call.
      lr_exp: the initial exponents; programs: what ``run_points`` takes for each program
        (in :func:`tune`, its shape values ``{name: value}``).
      max_extensions: at most this many extensions.

    Returns:
      ``{"points", "chosen", "lr_exp" (every exponent run), "interior", "extensions"}``.
    """
    steps = search_steps(lr_exp, programs, max_extensions=max_extensions, log=log, name=name)
    points: list[list[dict]] = []  # by job id
    finished: list[int] = []

    def submit(key, program, exps):  # runs at once; the next ``wait`` returns it
        points.append(run_points(program, exps))
        finished.append(len(points) - 1)
        return finished[-1]

    def wait():
        done = finished[:]
        finished.clear()
        return done

    def score(key, ids):
        return [p for i in ids for p in points[i]]

    return drive({name: steps}, submit, wait, score)[name]


def search_steps(
    lr_exp: Sequence[int],
    programs: Sequence[Any],
    *,
    max_extensions: int = MAX_EXTENSIONS,
    log: Callable[[str], None] = print,
    name: str = "",
) -> Generator[list[tuple[Any, list[int]]], list[dict], dict[str, Any]]:
    """:func:`search` as a generator, so that several searches can share each round's runs
    (:func:`drive`): it yields a round's requests ``[(program, exponents)]``, is sent that
    round's scored points (one flat list) and returns :func:`search`'s result."""
    exps = sorted(lr_exp)
    points = list((yield [(prog, exps) for prog in programs]))
    done = 0
    while True:
        best = choose(points)
        side = edge(best, exps)
        new = extension(exps, side) if side and done < max_extensions else []
        if not new:
            break
        done += 1
        log(
            f"[tune] {name}: the winner α = 2^{best['lr_exp']} is at the {side} edge; "
            f"extension {done} (at most {max_extensions}): α = " + ", ".join(f"2^{e}" for e in new)
        )
        points += list((yield [(prog, new) for prog in programs]))
        exps = sorted({*exps, *new})
    interior = best is not None and min(exps) < best["lr_exp"] < max(exps)
    return {
        "points": points,
        "chosen": best,
        "lr_exp": exps,
        "interior": interior,
        "extensions": done,
    }


def drive(
    searches: Mapping[str, Generator],
    submit: Callable[[str, Any, list[int]], int],
    wait: Callable[[], list[int]],
    score: Callable[[str, list[int]], list[dict]],
    *,
    first_rounds: Callable[[], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Runs :func:`search_steps` generators, each as fast as its own programs finish.

    Every request of a search's round is submitted at once (``submit(key, program,
    exponents) -> job id``); ``wait()`` blocks until some jobs finish and returns their ids;
    when the last job of a round is done, ``score(key, ids)`` (the round's jobs in request
    order) gives the points sent to the search, whose next round is submitted at once.  So
    one search's extensions run while another's slower programs still do.  ``first_rounds``:
    no first round is scored until every search's first round has finished, and it is called
    then (a time target pools the initial grids).  Returns ``{key: result}``."""
    rounds: dict[str, tuple[list[int], set[int]]] = {}
    owner: dict[int, str] = {}
    results: dict[str, dict] = {}
    unscored_first = set(searches)

    def start(key, requests):
        ids = [submit(key, program, exps) for program, exps in requests]
        owner.update(dict.fromkeys(ids, key))
        rounds[key] = (ids, set(ids))

    for key, steps in searches.items():
        start(key, next(steps))
    while rounds:
        for i in wait():
            rounds[owner.pop(i)][1].discard(i)
        if unscored_first and first_rounds is not None:
            if any(rounds[k][1] for k in unscored_first):
                continue
            first_rounds()
        for key in [k for k, (_, left) in rounds.items() if not left]:
            ids, _ = rounds.pop(key)
            unscored_first.discard(key)
            try:
                start(key, searches[key].send(score(key, ids)))
            except StopIteration as done:
                results[key] = done.value
    return {key: results[key] for key in searches}
