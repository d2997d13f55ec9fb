"""``python -m jaxnigt.cli.error_rate``: the staged rule's error and power by simulation
(:mod:`jaxnigt.analysis.error_rate`) as JSON lines, and with ``--out`` one JSON file."""

from __future__ import annotations

from jaxnigt.analysis.error_rate import run_suite, suite, summary


def main(argv=None) -> int:
    """``python -m jaxnigt.cli.error_rate --suite | --small [--out FILE] [--workers N]``:
    the grid (:func:`suite`) as JSON lines, and with ``--out`` a JSON file of its rows, its
    summary and the command."""
    import argparse
    import json
    import subprocess
    import sys
    import time

    p = argparse.ArgumentParser(description=main.__doc__.split(":")[0])
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--suite", action="store_true", help="the full grid (~25 min, 2 cores)")
    size.add_argument("--small", action="store_true", help="the test suite's regimes")
    p.add_argument("--out", default=None, help="write the rows and summary to this JSON file")
    p.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    args = p.parse_args(argv)
    start = time.time()
    emit = lambda row: print(json.dumps(row), flush=True)
    rows = run_suite(suite(small=args.small), workers=args.workers, emit=emit)
    result = {"summary": summary(rows)}
    print(json.dumps(result), flush=True)
    if args.out:
        argv = sys.argv[1:] if argv is None else list(argv)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
        result = {
            "command": " ".join(["python -m jaxnigt.cli.error_rate", *argv]),
            "commit": commit.stdout.strip() or None,
            "elapsed_s": round(time.time() - start, 1),
            "workers": args.workers,
            **result,
            "rows": rows,
        }
        from jaxnigt.run.run_dir import atomic_write_text

        # whole or not at all, through a symlink, never over a device or a pipe
        atomic_write_text(args.out, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
