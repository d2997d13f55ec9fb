"""Sphinx configuration of the jaxnigt docs (myst-parser for Markdown, autodoc for the API).

Build: ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (warnings are errors:
a broken cross-reference or internal link fails the build).
"""

import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, os.path.abspath(".."))

project = "jaxnigt"
author = "jaxnigt developers"
copyright = "2026, jaxnigt developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown"}
master_doc = "index"
exclude_patterns = [
    "_build",
    "benchmarks_gpu/**",  # raw benchmark output, quoted by benchmarks.md
    "results/fourth/**",
    "results/physics/**",  # the physics row's comparison and store, quoted by results/physics.md
    "results/heavy/**",  # the heavy-tailed rows' comparisons and store, quoted by results/heavy.md
    "results/hetero/**",  # the heterogeneous rivals' rows, quoted by results/hetero.md
    "results/tuning.md",
    "results/verdicts.md",
]
myst_heading_anchors = 3  # [text](#a-heading) links resolve to the heading's anchor
myst_enable_extensions = ["dollarmath"]  # $…$ inline, $$…$$ displayed, rendered by MathJax
# MathJax 3 served with the site, not from a CDN (CI and an offline reader have no internet):
# its SVG build with every TeX extension in one file, which needs no web fonts (so it renders
# from file:// too) and loads nothing else. The file comes from the `docs` extra's
# django-static-mathjax wheel, which holds MathJax 3.2.2's static files and needs no Django.
mathjax_path = "mathjax/tex-svg-full.js"  # relative: under _static/ of the built site
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # NamedTuple fields: documented once, as fields of the class
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
html_theme = "furo"
html_title = "jaxnigt"
html_static_path = ["_static"]
html_css_files = ["jaxnigt.css"]  # tables that fit the page's column
# The results pages are written by the pipeline from JSON (their tables are wide and their
# headings follow the editions, not the site's outline): a heading level they skip is not
# an error of the site.
suppress_warnings = ["myst.header"]


def _copy_mathjax(app) -> None:
    """Copies the one MathJax file (and its licence) into the site's _static/mathjax/."""
    if app.builder.format != "html":
        return
    try:
        import mathjax  # django-static-mathjax: MathJax's files under mathjax/static/mathjax
    except ImportError as e:
        raise RuntimeError("MathJax is missing: pip install -e '.[docs]'") from e
    source = Path(mathjax.__file__).parent / "static" / "mathjax"
    target = Path(app.outdir) / "_static" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "es5" / "tex-svg-full.js", target / "tex-svg-full.js")
    shutil.copyfile(source / "LICENSE", target / "LICENSE")


_PRE = re.compile(r'(<span class="pre">)([^<]*)(</span>)')


def _breakable_code(app, pagename, templatename, context, doctree) -> None:
    """Code in a table cell (`point_mass_sqrt_dim`, `hparams.per_worker_batch`) may wrap after
    a ``_``, ``.`` or ``/`` (a ``<wbr>``, which copying the name leaves out) instead of
    widening its table past the page's column (docs/_static/jaxnigt.css lets it wrap)."""
    body = context.get("body")
    if not body or "<table" not in body:
        return

    def breakable(pre: re.Match) -> str:
        return pre[1] + re.sub(r"([_./])(?=\w)", r"\1<wbr>", pre[2]) + pre[3]

    context["body"] = re.sub(
        r"<table.*?</table>", lambda t: _PRE.sub(breakable, t[0]), body, flags=re.S
    )


def setup(app):
    # at builder-inited, so the file is there when the pages' script tags are written
    app.connect("builder-inited", _copy_mathjax)
    app.connect("html-page-context", _breakable_code)
