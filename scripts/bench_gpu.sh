#!/usr/bin/env bash
# GPU benchmark: humanoid rennala_nigt rounds/s at n = 100, M = 50, then 5 seeds x
# {rennala_nigt, sync_nigt, afedpg}, one vmapped program per algorithm (< 10 min on one GPU).
# Needs a CUDA jaxlib in .venv (see docs/benchmarks.md). Results: $OUT/bench_gpu.json
# (or ./bench_gpu.json). Extra arguments go to the `gpu` subcommand, e.g. --rounds 3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-.}/bench_gpu.json"
timeout 590 .venv/bin/python scripts/bench.py --json "$out" gpu "$@"
