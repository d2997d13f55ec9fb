#!/usr/bin/env bash
# Run on an offline GPU node with its own (site) Python and JAX, from a checkout that carries
# .whl/ (scripts/gpu/fetch_wheels.sh): installs the wheels with `pip --no-index --no-deps
# --target` into a temporary directory, puts it and the checkout on PYTHONPATH (jaxnigt from
# source: nothing installed, nothing fetched), prints the versions found and where each came
# from, checks that JAX sees a GPU, then runs the GPU benchmark (scripts/bench.py gpu: first
# the studies' rollout reference and their padded programs, docs/benchmarks.md "gpu") and the
# paper-size results command (the hook below), all within one time limit. Every output goes
# under OUT_DIR, at most 8 files of at most 16 MiB each: run.log (everything printed),
# versions.txt, bench_gpu.json, bench_gpu.md, and results.tar.gz (the hook's) or, with
# --cpu-tiny, run_tiny.tar.gz. A step stopped by the limit keeps what it wrote.
#
# Usage: bash scripts/gpu/run.sh [--cpu-tiny] OUT_DIR [-- EXTRA ARGUMENTS OF `bench.py gpu`]
#   --cpu-tiny (or JAXNIGT_CPU_TINY=1)  on the CPU (JAX_PLATFORMS=cpu), no GPU check, tiny
#        sizes: the benchmark's rows on point_mass (`bench.py gpu --cpu-tiny`, studies
#        included) and a short reacher run of impala with checkpoints (MJX, rlax and orbax
#        from the carried wheels); for tests of this path
#   PYTHON=...                  the site interpreter (default python3)
#   JAXNIGT_WHEELS=DIR          the wheels (default .whl)
#   JAXNIGT_TIME_LIMIT=S        the overall limit in seconds (default and maximum 540)
#   JAXNIGT_BENCH_S=S           the benchmark's share when the results hook exists (default
#                               360: its deadline, 4/5 of it, holds the studies' reference and
#                               both padded programs at up to ~100 s each on one GPU; the
#                               hook's Humanoid scenarios need more than a lease in any case)
#   JAXNIGT_CACHE_DIR=DIR       XLA's compilation cache (default: a temporary directory)
#
# Paper-size results hook: when scripts/gpu/results.sh exists (the results command of the
# "Results, third edition" issue: scripts/paper/gpu.py), it is run after the benchmark as
#   bash scripts/gpu/results.sh RESULTS_DIR SECONDS_LEFT [--cpu-tiny]
# with the same environment; it writes what it likes under RESULTS_DIR and must stop within
# SECONDS_LEFT (it is killed a little after that); RESULTS_DIR is then packed into
# OUT_DIR/results.tar.gz, whatever it holds. Without it the step prints that it was skipped.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
PYTHON="${PYTHON:-python3}"
tiny="${JAXNIGT_CPU_TINY:-0}"
out=""
bench_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-tiny) tiny=1 ;;
    --) shift; bench_extra=("$@"); break ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "run.sh: one OUT_DIR only" >&2; exit 2; }; out="$1" ;;
  esac
  shift
done
[ -n "$out" ] || { echo "usage: bash scripts/gpu/run.sh [--cpu-tiny] OUT_DIR" >&2; exit 2; }
limit="${JAXNIGT_TIME_LIMIT:-540}"
[ "$limit" -le 540 ] || limit=540
start=$SECONDS
left() { echo $((limit - (SECONDS - start))); }

mkdir -p "$out"
out="$(cd "$out" && pwd)"
exec > >(tee -a "$out/run.log") 2>&1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=()
say() { echo "[run.sh $((SECONDS - start))s] $*"; }
say "checkout $root, outputs in $out, limit ${limit}s$([ "$tiny" = 1 ] && echo ', tiny CPU mode')"

# 1. The carried wheels, installed from .whl/ alone (no index, no dependencies).
wheels="${JAXNIGT_WHEELS:-.whl}"
shopt -s nullglob
files=("$wheels"/*.whl)
if [ ${#files[@]} = 0 ]; then
  say "no wheels in $wheels/: run scripts/gpu/fetch_wheels.sh where an index is reachable"
  exit 1
fi
site="$work/site"
PIP_NO_INDEX=1 "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile \
  --no-cache-dir --disable-pip-version-check --target "$site" "${files[@]}"
say "installed ${#files[@]} wheels into $site"
export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}"
export PIP_NO_INDEX=1 JAXNIGT_CACHE_DIR="${JAXNIGT_CACHE_DIR-$work/xla_cache}"
export MUJOCO_GL="${MUJOCO_GL:-disable}"  # no OpenGL context: nothing here renders
if [ "$tiny" = 1 ]; then
  export JAX_PLATFORMS=cpu
  # The tiny mode checks behaviour, not speed: XLA's backend at -O0 compiles ~2x faster.
  export XLA_FLAGS="${XLA_FLAGS:---xla_backend_optimization_level=0}"
fi

# 2. Versions, and where each imported distribution came from.
{
  echo "python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
  "$PYTHON" scripts/gpu/imports.py --carried "$site" --node-list scripts/gpu/node_site.txt
  "$PYTHON" -c 'import jax; print("jax backend:", jax.default_backend(), jax.devices())'
} > "$out/versions.txt" 2>&1 || failed+=("versions")
grep -v -i "warp" "$out/versions.txt" || true

# 3. A GPU, unless tiny.
if [ "$tiny" != 1 ]; then
  if ! "$PYTHON" -c 'import jax, sys; sys.exit(jax.default_backend() != "gpu")'; then
    say "JAX sees no GPU (backend $("$PYTHON" -c 'import jax; print(jax.default_backend())'))"
    say "the site jaxlib needs its CUDA plugin; --cpu-tiny runs the tiny CPU check instead"
    exit 1
  fi
fi

# Runs a step under the time left (SIGTERM at the limit, SIGKILL 20 s later).
step() {
  local name="$1" budget="$2"
  shift 2
  if [ "$budget" -le 10 ]; then
    say "$name: skipped, ${budget}s left"
    failed+=("$name (no time)")
    return 0
  fi
  say "$name: up to ${budget}s"
  local rc=0
  timeout -k 20 "$budget" "$@" || rc=$?
  say "$name: exit status $rc"
  [ "$rc" = 0 ] || failed+=("$name (exit $rc)")
}

# 4. The GPU benchmark (its own deadline leaves time to write the rows; bench.py writes the
#    rows so far if the limit stops it).
hook=scripts/gpu/results.sh
bench_s=$(($(left) - 15))
if [ -f "$hook" ] && [ "$bench_s" -gt "${JAXNIGT_BENCH_S:-360}" ]; then
  bench_s="${JAXNIGT_BENCH_S:-360}"
fi
if [ "$tiny" = 1 ]; then
  bench_args=(--quick gpu --cpu-tiny)
else
  bench_args=(gpu)
fi
step "benchmark" "$bench_s" "$PYTHON" scripts/bench.py --json "$out/bench_gpu.json" \
  --markdown "$out/bench_gpu.md" "${bench_args[@]}" --deadline $((bench_s * 4 / 5)) \
  "${bench_extra[@]}"

# 5. Tiny mode: a short run through the CLI, what the benchmark on point_mass leaves out: MJX
#    reacher through brax, IMPALA's engine with rlax's V-trace, an orbax checkpoint every
#    chunk, the run directory's files.
if [ "$tiny" = 1 ]; then
  step "tiny run" $(($(left) - 10)) "$PYTHON" -m jaxnigt.cli run configs/reacher_n10.yaml \
    --out "$work/run_tiny" --no-progress --seeds 1 --set budget=30 --set env.horizon=8 \
    --set 'algorithms=[impala]' --set cluster.n=3 --set hparams.M=3 --set hparams.M_init=3 \
    --set eval.episodes=2 --set eval.every_time=15 --set checkpoint_every=1
  [ -d "$work/run_tiny" ] && tar -czf "$out/run_tiny.tar.gz" -C "$work" run_tiny
fi

# 6. The paper-size results command, when it exists (see the header).
if [ -f "$hook" ]; then
  mkdir -p "$work/results"
  hook_args=()
  [ "$tiny" = 1 ] && hook_args=(--cpu-tiny)
  export JAXNIGT_BENCH_JSON="$out/bench_gpu.json"  # the sizing's rate (scripts/paper/gpu.py)
  step "results" $(($(left) - 10)) bash "$hook" "$work/results" $(($(left) - 30)) \
    "${hook_args[@]}"
  tar -czf "$out/results.tar.gz" -C "$work" results
else
  say "results: skipped: no paper-size results command yet ($hook does not exist)"
fi

# 7. What came back: at most 8 files of at most 16 MiB each.
n_files=0
while IFS= read -r -d '' f; do
  n_files=$((n_files + 1))
  size=$(stat -c %s "$f")
  printf '  %-24s %10d bytes\n' "${f#"$out"/}" "$size"
  [ "$size" -le $((16 * 1048576)) ] || failed+=("${f#"$out"/} is over 16 MiB")
done < <(find "$out" -type f -print0 | sort -z)
[ "$n_files" -le 8 ] || failed+=("$n_files files in $out (at most 8)")
if [ ${#failed[@]} -gt 0 ]; then
  say "done with problems: ${failed[*]}"
  exit 1
fi
say "done: $n_files files in $out"
