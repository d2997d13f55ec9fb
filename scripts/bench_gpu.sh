#!/usr/bin/env bash
# The first thing to run on a new GPU machine: the GPU benchmarks in under 10 minutes
# (scripts/benchmarks/gpu.py: humanoid rollouts at batch 1k-16k with and without refilled
# lanes, Rennala rounds at n = 100 and 1,000, a 5-seed chunk of the paper's algorithms, AFedPG
# waves vs one arrival at a time, compile times) into $OUT/bench_gpu.json and
# $OUT/bench_gpu.md (a Markdown table for docs/benchmarks.md). Installs nothing: it uses .venv
# when that has JAX's CUDA plugin (a networked machine: `JAXNIGT_GPU=1 bash scripts/setup.sh`
# first); otherwise, with carried wheels in .whl/, it hands over to scripts/gpu/run.sh (an
# offline node with its own JAX; outputs under $OUT/gpu_run). Extra arguments go to the `gpu`
# subcommand, e.g. --rounds 3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-.}"
if [ -x .venv/bin/python ] && .venv/bin/python -c "import importlib.util as u, sys
sys.exit(not any(u.find_spec(m) for m in ('jax_cuda12_plugin', 'jax_cuda13_plugin')))"; then
  exec timeout 590 .venv/bin/python scripts/bench.py --json "$out/bench_gpu.json" \
    --markdown "$out/bench_gpu.md" gpu "$@"
fi
if compgen -G ".whl/*.whl" >/dev/null; then
  echo "[bench_gpu] no CUDA jaxlib in .venv; using the site JAX and the wheels in .whl/"
  exec bash scripts/gpu/run.sh "$out/gpu_run" -- "$@"
fi
echo "[bench_gpu] no CUDA jaxlib in .venv and no wheels in .whl/. With a package index:" >&2
echo "  JAXNIGT_GPU=1 bash scripts/setup.sh   (installs jaxnigt[cuda] into .venv)" >&2
echo "offline, with the machine's own JAX: run scripts/gpu/fetch_wheels.sh where an index" >&2
echo "is reachable, bring .whl/ along and run scripts/gpu/run.sh OUT_DIR (README 'On a GPU')" >&2
exit 2
