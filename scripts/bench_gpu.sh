#!/usr/bin/env bash
# The first thing to run on a new GPU machine: installs jaxnigt with the CUDA jaxlib of the
# pinned jax into .venv if it is missing (scripts/setup.sh, JAXNIGT_GPU=1), then runs the GPU
# benchmarks in under 10 minutes (scripts/benchmarks/gpu.py: humanoid rollouts at batch
# 1k-16k with and without refilled lanes, Rennala rounds at n = 100 and 1,000, a 5-seed chunk
# of the paper's algorithms, AFedPG waves vs one arrival at a time, compile times) and writes
# $OUT/bench_gpu.json and $OUT/bench_gpu.md (a Markdown table for docs/benchmarks.md).
# Extra arguments go to the `gpu` subcommand, e.g. --rounds 3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! .venv/bin/python -c "import jax_cuda12_plugin" 2>/dev/null; then
  JAXNIGT_GPU=1 bash scripts/setup.sh
fi
out="${OUT:-.}"
timeout 590 .venv/bin/python scripts/bench.py --json "$out/bench_gpu.json" \
  --markdown "$out/bench_gpu.md" gpu "$@"
