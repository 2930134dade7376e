#!/usr/bin/env bash
# The main job on its embedded default: script three small MLPs from Python
# with different seeds, fuse them with hfta-fuse, and check the fused
# forward against each model in Python.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
out=out/demo
mkdir -p "$out"
echo "== scripting 3 MLPs (seeds 0, 1, 2) into $out"
.venv/bin/python examples/mlp.py "$out" --members 3
echo "== fusing them"
build/tools/hfta-fuse "$out"/mlp_0.pt "$out"/mlp_1.pt "$out"/mlp_2.pt -o "$out/fused.pt" \
  --report --report-json "$out/report.json"
echo "== checking the fused module against each member"
.venv/bin/python examples/check_fused.py "$out/fused.pt" build/runtime/libhfta_runtime.so \
  "$out"/mlp_0.pt "$out"/mlp_1.pt "$out"/mlp_2.pt
echo "== taking member 1 back out"
build/tools/hfta-split "$out/fused.pt" --index 1 -o "$out/member_1.pt"
