#!/usr/bin/env bash
# Configures (once) and builds hfta into build/. Assumes scripts/setup.sh ran.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  .venv/bin/cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="$PWD/.venv/bin/python"
fi
.venv/bin/cmake --build build -j "$(nproc)"
