#!/usr/bin/env bash
# Opens every page of the built docs site (bash scripts/docs.sh first) in headless Chromium and
# fails on a table wider than its column, math left as TeX, a broken image or a console error
# (scripts/check_site.py); saves docs/_build/screenshots/results.png (1280×800). Installs
# Debian's chromium and chromium-driver when they are missing (as root, as on CI).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "[check_site] installing Debian's chromium and chromium-driver"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
fi
.venv/bin/python -c "import selenium" 2>/dev/null || .venv/bin/python -m pip install -q -e '.[docs]'
.venv/bin/python scripts/check_site.py "$@"
