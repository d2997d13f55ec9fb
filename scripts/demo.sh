#!/usr/bin/env bash
# The main job: set up .venv (if needed) and run the demo experiment (configs/demo.yaml):
# Rennala NIGT vs Sync NIGT vs AFedPG on point_mass, n = 10 workers with stragglers, 5 seeds.
# Writes runs/demo/{config.yaml,metrics.csv,summary.json,curves.png}. Extra arguments go to
# `jaxnigt run`, e.g. `bash scripts/demo.sh --set budget=300`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/jaxnigt run configs/demo.yaml --out runs/demo --overwrite "$@"
