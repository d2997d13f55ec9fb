#!/usr/bin/env bash
# Prints the extras scripts/setup.sh installs, and says on stderr in one line whether that
# includes the CUDA jaxlib: when `nvidia-smi -L` lists a GPU or JAXNIGT_GPU=1; never with
# JAXNIGT_GPU=0.
set -euo pipefail
base="rl,tb,test"
gpu=0
if [ "${JAXNIGT_GPU:-}" = "1" ]; then
  gpu=1; why="JAXNIGT_GPU=1"
elif [ "${JAXNIGT_GPU:-}" != "0" ] && command -v nvidia-smi >/dev/null 2>&1 \
    && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  gpu=1; why="nvidia-smi lists $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') GPU(s)"
fi
if [ "$gpu" = "1" ]; then
  echo "[setup] $why: installing the CUDA jaxlib (jaxnigt[cuda]); JAXNIGT_GPU=0 for the CPU one" >&2
  echo "$base,cuda"
else
  echo "[setup] no NVIDIA GPU (or JAXNIGT_GPU=0): installing the CPU jaxlib" >&2
  echo "$base"
fi
