#!/usr/bin/env bash
# Configures (once) and builds hfta into build/. Assumes scripts/setup.sh ran.
#   scripts/build.sh [target ...]     (default: everything)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  .venv/bin/cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="$PWD/.venv/bin/python"
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
.venv/bin/cmake --build build -j "$(nproc)" "${targets[@]}"
