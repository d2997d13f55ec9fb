"""scripts/bench.py: one table of benchmarks (:data:`bench.BENCHMARKS`) gives the subcommands,
their flags and what each one calls; the commands docs/benchmarks.md shows parse, and each
benchmark is called with the arguments its flags give (a stand-in module records them)."""

import re
import shlex
import sys
import types
from pathlib import Path

import bench
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _documented() -> list[list[str]]:
    """The arguments of every ``python scripts/bench.py ...`` command in docs/benchmarks.md
    (a placeholder such as ``SUB`` or a truncated ``gpu --rows`` left out)."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    found = []
    for m in re.finditer(r"`python scripts/bench\.py ([^`]*)`", text):
        argv = shlex.split(m[1].split("#")[0])
        if "SUB" not in argv:
            found.append(argv)
    return found


def test_every_documented_command_parses():
    commands = _documented()
    assert len(commands) > 20 and ["compile", "--n", "10,1000,10000"] in commands
    parser = bench._parser()
    for argv in commands:
        args = parser.parse_args(bench.gpu_args.expand_tiny(argv))
        assert args.command in (None, *bench.BENCHMARKS), argv
    assert set(bench.ALL) == set(bench.BENCHMARKS) - {"executors", "gpu"}


def test_under_all_each_flag_takes_the_first_benchmarks_default():
    defaults = bench._sub_defaults()
    # compile's --n comes before gym's and gpu's; scaling's --env before seeds' and gpu's
    assert defaults["n"] is None and defaults["env"] is None
    assert (defaults["M"], defaults["algorithm"], defaults["batches"]) == (20, "sync_nigt", None)
    assert "command" not in defaults and "quick" not in defaults


@pytest.fixture
def recorded(monkeypatch):
    """Stand-in benchmark modules: each call's function and arguments, in order."""
    calls = []

    def module(name):
        fake = types.ModuleType(f"benchmarks.{name}")

        def record(function):
            def call(*args, **kwargs):
                calls.append((name, function, args, kwargs))
                return [{"row": 1}] if function == "run" else f"{name} table"

            return call

        for function in ("run", "format_rows", "format_table"):
            setattr(fake, function, record(function))
        return fake

    for b in bench.BENCHMARKS.values():
        monkeypatch.setitem(sys.modules, f"benchmarks.{b.module}", module(b.module))
    return calls


def _run(argv):
    args = bench._parser().parse_args(bench.gpu_args.expand_tiny(argv))
    args.quick = getattr(args, "quick", False)
    for key, value in bench._sub_defaults().items():
        if not hasattr(args, key):
            setattr(args, key, value)
    args.partial_rows = []
    return bench.run_benchmark(args.command, args)


def test_each_benchmark_gets_the_arguments_of_its_flags(recorded):
    assert _run(["rollout", "--quick"]) == ([{"row": 1}], "rollout table")
    assert recorded[-2] == (
        "rollout",
        "run",
        (True,),
        dict(envs=("reacher",), batches=(64,), reps=2, solver_iterations=None, ls_iterations=None),
    )
    assert recorded[-1][1] == "format_table"  # rollout's table has its own name
    _run(["compile", "--n", "10,1000", "--algorithm", "afedpg"])
    assert recorded[-2][3] == {"envs": None, "ns": (10, 1000), "algorithm": "afedpg"}
    _run(["gym", "--envs", "hopper", "--M", "4"])
    assert recorded[-2][:2] == ("gym_reference", "run")
    assert recorded[-2][3] == dict(
        envs=("hopper",), horizon=None, M=4, n=10, rounds=None, reps=None
    )
    _run(["seeds"])
    _run(["padding"])  # no flag of its own: the defaults `all` gives
    assert [c[3] for c in recorded[-4::2]] == [{"env": "reacher"}, {"env": "point_mass"}]
    _run(["gpu", "--batches", "", "--rows", "study,waves"])
    kwargs = recorded[-2][3]
    assert (kwargs["env"], kwargs["batches"], kwargs["groups"]) == (
        "humanoid",
        (),
        ("study", "waves"),
    )
    _run(["sweep", "--quick"])
    assert recorded[-2][:3] == ("sweep_programs", "run", (True,))


def test_compile_with_n_measures_the_chunk_program_at_those_n(monkeypatch):
    from benchmarks import compile as compile_bench

    monkeypatch.setattr(compile_bench, "run_n", lambda ns, algorithm: [(ns, algorithm)])
    assert compile_bench.run(ns=(10, 20), algorithm="x") == [((10, 20), "x")]


def test_the_schedule_table_adds_each_rows_ratio_to_the_first():
    from benchmarks import schedule

    keys = ("n", "M", "calls", "full_draw_ms", "full_over_lazy", "outages_ms")
    rows = [
        {**dict.fromkeys(keys, 1), "median_ms": m, "outages_over_constant": 1.0, "compile_s": 0.5}
        for m in (2.0, 3.0)
    ]
    table = schedule.format_rows(rows)
    assert [r["ratio_vs_n10"] for r in rows] == [1.0, 1.5]
    assert "ratio vs n=10" in table.splitlines()[0] and "1.50" in table
