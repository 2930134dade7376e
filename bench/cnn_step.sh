#!/usr/bin/env bash
# bench/README.md's CNN rows of mlp_step: B fused members of a CNN against
# the same members stepped one after another, with 1 and 2 threads. The
# small CNNs of examples/cnn.py (LeNet, PointNet-like; B = 8, batch 32, 20
# alternating rounds of 10 steps) and the published ones of
# examples/vision.py at full width (ResNet-18, MobileNet-V2; B = 4, batch 8,
# 7 alternating rounds of 1 step after 2 warm-up steps).
#
#   bench/cnn_step.sh [OUT]      (default out/cnn_step)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/cnn_step}"
scripts/setup.sh >/dev/null
scripts/build.sh mlp_step >/dev/null
mkdir -p "$out"
step() {  # step KIND SCRIPT B INPUT_SHAPE CLASSES mlp_step-flags...
  local kind=$1 script=$2 members=$3 shape=$4 classes=$5
  shift 5
  .venv/bin/python "examples/$script" "$out" --kind "$kind" --members "$members" >/dev/null
  local paths=()
  for ((b = 0; b < members; b++)); do paths+=("$out/${kind}_$b.pt"); done
  for threads in 1 2; do
    echo "== $kind, B $members, threads $threads"
    build/bench/mlp_step "${paths[@]}" --input-shape "$shape" --classes "$classes" --threads "$threads" "$@"
  done
}
step lenet cnn.py 8 1,16,16 10 --batch 32 --rounds 20
step pointnet cnn.py 8 3,32 4 --batch 32 --rounds 20
step resnet18 vision.py 4 3,32,32 10 --batch 8 --rounds 7 --steps 1 --warmup 2
step mobilenet_v2 vision.py 4 3,32,32 10 --batch 8 --rounds 7 --steps 1 --warmup 2
lscpu | grep "Model name"
