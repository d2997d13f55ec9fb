#!/usr/bin/env bash
# Builds the docs site into docs/_build/html with warnings as errors (a broken link or
# cross-reference fails): installs the `docs` extra into .venv (scripts/setup.sh first), which
# brings MathJax's files for the site (no CDN: the math renders offline). scripts/check_site.sh
# then opens every page in headless Chromium.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
.venv/bin/python -m pip install -q -e '.[rl,docs]'
JAX_PLATFORMS=cpu .venv/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html
echo "[docs] built docs/_build/html/index.html"
