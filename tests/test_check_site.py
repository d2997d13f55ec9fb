"""scripts/check_site.py: what it counts as a problem of a page (its pure functions, no
browser), and, where Debian's Chromium and chromedriver are installed, that a small site with
one of each problem is failed page by page and a clean one passes."""

import shutil
from pathlib import Path

import check_site
import pytest


def test_a_table_wider_than_its_column_is_a_problem():
    tables = [
        {"index": 0, "width": 700.0, "container": 736.0, "head": "fits"},
        {"index": 1, "width": 736.5, "container": 736.0, "head": "rounding"},
        {"index": 2, "width": 960.0, "container": 736.0, "head": "row setting"},
    ]
    (problem,) = check_site.table_problems(tables)
    assert problem.startswith("table 3 ('row setting') is 960 px wide in a column of 736 px")


def test_tex_left_in_the_visible_text_is_a_problem():
    assert check_site.math_problems("κ_i = √i, a 2-core CPU, $5 and 10 %, [0.8, 1.25]") == []
    found = check_site.math_problems(
        "rate $x_t$ and \\(y\\) then $$ and the cost d^{1/4}, τ_{i,k}, (1/n Σ_i 1/b_i)^{-1}"
    )
    assert found[0] == "unrendered $…$: '$x_t$'"
    assert found[1].startswith("unrendered \\( \\) or \\[ \\]: '\\\\(', '\\\\)'")
    assert found[2] == "unrendered $$: '$$'"
    assert found[3] == "TeX outside math: ')^{-1}', 'd^{1/4}', 'τ_{i,k}'"


def test_broken_images_console_errors_and_the_first_screen():
    images = [
        {"src": "a.png", "complete": True, "natural": 640},
        {"src": "missing.png", "complete": True, "natural": 0},
    ]
    assert check_site.image_problems(images) == ["broken image missing.png"]
    console = [
        {"level": "SEVERE", "message": "http://127.0.0.1:1/x.js - Failed to load resource: 404"},
        {"level": "SEVERE", "message": "http://127.0.0.1:1/favicon.ico - Failed to load"},
        {"level": "WARNING", "message": "deprecated"},
    ]
    assert check_site.console_problems(console) == [f"console: {console[0]['message']}"]
    screen = {
        "headers": ["the paper's row", "comparison", "verdict", "effect [interval]"],
        "bottom": 320.0,
        "right": 1120.0,
        "width": 1280,
        "height": 800,
    }
    assert check_site.first_screen_problems(screen, ("verdict", "effect")) == []
    low = dict(screen, bottom=950.0, headers=["row", "setting"])
    assert check_site.first_screen_problems(low, ("verdict",)) == [
        "the first table has no column verdict: ['row', 'setting']",
        "the first table's first row is below the first screen (800 px)",
    ]
    assert check_site.first_screen_problems(None, ("verdict",)) == ["no table on the first screen"]


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>t</title></head>
<body><article style="width: 600px">{}</article></body></html>"""


@pytest.mark.skipif(
    not (Path(check_site.CHROMIUM).is_file() and shutil.which(check_site.CHROMEDRIVER)),
    reason="needs Debian's chromium and chromium-driver (scripts/check_site.sh installs them)",
)
def test_a_small_site_in_chromium(tmp_path):
    pytest.importorskip("selenium")
    wide = "<table><tr>" + "<td>a_long_unbreakable_cell_content</td>" * 6 + "</tr></table>"
    pages = {
        "index.html": "<p>all well: κ = 0</p><table><tr><td>1</td></tr></table>",
        "wide.html": wide,
        "tex.html": "<p>the cost $d^{1/4}$ of a step</p>",
        "image.html": '<img src="missing.png" alt="a plot">',
        "error.html": "<script>throw new Error('boom')</script>",
    }
    for name, body in pages.items():
        (tmp_path / name).write_text(_PAGE.format(body))
    found = check_site.check(tmp_path, tmp_path / "shots")
    assert found["index.html"] == []
    assert found["wide.html"][0].startswith("table 1 (")
    assert found["tex.html"] == ["unrendered $…$: '$d^{1/4}$'"]
    assert found["image.html"][0] == "broken image missing.png"  # and its 404 in the console
    assert found["image.html"][1].startswith("console: ") and "404" in found["image.html"][1]
    assert len(found["error.html"]) == 1 and "boom" in found["error.html"][0]
