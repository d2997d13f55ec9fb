"""The demo's comparison as docs/getting_started.md quotes it: stored, and written into the page.

The page's numbers about the demo come from one command, never typed by hand.  After the demo
(``bash scripts/demo.sh``, which writes ``runs/demo``)::

    python scripts/demo_numbers.py runs/demo      # store the comparisons, rewrite the page
    python scripts/demo_numbers.py --check        # the page against the stored comparisons

The first runs ``jaxnigt compare RUN_DIR --statistic S`` for each statistic of
:data:`COMPARISONS`, stores each one's JSON as ``docs/demo/compare_<S>.json`` (the JSON that
``jaxnigt compare`` writes) and replaces the page's region between :data:`BEGIN` and
:data:`END` with :func:`render` of them: each comparison's Markdown, as ``jaxnigt compare``
prints it (:func:`jaxnigt.analysis.compare_markdown` of its JSON).  ``--check`` exits 1 when
the page's region is not that rendering (tests/test_demo_numbers.py checks the same), so a
change of the demo, or of what ``compare`` prints, shows as a stale page until the command
above runs again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "getting_started.md"
STORED = ROOT / "docs" / "demo"
#: The comparisons the page quotes: (statistic, what it measures, in the page's words).
COMPARISONS = (
    ("time_to_80", "the time to 80 % of the improvement"),
    ("average", "the average return over the budget"),
)
BEGIN = "<!-- demo-numbers: begin (written by python scripts/demo_numbers.py RUN_DIR) -->"
END = "<!-- demo-numbers: end -->"


def stored_path(statistic: str, stored: Path = STORED) -> Path:
    """Where the JSON of the demo's comparison by ``statistic`` is stored."""
    return stored / f"compare_{statistic}.json"


def render(stored: Path = STORED) -> str:
    """The page's region, :data:`BEGIN` to :data:`END`: per comparison of
    :data:`COMPARISONS`, the command and the Markdown it prints for the stored JSON."""
    from jaxnigt import analysis

    lines = [BEGIN]
    for statistic, what in COMPARISONS:
        result = json.loads(stored_path(statistic, stored).read_text())
        flag = "" if statistic == "average" else f" --statistic {statistic}"
        lines += ["", f"By {what}, `jaxnigt compare runs/demo{flag}` prints:", ""]
        lines += [analysis.compare_markdown(result)]
    return "\n".join([*lines, "", END])


def region(text: str) -> str:
    """The region of the page's ``text`` from :data:`BEGIN` to :data:`END` (both included);
    raises ValueError when the page has no such region."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{PAGE.name} has no region {BEGIN} ... {END}")
    return text[start : end + len(END)]


def store(run_dir: Path, stored: Path = STORED) -> None:
    """Runs ``jaxnigt compare`` on ``run_dir`` for each statistic and stores its JSON."""
    from jaxnigt import cli

    stored.mkdir(parents=True, exist_ok=True)
    for statistic, _ in COMPARISONS:
        out = stored_path(statistic, stored).with_suffix("")
        argv = ["compare", str(run_dir), "--statistic", statistic, "--out", str(out)]
        if cli.main(argv) != 0:
            raise SystemExit(f"demo_numbers: jaxnigt {' '.join(argv)} failed")
        out.with_suffix(".md").unlink()  # the page holds the Markdown, rendered from the JSON


def write_page(page: Path = PAGE, stored: Path = STORED) -> None:
    """Replaces the page's region with :func:`render` of the stored comparisons."""
    text = page.read_text()
    page.write_text(text.replace(region(text), render(stored)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", help="the demo's run directory (runs/demo)")
    parser.add_argument("--check", action="store_true", help="check the page, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        if region(PAGE.read_text()) != render():
            print(
                f"demo_numbers: {PAGE} quotes other numbers than {STORED}; run "
                "python scripts/demo_numbers.py runs/demo after bash scripts/demo.sh",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.run_dir is None:
        parser.error("give the demo's run directory (runs/demo), or --check")
    store(Path(args.run_dir))
    write_page()
    print(f"[demo_numbers] wrote {STORED}/compare_*.json and the region of {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
