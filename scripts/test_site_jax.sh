#!/usr/bin/env bash
# The offline GPU node's path, tested on the CPU (called by .ci/run after scripts/test.sh):
# builds a fresh Python 3.12 venv holding a stand-in for the node's site install (jax/jaxlib
# 0.11.2 on the CPU and the node's other packages that runs import, scripts/gpu/node_site.txt,
# from the package index), fetches the carried wheels (scripts/gpu/fetch_wheels.sh) and then
# uses nothing but them: `scripts/gpu/run.sh --cpu-tiny` end to end, a check that every
# distribution a run imports is either carried or on the node's list, and the test files that
# cover the version-sensitive code (below) with jaxnigt from source on PYTHONPATH.
#   JAXNIGT_SITE_PYTHON=...   a Python 3.12 (default python3.12 on PATH, else pyenv's 3.12.x)
#   JAXNIGT_SITE_JAX=V        the site's jax/jaxlib version (default 0.11.2, the node's)
#   JAXNIGT_SITE_VENV=DIR     the venv (default: a fresh temporary one, removed at the end)
#   JAXNIGT_TEST_CACHE=DIR    the tests' XLA compilation cache (default: a temporary one, not
#                             the main suite's .jax_cache: other jax, other programs)
# Extra arguments go to pytest.
set -euo pipefail
trap 'echo "[site-jax] failed (line $LINENO)" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$SECONDS
jax_version="${JAXNIGT_SITE_JAX:-0.11.2}"
py=""
for candidate in ${JAXNIGT_SITE_PYTHON:-} python3.12 \
    "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12; do
  if [ -z "$py" ] && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' \
      >/dev/null 2>&1; then
    py="$candidate"
  fi
done
if [ -z "$py" ]; then
  echo "[site-jax] needs a Python 3.12 (JAXNIGT_SITE_PYTHON=...); none found" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
venv="${JAXNIGT_SITE_VENV:-$tmp/venv}"
export JAXNIGT_TEST_CACHE="${JAXNIGT_TEST_CACHE:-$tmp/test_cache}"

# 1. The stand-in site: jax pinned to the node's version, numpy to the node's 2.5 line.
echo "[site-jax] site venv $venv: $("$py" --version), jax $jax_version (CPU)"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
mapfile -t site < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' scripts/gpu/node_site.txt \
  | grep -v -e '^$' -e '^jax$' -e '^jaxlib$' -e '^jax-cuda')
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "jax==$jax_version" "jaxlib==$jax_version" "numpy>=2.5,<2.6" "${site[@]}" \
  "pytest>=8,<10" "pytest-xdist>=3.5,<4"
for pkg in mujoco mujoco-core brax rlax; do  # carried only: the site must not have them
  if "$venv/bin/python" -m pip show --quiet "$pkg" >/dev/null 2>&1; then
    echo "[site-jax] the stand-in site has $pkg, which the node lacks" >&2
    exit 1
  fi
done
echo "[site-jax] site ready ($((SECONDS - t0))s)"

# 2. The wheels, fetched as on a networked machine.
export JAXNIGT_WHEELS="$tmp/whl"
bash scripts/gpu/fetch_wheels.sh

# 3. run.sh's tiny CPU mode, end to end, with the site interpreter and the wheels alone.
PYTHON="$venv/bin/python" bash scripts/gpu/run.sh --cpu-tiny "$tmp/out"
"$venv/bin/python" - "$tmp/out" <<'EOF'
import json, sys, tarfile
from pathlib import Path

out = Path(sys.argv[1])
rows = json.loads((out / "bench_gpu.json").read_text())["results"]["gpu"]["rows"]
assert rows and not any("error" in r or "skipped" in r for r in rows), rows
studies = [r for r in rows if r.get("study") in ("padded", "point by point")]
assert [(r["study"], r["algorithm"]) for r in studies] == [
    ("padded", "rennala_nigt"), ("padded", "sync_nigt"),
    ("point by point", "rennala_nigt"), ("point by point", "sync_nigt")], studies
assert all(r["command"].startswith("jaxnigt sweep") and r["over_rollout"] > 0 for r in studies)
assert all(r["same_alive_steps"] for r in studies if r["study"] == "point by point"), studies
markdown = (out / "bench_gpu.md").read_text()
assert all(f"Study: `{r['command']}`" in markdown for r in studies), markdown
run = tarfile.open(out / "run_tiny.tar.gz")
for f in ("metrics.csv", "summary.json", "curves.png", "config.yaml", "checkpoints/done.json"):
    assert f"run_tiny/{f}" in run.getnames(), (f, run.getnames())
summary = json.loads(run.extractfile("run_tiny/summary.json").read())
assert "impala" in summary, summary
results = tarfile.open(out / "results.tar.gz")
manifest = json.loads(results.extractfile("results/manifest.json").read())
((name, scenario),) = manifest["scenarios"].items()
assert "analyze_s" in scenario and "skipped" not in scenario, manifest
analysis = json.loads(results.extractfile(f"results/docs/{name}.json").read())
assert analysis["statistic"] == "time_to_80" and analysis["budget"] == scenario["budget"]
assert f"results/docs/{name}.png" in results.getnames()
print(f"[site-jax] run.sh's outputs checked: {len(rows)} benchmark rows (study programs "
      f"with their ratios), a finished run, the results hook's tiny scenario")
EOF
grep -q "not in the node list" "$tmp/out/versions.txt" && {
  echo "[site-jax] a run imports a site distribution the node's list lacks:" >&2
  grep "not in the node list" "$tmp/out/versions.txt" >&2
  exit 1
}
echo "[site-jax] run.sh --cpu-tiny passed ($((SECONDS - t0))s)"

# 4. The version-sensitive tests on that environment (jaxnigt from source, wheels installed
#    with --no-index into a target directory, as run.sh does):
#    rollout.py's scans and lanes, the MJX envs through brax, flax's policy, the optax/chex
#    NIGT transformations, rlax's GAE and V-trace, orbax checkpoints (afedpg and impala
#    states), and each engine against an independent reference: the asynchronous engine's
#    hand computation, IMPALA's actors, the round engine in a fresh process and under a budget.
carried="$tmp/carried"
"$venv/bin/python" -m pip install --quiet --no-index --no-deps --no-compile \
  --disable-pip-version-check --target "$carried" "$JAXNIGT_WHEELS"/*.whl
tests=(
  tests/test_rollout.py
  tests/test_envs.py
  tests/test_policy.py
  tests/test_nigt.py
  tests/test_critic.py
  tests/test_checkpoint.py
  tests/test_async_engine.py::test_block_matches_hand_computation
  tests/test_impala_engine.py::test_repeated_actor_rolls_out_what_it_received_and_is_handed_its_last
  tests/test_impala_engine.py::test_learner_time_longer_than_the_history_is_reported
  tests/test_trainer.py::test_same_seed_same_results_in_a_fresh_process
  tests/test_trainer.py::test_budget_masking_freezes_state
)
PYTHONPATH="$carried:$PWD" MUJOCO_GL=disable PIP_NO_INDEX=1 \
  "$venv/bin/python" -m pytest -p no:cacheprovider "${tests[@]}" "$@"
echo "[site-jax] passed on jax $jax_version in $((SECONDS - t0))s"
