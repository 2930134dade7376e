#!/usr/bin/env bash
# HFTA's headline workflow with hfta's tools: MobileNet-V2 (examples/vision.py,
# the published width) on CIFAR-10, 5 epochs with mixed precision and a test
# evaluation (--amp --eval), once alone (learning rate 0.01) and once as an
# array of three fused (0.01, 0.03, 0.1); prints each run's epoch times and
# the ratio of the fused epoch's time to the single model's (HFTA's README:
# 7.6 s / 6.0 s on a V100).
#
#   bench/amp_sweep.sh [CIFAR10_DIR] [LIMIT] [DEVICE] [PRECISION]
#
# CIFAR10_DIR holds CIFAR-10's binary version (data_batch_1..5.bin,
# test_batch.bin); without one, the patterned images the tests use are
# written in that format to .data/cifar10-patterned (tests/python/data_files.py).
# LIMIT (default 640; 0 for all) is --limit: the first LIMIT training and
# test images, so that a CPU finishes in a few minutes. DEVICE: cpu (the
# default; bfloat16) or cuda (float16 with a loss scale per member).
# PRECISION: amp (the default) or fp32 (no --amp: the float32 baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-}"
limit="${2:-640}"
device="${3:-cpu}"
precision="${4:-amp}"
case "$precision" in
  amp) amp=(--amp) ;;
  fp32) amp=() ;;
  *) echo "amp_sweep.sh: PRECISION is amp or fp32, not $precision" >&2; exit 2 ;;
esac
scripts/setup.sh
scripts/build.sh hfta-train hfta_runtime
if [ -z "$data" ]; then
  data=.data/cifar10-patterned
  [ -f "$data/test_batch.bin" ] || .venv/bin/python tests/python/data_files.py cifar10 "$data"
fi
out=out/amp_sweep_$precision
rm -rf "$out" && mkdir -p "$out"
echo "== scripting MobileNet-V2 (published width, CIFAR-10's 10 classes) into $out"
.venv/bin/python examples/vision.py "$out" --kind mobilenet_v2 --members 1 --width 1.0
common=(--dataset cifar10 --data "$data" --limit "$limit" --epochs 5 --batch-size 64 --momentum 0.9 "${amp[@]}" --eval
  --device "$device")
echo "== one model, lr 0.01"
build/tools/hfta-train "$out/mobilenet_v2_0.pt" --array-size 1 --lr 0.01 "${common[@]}" --out "$out/alone" |
  tee "$out/alone.log"
echo "== three models fused, lr 0.01, 0.03, 0.1"
build/tools/hfta-train "$out/mobilenet_v2_0.pt" --array-size 3 --lr 0.01,0.03,0.1 "${common[@]}" --out "$out/fused" |
  tee "$out/fused.log"
per_epoch() { sed -n 's/.*(\([0-9.]*\) s per epoch).*/\1/p' "$1"; }
alone=$(per_epoch "$out/alone.log")
fused=$(per_epoch "$out/fused.log")
echo "== per epoch of training: one model $alone s, three fused $fused s: ratio $(
  .venv/bin/python -c "print(f'{$fused / $alone:.2f}')") (three models alone: 3.00)"
