#!/usr/bin/env bash
# Set up .venv (if needed), lint with ruff, then run the whole pytest suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m heavy` for the slow MJX tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# the Ray backend's tests need the `ray` extra (not part of the demo's install)
.venv/bin/python -c "import ray" 2>/dev/null || .venv/bin/python -m pip install --quiet -e ".[ray]"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest "$@"
