"""Opens every page of the built docs site in headless Chromium, as a reader would, and fails
on what a reader would see broken: a table wider than the column it sits in (its right-hand
columns cut off or behind a scroll bar), math left as TeX source (``$…$``, ``\\(``, or a
``x^{…}`` / ``x_{…}`` written outside math), an image that did not load, an error in the
browser's console. It saves a screenshot of the results page at 1280×800 for the reviewer.

Usage: ``python scripts/check_site.py [--site docs/_build/html] [--shots DIR] [PAGE ...]``
(``scripts/check_site.sh`` installs Chromium and runs it after ``scripts/docs.sh``).

The site is served by a local HTTP server on 127.0.0.1 that this script starts and stops;
Chromium (``/usr/bin/chromium``, Debian's) is driven through Debian's chromedriver with
selenium, with a fresh profile and every feature that would reach out to the internet off.
Measurements are taken in the page by :data:`PROBE` (JavaScript); deciding what is a problem
is done here, by the pure functions ``*_problems`` (tested without a browser in
tests/test_check_site.py).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WINDOW = (1280, 800)  # the reader's first screen (and the screenshot's size)
SCREENSHOTS = {"results.html": "results.png"}  # page -> screenshot file
# Pages whose first screen must show their first table's first row with these columns (the
# results page: each comparison's verdict, the fourth edition's and the fifth's, with its effect).
FIRST_SCREEN = {"results.html": ("fourth edition", "fifth edition", "effect")}
# Problems reported without failing the check, with the reason: text that comes from code
# outside the docs, to be fixed there.  None now: the API's docstrings and the configuration
# reference have no TeX outside math (tests/test_api_docs.py checks them at their source).
NOTES: dict[tuple[str, str], str] = {}
# Chromium's switches: headless, and nothing that calls home (without them it tries to reach
# Google's services and, refused, logs errors of its own).
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)
MATH_TIMEOUT_S = 20  # MathJax typesets a page in well under a second here

# Run in the page once it has loaded and MathJax (where the page has it) has typeset it.
PROBE = r"""
const done = arguments[arguments.length - 1];
const measure = () => {
  const inner = (e) => {  // the width of an element's content box
    const s = getComputedStyle(e);
    return e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
  };
  const article = document.querySelector("article") || document.body;
  const width = inner(article);
  // a table's container: the column of the article, or the theme's (scrolling) wrapper in it
  const tables = [...article.querySelectorAll("table")].map((t, i) => ({
    index: i,
    width: t.getBoundingClientRect().width,
    container: Math.min(width, inner(t.parentElement)),
    head: (t.querySelector("tr") || t).innerText.replace(/\s+/g, " ").slice(0, 60),
  }));
  const images = [...document.images].map((im) => ({
    src: im.getAttribute("src"), complete: im.complete, natural: im.naturalWidth,
  }));
  // visible text outside code: TeX left there is math that was not rendered
  const clone = article.cloneNode(true);
  clone.querySelectorAll("pre, code, script, style, mjx-container, .headerlink")
    .forEach((e) => e.remove());
  const holder = document.createElement("div");
  holder.style.cssText = "position:absolute;left:-99999px;width:" + width + "px";
  holder.appendChild(clone);
  document.body.appendChild(holder);
  const text = clone.innerText;
  holder.remove();
  // the first table's header and where its first row ends, against the window
  const first = article.querySelector("table");
  const row = first && first.querySelector("tbody tr");
  const screen = first && {
    headers: [...first.querySelectorAll("thead th")].map((h) => h.innerText.trim()),
    bottom: row ? row.getBoundingClientRect().bottom : null,
    right: first.getBoundingClientRect().right,
    width: window.innerWidth, height: window.innerHeight,
  };
  const math = document.querySelectorAll(".math").length;
  const typeset = document.querySelectorAll("mjx-container").length;
  const errors = [...document.querySelectorAll("mjx-merror, [data-mjx-error]")]
    .map((e) => e.getAttribute("data-mjx-error") || e.textContent);
  return {tables, images, text, math, typeset, errors, screen};
};
const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise)
  || Promise.resolve();
ready.then(() => document.fonts.ready).then(() => done(measure()),
                                             (e) => done({failed: String(e)}));
"""


# ------------------------------------------------------------------------- the decisions


def table_problems(tables: list[dict], slack: float = 1.0) -> list[str]:
    """A table wider than the column it sits in: its right-hand side is cut off (or needs a
    horizontal scroll) at the reader's window size."""
    return [
        f"table {t['index'] + 1} ({t['head']!r}) is {t['width']:.0f} px wide in a column of "
        f"{t['container']:.0f} px"
        for t in tables
        if t["width"] > t["container"] + slack
    ]


# TeX a reader would see as source: $…$ (one line), \( \) \[ \], and a sub- or superscript
# in braces written outside math (d^{1/4}, τ_{i,k}).
_TEX = (
    (re.compile(r"(?<![\\$])\$[^$\s][^$\n]*?\$"), "unrendered $…$"),
    (re.compile(r"\\[()\[\]]"), "unrendered \\( \\) or \\[ \\]"),
    (re.compile(r"\$\$"), "unrendered $$"),
    (re.compile(r"[\w)\]}′]\s?[_^]\{[^}\n]*\}"), "TeX outside math"),
)


def math_problems(text: str) -> list[str]:
    """Math left as its TeX source in a page's visible text (code excluded)."""
    out = []
    for pattern, what in _TEX:
        found = sorted({m.group(0) for m in pattern.finditer(text)})
        text = pattern.sub(" ", text)  # reported once: TeX inside an unrendered $…$ is not more
        if found:
            shown = ", ".join(repr(f) for f in found[:5])
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            out.append(f"{what}: {shown}{more}")
    return out


def image_problems(images: list[dict]) -> list[str]:
    """An image that did not load (or is not an image): the browser shows a broken icon."""
    return [
        f"broken image {im['src']}" for im in images if not im["complete"] or im["natural"] == 0
    ]


def console_problems(entries: list[dict]) -> list[str]:
    """The errors in the browser's console (a failed request, an exception in a script)."""
    return [
        f"console: {e['message']}"
        for e in entries
        if e.get("level") == "SEVERE" and "favicon.ico" not in e.get("message", "")
    ]


def first_screen_problems(screen: dict | None, columns: tuple[str, ...]) -> list[str]:
    """The first table's columns named in ``columns`` (each a header's beginning) and its
    first row, visible on the first screen without scrolling."""
    if screen is None:
        return ["no table on the first screen"]
    out = []
    missing = [c for c in columns if not any(h.startswith(c) for h in screen["headers"])]
    if missing:
        out.append(f"the first table has no column {', '.join(missing)}: {screen['headers']}")
    if screen["bottom"] is None or screen["bottom"] > screen["height"]:
        out.append(f"the first table's first row is below the first screen ({screen['height']} px)")
    if screen["right"] > screen["width"]:
        out.append(f"the first table runs past the window's right edge ({screen['width']} px)")
    return out


def page_problems(
    measured: dict, console: list[dict], first_screen: tuple[str, ...] | None = None
) -> list[str]:
    """Every problem of one page, from the probe's measurements and its console;
    ``first_screen``: the columns its first screen must show (:data:`FIRST_SCREEN`)."""
    if "failed" in measured:
        return [f"the page's scripts failed: {measured['failed']}", *console_problems(console)]
    out = table_problems(measured["tables"]) + math_problems(measured["text"])
    out += image_problems(measured["images"])
    if first_screen is not None:
        out += first_screen_problems(measured["screen"], first_screen)
    if measured["math"] and not measured["typeset"]:
        out.append(f"{measured['math']} math elements and none typeset (MathJax did not run)")
    out += [f"MathJax error: {e}" for e in measured["errors"]]
    return out + console_problems(console)


# ----------------------------------------------------------------------------- running


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request would drown the report
        pass


@contextlib.contextmanager
def serve(site: Path):
    """The site on http://127.0.0.1:<free port>/, for the duration of the block."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def chromium(profile: Path):
    """Headless Chromium under chromedriver, with a fresh profile in ``profile``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (*CHROMIUM_ARGS, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the driver given: selenium does not look for (or download) one of its own
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        driver.set_script_timeout(MATH_TIMEOUT_S)
        driver.set_page_load_timeout(60)
        # the viewport itself at 1280×800, whatever the window's frame takes
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


def pages(site: Path) -> list[str]:
    """Every built page, relative to the site: the docs' pages, the highlighted sources of
    the API (_modules) and Sphinx's index and search pages."""
    found = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    return [p for p in found if not p.startswith(("_static/", "_sources/"))]


def check(
    site: Path, shots: Path, only: list[str] | None = None, shoot: tuple[str, ...] = ()
) -> dict[str, list[str]]:
    """``{page: problems}`` for every page of ``site`` (or those in ``only``); saves the
    screenshots of :data:`SCREENSHOTS` and of the pages in ``shoot`` into ``shots``."""
    found = {}
    with tempfile.TemporaryDirectory(prefix="check_site_") as profile:
        with serve(site) as base, chromium(Path(profile)) as driver:
            for name in only or pages(site):
                driver.get_log("browser")  # what an earlier page left
                driver.get(base + name)
                measured = driver.execute_async_script(PROBE)
                console = driver.get_log("browser")
                found[name] = page_problems(measured, console, FIRST_SCREEN.get(name))
                if name in SCREENSHOTS or name in shoot:
                    shots.mkdir(parents=True, exist_ok=True)
                    shot = SCREENSHOTS.get(name) or name.replace("/", "_").replace(".html", ".png")
                    driver.save_screenshot(str(shots / shot))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="pages to check (default: every page)")
    parser.add_argument("--site", type=Path, default=ROOT / "docs" / "_build" / "html")
    parser.add_argument("--shots", type=Path, default=ROOT / "docs" / "_build" / "screenshots")
    parser.add_argument("--shoot", action="append", default=[], metavar="PAGE",
                        help="also save a screenshot of PAGE (e.g. algorithms.html)")  # fmt: skip
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"[check_site] no site in {args.site}: bash scripts/docs.sh first", file=sys.stderr)
        return 2
    start = time.monotonic()
    found = check(args.site, args.shots, args.pages or None, tuple(args.shoot))
    bad = {}
    for name, problems in found.items():
        for problem in problems:
            why = next((w for (p, kind), w in NOTES.items() if p == name
                        and problem.startswith(kind)), None)  # fmt: skip
            if why is None:
                bad.setdefault(name, []).append(problem)
                print(f"[check_site] {name}: {problem}")
            else:
                print(f"[check_site] note, not failing: {name}: {problem} (from {why})")
    took = time.monotonic() - start
    shots = ", ".join(str(args.shots / s) for s in SCREENSHOTS.values())
    print(f"[check_site] {len(found)} pages in {took:.0f} s, {len(bad)} with problems; "
          f"screenshot {shots}")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
