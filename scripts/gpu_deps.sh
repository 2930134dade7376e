#!/usr/bin/env bash
# Run here, before scripts/gpu_check.sh runs on a GPU machine: the GPU
# machine has CUDA, CMake, ninja and torch but none of the Debian libraries
# hfta builds with, and no network. This downloads their Debian 12 packages
# and unpacks them into .gpu-deps/root (git-ignored), which the device run
# carries.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu-deps && mkdir -p .gpu-deps/debs .gpu-deps/root
(cd .gpu-deps/debs && apt-get download -q libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev \
  libgtest-dev libbenchmark-dev libbenchmark1debian libgloo-dev >/dev/null)
for deb in .gpu-deps/debs/*.deb; do dpkg -x "$deb" .gpu-deps/root; done
rm -rf .gpu-deps/debs
echo "gpu_deps: $(du -sh .gpu-deps | cut -f1) in .gpu-deps/root; carry .gpu-deps to the device run"
