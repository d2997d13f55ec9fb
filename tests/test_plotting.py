"""Tests for jaxnigt.run.plots: step-function resampling and grouping of metric rows."""

import numpy as np

from jaxnigt.run.metrics import group_curves, resample


def test_resample_is_last_value_at_or_before():
    xs = np.array([0.0, 2.0, 5.0])
    ys = np.array([1.0, 3.0, 7.0])
    out = resample(xs, ys, np.array([-1.0, 0.0, 1.9, 2.0, 4.0, 5.0, 9.0]))
    np.testing.assert_array_equal(out, [np.nan, 1.0, 1.0, 3.0, 3.0, 7.0, 7.0])


def test_group_curves_skips_missing_values():
    rows = [
        {"algorithm": "a", "grid": 0, "seed": 0, "sim_time": "0", "eval_return": "1"},
        {"algorithm": "a", "grid": 0, "seed": 0, "sim_time": "1", "eval_return": ""},
        {"algorithm": "a", "grid": 0, "seed": 0, "sim_time": "2", "eval_return": "3"},
        {"algorithm": "a", "grid": 0, "seed": 1, "sim_time": "0", "eval_return": "2"},
        {"algorithm": "b", "grid": 1, "seed": 0, "sim_time": "0", "eval_return": "5"},
    ]
    g = group_curves(rows, x="sim_time", y="eval_return")
    assert set(g) == {("a", 0), ("b", 1)}
    np.testing.assert_array_equal(g[("a", 0)][0][0], [0.0, 2.0])
    np.testing.assert_array_equal(g[("a", 0)][0][1], [1.0, 3.0])
    assert set(g[("a", 0)]) == {0, 1}


# --- jaxnigt plot: where it writes (a run directory by hand: nothing trains) ---


def _run_dir(path):
    from jaxnigt.run import metrics

    path.mkdir()
    rows = [
        {
            "algorithm": "rennala_nigt",
            "grid": 0,
            "seed": s,
            "round": r,
            "sim_time": 2.0 * r,
            "eval_return": -10.0 + r + s,
            "env_steps": 10 * r,
        }
        for s in (0, 1)
        for r in range(5)
    ]
    metrics.write_csv(path / "metrics.csv", rows)
    return path


def _said(capsys):
    out, err = capsys.readouterr()
    return out.strip().splitlines(), err.strip().splitlines()


def test_plot_to_an_unsupported_extension_is_one_line_listing_the_formats(tmp_path, capsys):
    from jaxnigt import cli

    run = _run_dir(tmp_path / "run")
    assert cli.main(["plot", str(run), "--out", str(tmp_path / "plot.txt")]) == 2
    out, err = _said(capsys)
    assert len(err) == 1 and err[0].startswith(
        f"jaxnigt: error: --out: got {str(tmp_path / 'plot.txt')!r}; '.txt' is no image format"
    ), err
    assert ".png" in err[0] and ".pdf" in err[0] and ".svg" in err[0] and out == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert cli.main(["plot", str(run), "--out", str(tmp_path / "p.pdf")]) == 0
    assert (tmp_path / "p.pdf").read_bytes().startswith(b"%PDF")


def test_plot_without_an_extension_writes_a_png_and_says_its_name(tmp_path, capsys):
    from tasks import assert_plot

    from jaxnigt import cli

    run = _run_dir(tmp_path / "run")
    assert cli.main(["plot", str(run), "--out", str(tmp_path / "noext")]) == 0
    out, _ = _said(capsys)
    assert out == [f"[jaxnigt] wrote {tmp_path / 'noext.png'}"]
    assert_plot(tmp_path / "noext.png")
    assert not (tmp_path / "noext").exists()


def test_plot_where_it_cannot_write_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    """An unwritable --out, and a run on a read-only mount (its default output), say which
    file and why, and leave nothing behind."""
    import errno
    import os
    import tempfile

    from jaxnigt import cli

    run = _run_dir(tmp_path / "run")
    # /sys refuses new files even to root (a chmod'ed directory would not stop root)
    assert cli.main(["plot", str(run), "--out", "/sys/jaxnigt_plot.png"]) == 2
    _, err = _said(capsys)
    assert len(err) == 1, err
    assert err[0].startswith("jaxnigt: error: cannot write the plot: '/sys/jaxnigt_plot.png': ")
    mkstemp = tempfile.mkstemp

    def read_only(*a, dir=None, prefix="", suffix="", **kw):
        if str(dir) == str(run):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), f"{dir}/{prefix}x{suffix}")
        return mkstemp(*a, dir=dir, prefix=prefix, suffix=suffix, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert cli.main(["plot", str(run)]) == 2
    _, err = _said(capsys)
    assert err == [
        f"jaxnigt: error: cannot write the plot: {str(run / 'curves_time.png')!r}: Read-only "
        "file system; pass --out FILE to write it elsewhere"
    ]
    assert sorted(p.name for p in run.iterdir()) == ["metrics.csv"]


# --- a run's figures from the rows it holds: the figures `jaxnigt plot` draws of its files ---


def _drawn(monkeypatch, draw) -> list:
    """What ``draw()`` puts on its figure's axes (titles, labels, lines, bars, bands),
    the figure itself not written."""
    import matplotlib.pyplot as plt

    from jaxnigt.run import plots

    figures = []
    monkeypatch.setattr(plots, "save", lambda fig, out: figures.append(fig))
    draw()
    (fig,) = figures
    drawn = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        drawn.append(
            (
                ax.get_title(),
                ax.get_xlabel(),
                ax.get_xscale(),
                [(line.get_label(), line.get_xydata().tolist()) for line in ax.lines],
                [(p.get_x(), p.get_y(), p.get_width()) for p in ax.patches],
                [c.get_paths()[0].vertices.tolist() for c in ax.collections if c.get_paths()],
            )
        )
    plt.close(fig)
    return drawn


def test_a_run_draws_from_its_rows_the_curves_its_files_give(tmp_path, monkeypatch):
    from jaxnigt.run import metrics, plots

    rows = [
        {"algorithm": a, "grid": g, "learning_rate": 0.1, "eta": 0.5, "seed": s, "round": r}
        | {"sim_time": f"{1.5 * r + s:.6g}", "eval_return": "" if r == 2 else f"{r - s / 3:.6g}"}
        for a in ("rennala_nigt", "afedpg")
        for g in (0, 1)
        for s in (0, 1, 2)
        for r in range(6)
    ]
    (tmp_path / "run").mkdir()
    metrics.write_csv(tmp_path / "run" / "metrics.csv", rows)
    from_files = _drawn(
        monkeypatch, lambda: plots.plot_runs([tmp_path / "run"], out="x.png", budget=6.0)
    )
    held = lambda: plots.plot_rows([("run", rows)], out="x.png", budget=6.0)
    np.testing.assert_equal(_drawn(monkeypatch, held), from_files)
    assert [label for label, _ in from_files[1][3]][:2] == [
        "afedpg (3 seeds)",
        "afedpg [grid 1] (3 seeds)",
    ]


def test_a_run_draws_from_its_rows_the_shares_its_files_give(tmp_path, monkeypatch):
    from jaxnigt.run import metrics, plots

    rows = [
        {"algorithm": a, "grid": 0, "learning_rate": 0.1, "eta": 0.5, "seed": s, "round": r}
        | {"sim_time": f"{2.0 * r:.6g}", "w0": r + s, "w1": 3 * r, "w2": 1}
        for a in ("rennala_nigt", "sync_pg")
        for s in (0, 1)
        for r in range(1, 4)
    ]
    (tmp_path / "run").mkdir()
    metrics.write_csv(tmp_path / "run" / metrics.COUNTS_FILE, rows, metrics.COUNT_COLUMNS)
    from_files = _drawn(monkeypatch, lambda: plots.plot_counts(tmp_path / "run", out="c.png"))
    shares = plots.count_shares(rows)
    held = lambda: plots.plot_shares(shares, "run", out="c.png")
    np.testing.assert_equal(_drawn(monkeypatch, held), from_files)
    assert len(from_files[1][4]) == 6  # two algorithms, three workers


def test_a_sweep_draws_from_its_rows_the_figure_its_files_give(tmp_path, monkeypatch):
    import json

    from jaxnigt.run import metrics, plots

    axes = {"hparams.M": [2, 8, 32], "seeds": [2]}
    rows = []
    for M in axes["hparams.M"]:
        base = {"point": f"hparams.M={M},seeds=2", "hparams.M": str(M), "seeds": "2"}
        for a, slow in (("rennala_nigt", 1.0), ("afedpg", 3.0)):
            times = {"time_to_0.5": None if M == 32 and slow > 1 else slow * M}
            times |= {"time_to_0.5_q20": 0.8 * slow * M, "time_to_0.5_q80": float("inf")}
            rows.append({**base, "status": "done", "message": "", "algorithm": a, **times})
    rows.append({"point": "hparams.M=64,seeds=2", "status": "failed", "message": "no"})
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"axes": axes}))
    metrics.write_csv(sweep / "sweep.csv", rows, columns=list(rows[0]))
    from_files = _drawn(monkeypatch, lambda: plots.plot_sweep(sweep, out="s.png"))
    held = lambda: plots.plot_sweep_rows(rows, axes, "sweep", None, out="s.png")
    np.testing.assert_equal(_drawn(monkeypatch, held), from_files)
    assert from_files[0] == "sweep: time to target against hparams.M"
    assert from_files[1][2] == "log"  # M spans more than 10x
