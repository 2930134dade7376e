#!/usr/bin/env bash
# Configures (once) and builds hfta into build/, and puts its Python package
# on the project environment's path. Assumes scripts/setup.sh ran.
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
# The Python package, as the build assembled it in build/python, on the
# project environment's path: `.venv/bin/python -c "import hfta"` works
# (pip install --no-build-isolation . makes a wheel of it instead).
if [ -d build/python/hfta ]; then
  site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$PWD/build/python" > "$site/hfta-build.pth"
fi
