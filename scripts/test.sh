#!/usr/bin/env bash
# Set up .venv (if needed), lint with ruff, then run the whole pytest suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m heavy` for the slow MJX tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest "$@"
