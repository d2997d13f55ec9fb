"""Tests for the `jaxnigt clock` command (run in-process through jaxnigt.cli.clock.main) and the
closed-form times it prints (jaxnigt.cluster.theory)."""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import inspect

import jax
import numpy as np
import pytest

from jaxnigt.cli import clock
from jaxnigt.cluster import model, simulation, theory, timing

BASE = ["--n", "3", "--M", "4", "--rounds", "3", "--seed", "1"]


def _read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [[float(x) for x in r] for r in rows[1:]]


def _run(argv, capsys):
    try:
        status = clock.main(argv)
    except SystemExit as e:  # argparse-level errors
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


def test_writes_csv_deterministic_rennala_with_theory(tmp_path, capsys):
    out = tmp_path / "c.csv"
    status, stdout, err = _run([*BASE, "--h", "1,2,3", "--kappa", "0.5", "--out", str(out)], capsys)
    assert status == 0, err
    header, rows = _read(out)
    assert header == [
        "round", "t_start", "t_collect_end", "t_end", "grads_used", "time_wasted", "comms",
        "b_0", "b_1", "b_2",
    ]  # fmt: skip
    assert len(rows) == 3
    a = np.array(rows)
    np.testing.assert_array_equal(a[:, 0], [0, 1, 2])
    # h = (1, 2, 3), M = 4: completions 1, 2 (w0), 2 (w1), 3 (w0) -> T = 3, b = (3, 1, 0).
    np.testing.assert_allclose(a[:, 2] - a[:, 1], 3.0)
    np.testing.assert_allclose(a[:, 3] - a[:, 2], 0.5)
    np.testing.assert_allclose(a[1:, 1], a[:-1, 3])  # next round starts at the previous end
    np.testing.assert_array_equal(a[:, 7:], [[3, 1, 0]] * 3)
    np.testing.assert_array_equal(a[:, 4], a[:, 7:].sum(1))
    np.testing.assert_array_equal(a[:, 6], 1)
    np.testing.assert_allclose(a[:, 5], 1.0 + 3.0)  # w1 one unit into its 2nd, w2 3 units
    assert len(stdout.strip().splitlines()) == 1
    assert "theory_collect=3.81818" in stdout and "mean_collect=3 " in stdout


def test_theory_times():
    # h = (1, 2, 3), M = 4: m = 1, 2, 3 give 5 / 1, 6 / (3/2) = 4 and 7 / (11/6) = 3.82 (min).
    assert theory.rennala_theory_time(np.array([3.0, 1.0, 2.0]), 4) == pytest.approx(7 / (11 / 6))
    assert theory.rennala_theory_time(np.array([2.0]), 3) == pytest.approx(8.0)  # (3 + 1) * 2
    assert theory.shared_link_rate_bound(np.array([0.5, 0.25, 2.0])) == 4.0
    assert theory.shared_link_rate_bound(np.array([0.0, 1.0])) == float("inf")


def test_simulation_names_the_round_rules():
    tm = model.make_cluster_model(2)
    with pytest.raises(ValueError, match="rennala, malenia, sync, msync"):
        simulation.simulate_rule_rounds(tm, jax.random.key(0), rule="async", M=2, rounds=1)


@pytest.mark.parametrize(
    "extra",
    [
        ["--rule", "malenia", "--noise", "exponential", "--inflight", "discard"],
        ["--rule", "sync", "--noise", "lognormal:0.5", "--h", "sqrt", "--kappa", "sqrt"],
        ["--rule", "sync", "--per-worker", "match_M"],
        ["--rule", "msync", "--M", "2", "--h", "sqrt", "--inflight", "discard"],
        ["--noise", "straggler:0.2:5", "--dim", "16", "--kappa", "equal", "--per-step",
         "--horizon", "10"],
    ],
)  # fmt: skip
def test_rules_and_options(tmp_path, capsys, extra):
    out = tmp_path / "c.csv"
    status, stdout, err = _run([*BASE, *extra, "--out", str(out)], capsys)
    assert status == 0, err
    header, rows = _read(out)
    a = np.array(rows)
    assert a.shape == (3, 10) and header[-1] == "b_2"
    assert np.all(a[:, 2] > a[:, 1]) and np.all(a[:, 3] >= a[:, 2])
    assert "theory" not in stdout
    if "sync" in extra:  # one gradient per worker (the paper's); match_M: ceil(4 / 3)
        np.testing.assert_array_equal(a[:, 7:], 2 if "match_M" in extra else 1)
    if "--dim" in extra:
        np.testing.assert_allclose(a[:, 3] - a[:, 2], 2.0, rtol=1e-6)  # kappa = 1 * 16^(1/4)
    if "msync" in extra:  # the fastest m = 2 of 3 workers, one gradient each
        np.testing.assert_array_equal(a[:, 4], 2)
        assert np.all(a[:, 7:].max(axis=1) == 1)


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["--n", "0"], "--n"),
        (["--n", "two"], "--n"),
        (["--M", "0"], "--M"),
        (["--rounds", "-1"], "--rounds"),
        (["--seed", "x"], "--seed"),
        (["--h", "fast"], "--h"),
        (["--h", "1,2"], "--h"),
        (["--h", "1,0,2"], "--h"),
        (["--kappa", "1,-1,0"], "--kappa"),
        (["--kappa", "sometimes"], "--kappa"),
        (["--noise", "gamma:2"], "--noise"),
        (["--noise", "uniform:2:1"], "--noise"),
        (["--rule", "fedavg"], "--rule"),
        (["--inflight", "keep"], "--inflight"),
        (["--allreduce", "some"], "--allreduce"),
        (["--rule", "async", "--link", "wifi"], "--link"),
        (["--dim", "0"], "--dim"),
        (["--per-step"], "--horizon"),
        (["--capacity", "0"], "--capacity"),
        (["--per-worker", "0"], "--per-worker"),
        (["--out", "/nonexistent/dir/c.csv"], "--out"),
        (["--bogus", "1"], "--bogus"),
        (["--n"], "--n"),
        (["--rule", "seed"], "--horizon"),
        (["--rule", "msync", "--n", "3", "--M", "4"], "--M"),
        (["--rule", "seed", "--horizon", "3", "--message-time", "-1"], "--message-time"),
        (["--rule", "seed", "--horizon", "3", "--batch", "0"], "--batch"),
        (["--rule", "seed", "--horizon", "3", "--learner-time", "soon"], "--learner-time"),
        (["--rule", "seed", "--horizon", "3", "--message-size", "0"], "--message-size"),
        (["--rule", "ringmaster", "--R", "0"], "--R"),
        (["--rule", "async", "--stops"], "--stops"),
        (["--rule", "ringmaster", "--point", "current"], "--point"),
        (["--rule", "ringleader_asgd", "--point", "x"], "--point"),
        (["--power", "sometimes"], "--power"),
        (["--power", "outages:5:1"], "--power-horizon"),
        (["--power", "periodic:4:0.5"], "--power-horizon"),
        (["--power", "outages:5:1", "--power-horizon", "0"], "--power-horizon"),
    ],
)
def test_bad_flags(tmp_path, capsys, argv, flag):
    out = tmp_path / "c.csv"
    argv = [*BASE, *argv] if "--out" in argv else [*BASE, "--out", str(out), *argv]
    status, stdout, err = _run(argv, capsys)
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], err
    assert not out.exists() and not list(tmp_path.iterdir())
    assert stdout == ""


def test_unknown_values_list_allowed_ones(tmp_path, capsys):
    _, _, err = _run([*BASE, "--rule", "x", "--out", str(tmp_path / "c.csv")], capsys)
    rules = "'rennala', 'malenia', 'sync', 'msync', 'mindflayer', 'ringleader', 'async'"
    assert f"[{rules}, 'ringmaster', 'ringleader_asgd', 'seed']" in err
    _, _, err = _run([*BASE, "--h", "x", "--out", str(tmp_path / "c.csv")], capsys)
    assert "equal" in err and "decreasing" in err
    _, _, err = _run([*BASE, "--noise", "x", "--out", str(tmp_path / "c.csv")], capsys)
    assert "straggler:P:FACTOR" in err


def test_add_parser_registers_subcommand(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="jaxnigt")
    clock.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["clock", *BASE, "--h", "1,2,3", "--out", str(tmp_path / "c.csv")])
    assert args.func is clock.run
    assert args.func(args) == 0
    assert (tmp_path / "c.csv").exists()
    capsys.readouterr()


def test_discard_round_end_of_the_issue(tmp_path, capsys):
    """Worker 0 delivers the 3rd gradient exactly when collection ends: rounds of 0.9."""
    out = tmp_path / "c.csv"
    argv = ["--n", "2", "--h", "0.3,11", "--M", "3", "--rule", "rennala"]
    status, stdout, err = _run(
        [*argv, "--inflight", "discard", "--rounds", "25", "--out", str(out)], capsys
    )
    assert status == 0, err
    assert "mean_round_time=0.9 " in stdout
    _, rows = _read(out)
    np.testing.assert_allclose(rows[-1][3], 22.5, rtol=1e-6)


def test_allreduce_contributors(tmp_path, capsys):
    out = tmp_path / "c.csv"
    argv = [*BASE, "--h", "1,2,3", "--kappa", "0.5,1,4", "--M", "2", "--out", str(out)]
    status, stdout, err = _run([*argv, "--allreduce", "contributors"], capsys)
    assert status == 0, err
    assert "allreduce=contributors" in stdout
    _, rows = _read(out)
    a = np.array(rows)
    # round 0: T = 2 with only w0 contributing -> AllReduce 0.5; w1/w2 get the point at 3/6
    np.testing.assert_allclose(a[0, 1:4], [0.0, 2.0, 2.5])
    np.testing.assert_allclose(a[1, 1:4], [2.5, 4.5, 5.0])
    _run([*argv, "--allreduce", "all"], capsys)
    _, rows = _read(out)
    np.testing.assert_allclose(np.array(rows)[:, 3] - np.array(rows)[:, 2], 4.0)


@pytest.mark.parametrize("link", ["shared", "independent"])
def test_async_rule_writes_one_row_per_arrival(tmp_path, capsys, link):
    out = tmp_path / "a.csv"
    argv = ["--n", "2", "--h", "1,1.5", "--kappa", "1,3", "--rule", "async", "--rounds", "5"]
    status, stdout, err = _run([*argv, "--link", link, "--out", str(out)], capsys)
    assert status == 0, err
    header, rows = _read(out)
    assert header == [
        "arrival", "worker", "t_dispatch", "t_compute_end", "t_arrival", "staleness",
        "link_wait",
    ]  # fmt: skip
    a = np.array(rows)
    assert a.shape == (5, 7)
    np.testing.assert_array_equal(a[:, 0], np.arange(5))
    if link == "shared":  # the hand-computed case of tests/test_events.py
        np.testing.assert_array_equal(a[:, 1], [0, 1, 0, 1, 0])
        np.testing.assert_allclose(a[:, 4], [2.0, 5.0, 6.0, 9.5, 10.5])
        np.testing.assert_allclose(a[:, 6], [0.0, 0.5, 2.0, 0.0, 2.5])
        assert "arrivals_per_time=0.47619" in stdout and "link_util=0.8571" in stdout
    else:
        np.testing.assert_allclose(a[:, 4], [2.0, 4.0, 4.5, 6.0, 8.0])
        np.testing.assert_array_equal(a[:, 6], 0.0)
    np.testing.assert_allclose(
        a[:, 4] - a[:, 3], np.array([1.0, 3.0])[a[:, 1].astype(int)] + a[:, 6]
    )
    assert len(stdout.strip().splitlines()) == 1 and f"link={link}" in stdout


def test_ringmaster_rule_marks_refused_exchanges(tmp_path, capsys):
    """The hand case of tests/test_events.py (h = (1, 10), kappa 0, R = 2): with stops worker
    1 is cut at t = 2 after computing a fifth of its gradient; without them its gradient
    arrives at 10 with delay 10 (worker 0 first in the tie) and is discarded."""
    out = tmp_path / "r.csv"
    argv = ["--n", "2", "--h", "1,10", "--rule", "ringmaster", "--R", "2", "--out", str(out)]
    status, stdout, err = _run([*argv, "--rounds", "4", "--stops"], capsys)
    assert status == 0, err
    header, rows = _read(out)
    assert header[-2:] == ["accepted", "wasted"] and len(header) == 9
    a = np.array(rows)
    np.testing.assert_array_equal(a[:, 1], [0, 0, 1, 0])
    np.testing.assert_allclose(a[:, 4], [1, 2, 2, 3])
    np.testing.assert_allclose(a[:, 7:], [[1, 0], [1, 0], [0, 0.2], [1, 0]], rtol=1e-6)
    assert "updates=3 " in stdout and "refused_partial=1 " in stdout and "stops=true" in stdout
    status, stdout, err = _run([*argv, "--rounds", "11"], capsys)
    a = np.array(_read(out)[1])
    np.testing.assert_allclose(a[10, [1, 4, 5, 7, 8]], [1, 10, 10, 0, 1])  # after w0 at 10
    assert "updates=10 " in stdout and "refused_whole=1 " in stdout


def test_ringleader_asgd_is_the_worked_example(tmp_path, capsys):
    """docs/cluster_model.md's worked example of Ringleader ASGD's cycles (h = 1, 1.5, 4,
    kappa 0): Phase 1 until worker 2's first gradient at t = 4 fills the table (worker 0's
    at 4 comes first: the lower id), then worker 1 at 4.5 and worker 0 at 5 make the
    cycle's other two updates; each worker's staleness is the updates since its own update
    (held points), and the second cycle starts with an empty table."""
    out = tmp_path / "r.csv"
    argv = ["--n", "3", "--h", "1,1.5,4", "--kappa", "0", "--rule", "ringleader_asgd"]
    status, stdout, err = _run([*argv, "--rounds", "12", "--out", str(out)], capsys)
    assert status == 0, err
    header, rows = _read(out)
    assert header[-4:] == ["update", "next_table", "cycle_end", "cycle"]
    a = np.array(rows)
    np.testing.assert_array_equal(a[:, 1], [0, 1, 0, 0, 1, 0, 2, 1, 0, 0, 1, 0])
    np.testing.assert_allclose(a[:, 4], [1, 1.5, 2, 3, 3, 4, 4, 4.5, 5, 6, 6, 7])
    np.testing.assert_array_equal(a[:, 7], [0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0])  # updates
    np.testing.assert_array_equal(a[:, 9], [0] * 8 + [1, 0, 0, 0])  # the cycle ends at 5
    np.testing.assert_array_equal(a[:, 5], [0] * 7 + [1, 2, 0, 1, 0])  # staleness
    assert "updates=3 cycles=1 mean_cycle_time=5 " in stdout and "point=held" in stdout
    stale = {}
    for point in ("held", "current"):
        _run([*argv, "--rounds", "24", "--out", str(out), "--point", point], capsys)
        stale[point] = np.array(_read(out)[1])[:, 5]
    # a worker that takes the server's point at every exchange computes at fresher points
    assert (stale["current"] <= stale["held"]).all() and (stale["current"] < stale["held"]).any()


def test_seed_rule_writes_one_row_per_trajectory_with_its_lag_over_steps(tmp_path, capsys):
    """The hand-computed case of tests/test_step_clock.py: actor 1's first trajectory spans
    two updates (served with versions 0, 1, 1, 2 at the third update: lags 2, 1, 1, 0)."""
    out = tmp_path / "s.csv"
    argv = ["--n", "2", "--h", "1,2.2", "--rule", "seed", "--horizon", "4", "--batch", "1"]
    status, stdout, err = _run([*argv, "--rounds", "4", "--out", str(out)], capsys)
    assert status == 0, err
    header, rows = _read(out)
    assert header == ["trajectory", "update", "worker", "t_end", "lag_min", "lag_mean", "lag_max"]
    a = np.array(rows)
    np.testing.assert_array_equal(a[:, :3], [[0, 0, 0], [1, 1, 0], [2, 2, 1], [3, 3, 0]])
    np.testing.assert_allclose(a[:, 3], [1.0, 2.0, 2.2, 3.0], rtol=1e-6)
    np.testing.assert_allclose(a[:, 4:], [[0, 0, 0], [0, 0, 0], [0, 1, 2], [0, 0, 0]])
    assert "mean_lag=0.25 max_lag=2" in stdout and "link_util=0.0000" in stdout
    # step exchanges of 1 · (o + a = 16)^(1/4) = 2 on one shared link, steps computing 0.5:
    # actor 0 is served [0.5, 2.5] and [4.5, 6.5], actor 1 [2.5, 4.5] and [6.5, 8.5]
    sized = ["--n", "2", "--rule", "seed", "--horizon", "2", "--kappa", "1", "--rounds", "1"]
    status, stdout, err = _run([*sized, "--message-size", "16", "--out", str(out)], capsys)
    assert status == 0, err
    _, rows = _read(out)
    np.testing.assert_allclose(np.array(rows)[:, 3], [6.5, 8.5])
    assert "messages_per_time=0.470588" in stdout and "link_util=0.9412" in stdout


def test_async_shared_link_rate_at_paper_scale(tmp_path, capsys):
    """The issue's acceptance command: the shared link's arrival rate is <= 1/min kappa."""
    rates = {}
    for link in ("shared", "independent"):
        out = tmp_path / f"{link}.csv"
        argv = ["--n", "100", "--h", "sqrt", "--kappa", "sqrt", "--dim", "5188"]
        argv += ["--rule", "async", "--link", link, "--rounds", "2000", "--out", str(out)]
        status, stdout, err = _run(argv, capsys)
        assert status == 0, err
        rates[link] = float(stdout.split("arrivals_per_time=")[1].split()[0])
    assert rates["shared"] <= 1.0 / 5188**0.25
    assert rates["independent"] > 10 * rates["shared"]


def test_a_size_the_machine_cannot_hold_is_one_line_before_anything_is_built(
    tmp_path, capsys, monkeypatch
):
    """Sized against a fixed limit (the machine's own memory would make the test depend on
    the machine): n = 10⁹ stops before its profiles are built, and writes nothing."""
    from jaxnigt.run import sizing

    monkeypatch.setattr(sizing, "device_limit", lambda: (8 * 2**30, "the test's limit"))
    monkeypatch.setattr(timing, "profile_values", _small_only(timing.profile_values))
    out = tmp_path / "c.csv"
    for rule in ("rennala", "async"):
        assert clock.main(["--n", "1000000000", "--rule", rule, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("jaxnigt clock: error: --n: got 1,000,000,000;")
        assert "more than the 8.0 GiB of the test's limit" in err[0]
        per_round = rule == "rennala"
        fits = sizing.largest_fitting(
            lambda m: sizing.clock_bytes(m, 10, per_round=per_round), 8 * 2**30, 10**9
        )
        assert f"the largest n that fits is about {fits:,}" in err[0]
        assert not out.exists()


def test_the_default_out_is_said(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert clock.main(["--n", "3", "--rounds", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == f"[jaxnigt] wrote {tmp_path / 'clock.csv'} (the default --out)"
    assert (tmp_path / "clock.csv").is_file()
    assert clock.main(["--n", "3", "--rounds", "2", "--out", str(tmp_path / "x.csv")]) == 0
    assert "default --out" not in capsys.readouterr().out


def _small_only(profile_values):
    """``timing.profile_values`` that fails where it would build a huge n's values."""

    def values(spec, n, **kw):
        assert n <= 1000, f"{n} values built before the size check"
        return profile_values(spec, n, **kw)

    return values


def test_an_unwritable_out_is_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    """A read-only directory (checked before anything runs) and a write that fails all the
    same (/sys refuses new files even to root) are one line each, exit 2, nothing written."""
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(ro) else real(p, m))
    status, stdout, err = _run([*BASE, "--out", str(ro / "c.csv")], capsys)
    assert status == 2 and stdout == ""
    assert err.strip().splitlines() == [
        f"jaxnigt clock: error: --out: cannot write {str(ro / 'c.csv')!r}: its directory "
        f"{str(ro)!r} is not writable"
    ]
    status, stdout, err = _run([*BASE, "--out", "/sys/jaxnigt_clock.csv"], capsys)
    assert status == 2 and stdout == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        "jaxnigt clock: error: --out: cannot write '/sys/jaxnigt_clock.csv': "
    )
    assert list(ro.iterdir()) == []


def test_out_is_written_through_a_symlink_and_never_replaces_a_pipe_device_or_run_file(
    tmp_path, capsys
):
    """``--out link.csv`` replaced the link, ``--out pipe`` the named pipe (and, as root,
    ``--out /dev/full`` the device node): the link's target is written, the others refused in
    one line before anything runs (the device here through a link, so that a failing test
    never touches /dev), as is a run directory's own file."""
    import os
    import stat

    link = tmp_path / "link.csv"
    link.symlink_to("target.csv")
    status, _, err = _run([*BASE, "--out", str(link)], capsys)
    assert status == 0 and err == ""
    assert link.is_symlink() and (tmp_path / "target.csv").read_text().startswith("round,")
    pipe, device = tmp_path / "pipe", tmp_path / "full"
    os.mkfifo(pipe)
    device.symlink_to("/dev/null")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: run\n")
    own = run / "metrics.csv"
    for out, problem in (
        (pipe, f"{str(pipe)!r} is a named pipe, not a regular file"),
        (device, f"{str(device)!r} is a character device, not a regular file"),
        (own, f"{str(own)!r} is a run directory's own file; choose another path"),
    ):
        status, stdout, err = _run([*BASE, "--out", str(out)], capsys)
        assert status == 2 and stdout == ""
        assert err.strip().splitlines() == [f"jaxnigt clock: error: --out: {problem}"]
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and device.is_symlink()
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml"]


def test_the_flags_are_read_through_the_config_schema():
    """The cluster's flags are a ClusterConfig checked by its own checks (an error names the
    flag), each named choice is a flag made from its definition, and the module defines no
    config class of its own."""
    from jaxnigt.config import schema

    parser = argparse.ArgumentParser()
    clock._add_arguments(parser)
    flags = {a.dest: a for a in parser._actions}
    for choice in model.CHOICES:
        flag = flags[choice.name]
        assert flag.default == choice.default and flag.help.startswith("|".join(choice.values))
        dashed = "--" + choice.name.replace("_", "-")  # --down-exchange (and --down_exchange)
        assert choice.help in flag.help and clock.CLUSTER_FLAGS[choice.name] == dashed
        assert flag.option_strings[0] == dashed and f"--{choice.name}" in flag.option_strings
    assert set(clock.CLUSTER_FLAGS) == {f.name for f in dataclasses.fields(schema.ClusterConfig)}
    classes = [
        n.name for n in ast.walk(ast.parse(inspect.getsource(clock))) if isinstance(n, ast.ClassDef)
    ]
    assert classes == ["FlagError"]
    settings, cluster = clock.validate(parser.parse_args([*BASE, "--link", "independent"]))
    assert (cluster.n, cluster.link, cluster.inflight, cluster.allreduce) == (
        3,
        "independent",
        "cancel",
        "all",
    )
    assert (settings.M, settings.capacity, settings.R, settings.batch) == (4, 24, 3, 3)
    with pytest.raises(clock.FlagError, match=r"^--allreduce: got 'some'; expected one of"):
        clock.validate(parser.parse_args([*BASE, "--allreduce", "some"]))
    with pytest.raises(clock.FlagError, match=r"^--capacity: got 0; expected an integer >= 1"):
        clock.validate(parser.parse_args([*BASE, "--capacity", "0"]))


# ------------------------------------------------------------------ computation power


def _trace(directory, text, name="down.csv"):
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


DOWN = "worker,start,speed\n2,1.5,0\n2,6,1\n"  # worker 2 down on [1.5, 6)


def test_a_power_trace_stalls_the_sync_round_and_rennala_goes_on_without_the_down_worker(
    tmp_path, capsys
):
    """docs/cluster_model.md's worked example: n = 3, h = 1, M = 4, worker 2 down on
    [1.5, 6).  Sync: its 2nd gradient is half done at 1.5 and done at 6.5, so the rounds end
    at 1, 6.5, 7.5.  Rennala: rounds end at 2, 4, 6; rounds 2 and 3 use no gradient of
    worker 2 (column b_1)."""
    trace = _trace(tmp_path / "in", DOWN)
    argv = ["--n", "3", "--h", "1", "--M", "4", "--rounds", "3", "--power", f"trace:{trace}"]
    ends = {}
    for rule in ("sync", "rennala"):
        out = tmp_path / f"{rule}.csv"
        status, stdout, err = _run([*argv, "--rule", rule, "--out", str(out)], capsys)
        assert status == 0 and err == "", err
        assert f"power=trace:{trace} down_exchange=wait -> {out}" in stdout
        assert "theory" not in stdout
        header, rows = _read(out)
        a = np.array(rows)
        ends[rule] = a[:, header.index("t_end")]
        if rule == "rennala":
            np.testing.assert_array_equal(a[:, header.index("b_1")], [1, 0, 0])
            np.testing.assert_array_equal(a[:, header.index("grads_used")], [4, 4, 4])
    np.testing.assert_allclose(ends["sync"], [1.0, 6.5, 7.5])
    np.testing.assert_allclose(ends["rennala"], [2.0, 4.0, 6.0])


# Worker 2 (column b_1) down from 0, back at speed 1 from 1.2.
DOWN_FROM_0 = "worker,start,speed\n2,0,0\n2,1.2,1\n"


def test_discard_a_gradient_begun_while_down_with_no_work_done_is_not_in_flight(tmp_path, capsys):
    """docs/cluster_model.md ("In-flight work", "Computation power"): a gradient is in flight
    at a round's end T iff its worker has done a positive amount of work on it by T, on its
    work clock W(t) = int_0^t v.  n = 2, h = (1, 0.5), M = 1, kappa = 0, deterministic;
    worker 1 (b_0) at speed 1 throughout, worker 2 (b_1) down on [0, 1.2), speed 1 after.

    By hand, ``--inflight discard``:

    * round 0 (t0 = 0): worker 1 completes at 1; worker 2's gradient (work 0.5) would end at
      1.2 + 0.5 = 1.7.  T = 1, b = (1, 0).  Worker 2 has done W(1) - W(0) = 0 on its
      gradient: not in flight (no waste, not busy).  Ends at 1, wasted 0.
    * round 1 (t0 = 1): worker 2 starts afresh at the new point (down until 1.2) and ends at
      1.7; worker 1's gradient would end at 2.  T = 1.7, b = (0, 1).  Worker 1 has done 0.7:
      in flight, discarded: it runs to 2, its whole work 1 wasted.  Ends at 1.7, wasted 1.
    * round 2 (t0 = 1.7): worker 2 ends at 2.2; worker 1, busy until 2, would end at 3.
      T = 2.2, b = (0, 1).  Worker 1 has done 0.2: discarded, 1 wasted.  Ends at 2.2,
      wasted 1.

    Round ends 1, 1.7, 2.2; wasted 0, 1, 1.  (The reading "began before T" counted worker 2's
    untouched gradient in flight in round 0 -- wasted 0.5, worker 2 busy on the stale point
    until 1.7 -- and gave 1, 2, 2.7 with wasted 0.5, 0.5, 1.)  ``cancel`` ends the rounds at
    the same times and wastes the work done by T: 0, 0.7 (worker 1 from 1 to 1.7), 0.5
    (worker 1 from 1.7 to 2.2)."""
    trace = _trace(tmp_path / "in", DOWN_FROM_0)
    argv = ["--n", "2", "--h", "1,0.5", "--M", "1", "--rounds", "3", "--rule", "rennala"]
    want_wasted = {"discard": [0.0, 1.0, 1.0], "cancel": [0.0, 0.7, 0.5]}
    for inflight, wasted in want_wasted.items():
        out = tmp_path / f"{inflight}.csv"
        extra = ["--inflight", inflight, "--power", f"trace:{trace}", "--out", str(out)]
        status, _, err = _run([*argv, *extra], capsys)
        assert status == 0 and err == "", err
        header, rows = _read(out)
        a = np.array(rows)
        col = lambda name, a=a: a[:, header.index(name)]
        np.testing.assert_allclose(col("t_end"), [1.0, 1.7, 2.2], rtol=1e-6, err_msg=inflight)
        np.testing.assert_allclose(col("t_start"), [0.0, 1.0, 1.7], rtol=1e-6, err_msg=inflight)
        np.testing.assert_allclose(col("time_wasted"), wasted, rtol=1e-6, atol=1e-6,
                                   err_msg=inflight)  # fmt: skip
        np.testing.assert_array_equal(col("b_0"), [1, 0, 0], err_msg=inflight)
        np.testing.assert_array_equal(col("b_1"), [0, 1, 1], err_msg=inflight)


def test_drawn_outages_come_from_the_seed_key(tmp_path, capsys):
    """``--power outages:UP:DOWN`` draws each run's outages from ``--seed``'s key, as every
    clock does (``model.realize``): the same seed gives the same rows, another seed others,
    and the rows are those of the realized trace run by hand.  The async clock (which
    starts its engine itself) draws them too."""
    base = ["--n", "3", "--h", "1", "--rounds", "12", "--power", "outages:2:3"]
    base += ["--power-horizon", "100"]
    rows = {}
    for rule in ("rennala", "async"):
        for seed in ("1", "1", "2"):
            out = tmp_path / f"{rule}{seed}.csv"
            status, _, err = _run(
                [*base, "--rule", rule, "--seed", seed, "--out", str(out)], capsys
            )
            assert status == 0, err
            rows[rule, seed] = out.read_text()
    for rule in ("rennala", "async"):
        assert rows[rule, "1"] != rows[rule, "2"]
    cm = model.make_cluster_model(3, h=1, power="outages:2:3", power_horizon=100.0)
    key = jax.random.key(1)
    drawn = model.realize(cm, key)[0]
    _, arr = simulation.simulate_async(drawn, key, arrivals=12)
    _, by_hand = simulation.simulate_async(cm, key, arrivals=12)
    np.testing.assert_array_equal(np.asarray(arr.time), np.asarray(by_hand.time))
    _, got = _read(tmp_path / "async1.csv")
    np.testing.assert_allclose(np.array(got)[:, 4], np.asarray(arr.time), rtol=1e-6)
    assert np.all(np.diff(np.asarray(arr.time)) >= 0) and np.isfinite(arr.time).all()


def test_a_round_that_never_ends_is_a_note(tmp_path, capsys):
    """Worker 2 down for good at 1.5: the sync round 1 never ends; the CSV and the summary
    hold round 0 alone, and one note on stderr says which round never ends.  With worker 2
    down from 0 not even round 0 ends (Malenia's neither: no count of a round that never
    ends is reported)."""
    trace = _trace(tmp_path / "in", "2,1.5,0\n")
    out = tmp_path / "c.csv"
    argv = ["--n", "3", "--h", "1", "--rounds", "3", "--rule", "sync", "--out", str(out)]
    status, summary, err = _run([*argv, "--power", f"trace:{trace}"], capsys)
    assert status == 0
    assert err.strip().splitlines() == [
        "jaxnigt clock: note: round 1 never ends (the workers it waits for are down for "
        "good: --power); the CSV and the summary hold only the rows before it (1)"
    ]
    assert " rounds=1 " in summary and "mean_round_time=1 " in summary
    _, rows = _read(out)
    assert len(rows) == 1 and rows[0][3] == 1.0
    dead = _trace(tmp_path / "dead", "2,0,0\n")
    for rule in ("sync", "malenia"):
        argv = ["--n", "3", "--h", "1", "--rounds", "3", "--rule", rule, "--out", str(out)]
        status, summary, err = _run([*argv, "--power", f"trace:{dead}"], capsys)
        assert status == 0 and f"clock: rule={rule} n=3 rounds=0 power=" in summary
        assert "round 0 never ends" in err
        header, rows = _read(out)
        assert header[0] == "round" and rows == []


@pytest.mark.parametrize(
    "text,message",
    [
        (None, "trace file {path!r} does not exist"),
        ("dir", "trace file {path!r} cannot be read: [Errno 21] Is a directory: {path!r}"),
        (
            b"\xff\xfe\n",
            "trace file {path!r} cannot be read: 'utf-8' codec can't decode byte 0xff in "
            "position 0: invalid start byte",
        ),
        ("2,1,-1\n", "trace {path!r} line 1: speed must be >= 0, got -1.0"),
        ("worker,start,speed\n2,-1,0\n", "trace {path!r} line 2: start must be >= 0, got -1.0"),
        ("4,1,0\n", "trace {path!r} line 1: worker must be an integer in 1..3, got '4'"),
        ("0,1,0\n", "trace {path!r} line 1: worker must be an integer in 1..3, got '0'"),
        (
            "2,3,0\n2,1,1\n",
            "trace {path!r} line 2: worker 2's starts must increase, got 1.0 after 3.0",
        ),
        ("2,x,0\n", "trace {path!r} line 1: not a number in '2,x,0'"),
        (
            "worker,start,speed\n2,1.5,1e308\n",  # was: a numpy warning, "round 2 never ends"
            "trace {path!r} line 2: start and speed must be at most 3.40282e+38 (the trace is "
            "float32), got '2,1.5,1e308'",
        ),
        (
            "2,1e39,1\n",  # was: two numpy RuntimeWarnings and a run
            "trace {path!r} line 1: start and speed must be at most 3.40282e+38 (the trace is "
            "float32), got '2,1e39,1'",
        ),
        (
            "speed,start,worker\n2,1.5,0\n",
            "trace {path!r} line 1: the header must be worker,start,speed, got "
            "'speed,start,worker'",
        ),
        ("2,1\n", "trace {path!r} line 1: expected worker,start,speed, got '2,1'"),
        ("worker,start,speed\n", "trace file {path!r} has no rows"),
        (
            "1,4,0\n2,5,0\n3,2,0\n",
            "trace {path!r}: every worker is at speed 0 from t = 5 on: no gradient could "
            "ever finish after it",
        ),
    ],
)
def test_a_bad_power_trace_is_one_line_naming_the_file_and_line(tmp_path, capsys, text, message):
    inputs = tmp_path / "in"
    inputs.mkdir()
    path = inputs / "trace.csv"
    if text == "dir":
        path.mkdir()
    elif text is not None:
        _trace(inputs, text, "trace.csv")
    out = tmp_path / "c.csv"
    status, stdout, err = _run([*BASE, "--power", f"trace:{path}", "--out", str(out)], capsys)
    assert status == 2 and stdout == ""
    expected = message.format(path=str(path))
    assert err.strip().splitlines() == [f"jaxnigt clock: error: --power: {expected}"]
    assert not out.exists()


def test_a_missing_relative_trace_names_the_path_tried(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, stdout, err = _run([*BASE, "--power", "trace:down.csv", "--out", "c.csv"], capsys)
    assert status == 2 and stdout == ""
    assert err.strip().splitlines() == [
        "jaxnigt clock: error: --power: trace file 'down.csv' does not exist (tried "
        f"{str(tmp_path / 'down.csv')!r}: the working directory's)"
    ]
    assert not (tmp_path / "c.csv").exists()


@pytest.mark.parametrize(
    "spec,message",
    [
        ("outages:10:0", "--power: got 'outages:10:0'; DOWN must be > 0"),
        ("outages:0:1", "--power: got 'outages:0:1'; UP must be > 0"),
        ("outages:x:1", "--power: got 'outages:x:1'; UP must be a number, got 'x'"),
        ("periodic:0:1", "--power: got 'periodic:0:1'; PERIOD must be > 0"),
        ("periodic:2:-1", "--power: got 'periodic:2:-1'; LOW must be >= 0"),
        (
            "outages:1",
            "--power: 'outages:1' takes 2 argument(s); allowed: constant, outages:UP:DOWN, "
            "periodic:PERIOD:LOW or trace:FILE",
        ),
        (
            "outages:10:1",
            "--power-horizon: required with --power outages:10:1: the simulated time the "
            "outages trace covers (a number > 0; past it every worker is up at speed 1)",
        ),
    ],
)
def test_a_bad_power_spec_is_one_line_naming_the_flag(tmp_path, capsys, spec, message):
    """A spec's numbers are checked before its horizon is asked for."""
    out = tmp_path / "c.csv"
    status, stdout, err = _run([*BASE, "--power", spec, "--out", str(out)], capsys)
    assert status == 2 and stdout == ""
    assert err.strip().splitlines() == [f"jaxnigt clock: error: {message}"]
    assert not out.exists()


def test_a_power_trace_too_large_for_memory_is_one_line_naming_its_flag(
    tmp_path, capsys, monkeypatch
):
    """Sized from the spec before it is built (a periodic trace laid out over one period
    only, to check its numbers)."""
    from jaxnigt.cluster import power_sources
    from jaxnigt.run import sizing

    monkeypatch.setattr(sizing, "device_limit", lambda: (2**20, "the test's limit"))
    real = power_sources.periodic_trace

    def periodic(n, period, low, horizon):
        assert horizon <= period, "the periodic trace was built over its horizon"
        return real(n, period, low, horizon)

    monkeypatch.setattr(power_sources, "periodic_trace", periodic)
    out = tmp_path / "c.csv"
    argv = [*BASE, "--power", "periodic:0.5:0", "--power-horizon", "5000", "--out", str(out)]
    status, stdout, err = _run(argv, capsys)
    assert status == 2 and stdout == "" and not out.exists()
    assert err.strip().splitlines() == [
        "jaxnigt clock: error: --power-horizon: the trace of 'periodic:0.5:0' has 3 workers × "
        "20,004 stretches × 8 float32 arrays: at least 1.8 MiB, more than the 1.0 MiB of the "
        "test's limit beside the cluster's time model; a longer PERIOD or a shorter "
        "--power-horizon"
    ]
