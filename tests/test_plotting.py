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
    rows = [{"algorithm": "rennala_nigt", "grid": 0, "seed": s, "round": r,
             "sim_time": 2.0 * r, "eval_return": -10.0 + r + s, "env_steps": 10 * r}
            for s in (0, 1) for r in range(5)]  # fmt: skip
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
