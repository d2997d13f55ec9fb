"""Sphinx configuration of the jaxnigt docs (myst-parser for Markdown, autodoc for the API).

Build: ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (warnings are errors:
a broken cross-reference or internal link fails the build).
"""

import os
import sys

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
    "results/tuning.md",
    "results/verdicts.md",
]
myst_heading_anchors = 3  # [text](#a-heading) links resolve to the heading's anchor
myst_enable_extensions = ["dollarmath"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # NamedTuple fields: documented once, as fields of the class
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
html_theme = "furo"
html_title = "jaxnigt"
# The results pages are written by the pipeline from JSON (their tables are wide and their
# headings follow the editions, not the site's outline): a heading level they skip is not
# an error of the site.
suppress_warnings = ["myst.header"]
