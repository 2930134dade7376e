#!/usr/bin/env bash
# Sets up, builds and runs every test (GoogleTest suites, the lit suite and
# the Python package's pytest suite, each as ctest tests). ctest's summary
# line closes the output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
exec ../.venv/bin/ctest --output-on-failure --no-tests=error -j "$(nproc)"
