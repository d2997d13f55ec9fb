#!/usr/bin/env bash
# Run where a package index is reachable, before going to an offline GPU node: downloads into
# .whl/ (git-ignored) the CPython 3.12 manylinux x86-64 wheels of what jaxnigt imports at run
# time that the node's site install lacks (scripts/gpu/wheels.txt: one exact version of each,
# no dependencies resolved), replacing whatever .whl/ held, then checks that the wheels and the
# checkout fit the 64 MiB that travel with it and prints the total. scripts/gpu/run.sh installs
# them on the node.
#   JAXNIGT_WHEELS=DIR      the download directory (default .whl)
#   JAXNIGT_WHEELS_MIB=N    the budget in MiB, checkout included (default 64)
#   PYTHON=...              the Python whose pip downloads (default python3; any version)
set -euo pipefail
trap 'echo "[fetch_wheels] failed (line $LINENO)" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PYTHON="${PYTHON:-python3}"
dest="${JAXNIGT_WHEELS:-.whl}"
budget_mib="${JAXNIGT_WHEELS_MIB:-64}"

mapfile -t specs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' scripts/gpu/wheels.txt | grep -v '^$')
platforms=()
for n in 39 35 34 31 28 27 24 17; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "[fetch_wheels] downloading ${#specs[@]} wheels (cp312, manylinux x86-64, no deps)"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --abi cp312 --abi abi3 --abi none "${platforms[@]}" \
  --dest "$tmp" "${specs[@]}"

# Exactly one wheel per line of wheels.txt, and nothing else (two versions stop an install).
norm() { tr 'A-Z_.' 'a-z--' <<<"$1"; }
for spec in "${specs[@]}"; do
  name="$(norm "${spec%%==*}")" version="${spec#*==}"
  found=0
  for w in "$tmp"/*.whl; do
    base="$(basename "$w")"
    [ "$(norm "${base%%-*}")" = "$name" ] && [ "$(cut -d- -f2 <<<"$base")" = "$version" ] \
      && found=$((found + 1))
  done
  if [ "$found" != 1 ]; then
    echo "[fetch_wheels] expected one wheel of $spec, found $found" >&2
    exit 1
  fi
done
count="$(find "$tmp" -name '*.whl' | wc -l)"
if [ "$count" != "${#specs[@]}" ]; then
  echo "[fetch_wheels] $count wheels for ${#specs[@]} lines of wheels.txt" >&2
  exit 1
fi
mkdir -p "$dest"
rm -f "$dest"/*.whl
mv "$tmp"/*.whl "$dest"/

# What travels: the wheels plus the checkout's tracked and untracked-not-ignored files.
wheel_bytes="$(du -cb "$dest"/*.whl | tail -1 | cut -f1)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # (a tracked file deleted from the work tree does not travel: stat skips it)
  checkout_bytes="$( (git ls-files -z --cached --others --exclude-standard \
    | xargs -0 -r stat -c %s 2>/dev/null || true) | awk '{s += $1} END {print s + 0}')"
else
  checkout_bytes="$(du -sb --exclude=.git --exclude=.venv --exclude="$dest" . | cut -f1)"
fi
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
total=$((wheel_bytes + checkout_bytes))
for w in "$dest"/*.whl; do echo "  $(basename "$w")"; done
echo "[fetch_wheels] wheels: $count files, $(mib "$wheel_bytes") MiB in $dest/;" \
  "checkout: $(mib "$checkout_bytes") MiB; total $(mib "$total") MiB of $budget_mib MiB"
if [ "$total" -gt $((budget_mib * 1048576)) ]; then
  echo "[fetch_wheels] over the $budget_mib MiB budget" >&2
  exit 1
fi
