#!/usr/bin/env bash
# Create the virtual environment if missing and (re)install jaxnigt with its extras when
# pyproject.toml or the extras changed. Sourced by scripts/demo.sh and scripts/test.sh; needs
# only Python >= 3.11 and pip.
#   JAXNIGT_GPU=1 / 0    force / forbid the CUDA jaxlib (default: when `nvidia-smi -L` lists a GPU)
#   JAXNIGT_VENV=DIR     the virtual environment (default .venv)
#   JAXNIGT_PIP_DRY_RUN=FILE   resolve only (`pip install --dry-run --report FILE`), install nothing
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
VENV="${JAXNIGT_VENV:-.venv}"
extras="$(bash scripts/detect_gpu.sh)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
if [ -n "${JAXNIGT_PIP_DRY_RUN:-}" ]; then
  "$VENV/bin/python" -m pip install --quiet --dry-run --report "$JAXNIGT_PIP_DRY_RUN" -e ".[$extras]"
  exit 0
fi
stamp="$VENV/.jaxnigt-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing jaxnigt[$extras] into $VENV (about a minute)"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".[$extras]"
  echo "$want" > "$stamp"
fi
