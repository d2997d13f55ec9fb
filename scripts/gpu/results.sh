#!/usr/bin/env bash
# The paper-size results command (the hook of scripts/gpu/run.sh): the paper's Humanoid
# scenarios under the third edition's protocol (docs/results.md), sized to SECONDS_LEFT.
#   bash scripts/gpu/results.sh RESULTS_DIR SECONDS_LEFT [--cpu-tiny]
# Writes RESULTS_DIR/manifest.json (what ran, what was shrunk or skipped, and why), the run
# and tuning directories under RESULTS_DIR/runs, and the analysis JSON and plots under
# RESULTS_DIR/docs. --cpu-tiny: the same path on point_mass on the CPU in about a minute.
# Runs with the environment run.sh sets up (PYTHON, PYTHONPATH); JAXNIGT_BENCH_JSON (the
# benchmark's rows) gives the sizing its rate.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -ge 2 ] || { echo "usage: bash scripts/gpu/results.sh RESULTS_DIR SECONDS_LEFT [--cpu-tiny]" >&2; exit 2; }
out="$1" seconds="$2"
shift 2
extra=()
for a in "$@"; do
  case "$a" in
    --cpu-tiny) extra+=(--tiny) ;;
    *) echo "results.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" -u "$root/scripts/paper" gpu "$out" "$seconds" "${extra[@]}"
