#!/usr/bin/env bash
# The figures README.md quotes for fusing an ensemble inside one scripted
# module: examples/cpp/fuse_ensemble (hfta::fuseParallel) and
# examples/cpp/registered_ensemble (hfta::registerPasses), each timing a
# training step before and after side by side, on 8 MLPs sharing one input
# and 8 LeNets on their own inputs (examples/ensemble.py), batch 32.
#
#   bench/ensemble_examples.sh [OUT]     (default out/ensembles)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/ensembles}"
scripts/setup.sh
scripts/build.sh fuse_ensemble registered_ensemble
.venv/bin/python examples/ensemble.py "$out" >/dev/null
for program in fuse_ensemble registered_ensemble; do
  echo "== $program: 8 MLPs on one input"
  "build/examples/cpp/$program" "$out/mlp_averaged_b8.pt" --input-shape 16 --batch 32
  echo "== $program: 8 LeNets on their own inputs"
  "build/examples/cpp/$program" "$out/lenet_stacked_b8.pt" --input-shape 1,16,16 --batch 32 --own-inputs
done
