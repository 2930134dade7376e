#!/usr/bin/env bash
# The device check: builds hfta against the machine's own torch (CUDA
# kernels for sm_80/sm_90), runs the CUDA tests, the Python package's
# optimizers, schedules and loss scaler against torch's
# (tests/python/check_package_device.py), the optimizer benchmark and
# the Transformers and the LSTM LM fused on the device against each member
# alone (tests/python/check_text_fused.py) and under autocast
# (tests/python/check_autocast.py), and the training-throughput harness
# (bench/throughput.py, every way of training B members, then ResNet-18 and
# MobileNet-V2 again with bfloat16 and float16 autocast, HFTA's MobileNet-V2
# --amp sweep (one model against three fused), then the Transformer LM and
# BERT, hfta-tune fused and alone, hfta-train data parallel under torchrun
# and hfta-tune with 2 workers) on the GPU, sized to about 10 minutes on one H200. Needs
# .gpu-deps from scripts/gpu_deps.sh. On a machine without a GPU it still
# builds and runs (the CUDA tests skip, the benchmarks run small on the
# CPU), which is how it is checked before a device run.
#   scripts/gpu_check.sh [python]     (default: python3, which holds torch there)
set -euo pipefail
cd "$(dirname "$0")/.."
python="$(command -v "${1:-python3}")"
[[ "$python" = /* ]] || python="$PWD/$python"  # CMake's FindPython wants it absolute
deps="$PWD/.gpu-deps/root/usr"
[ -d "$deps" ] || { echo "gpu_check: run scripts/gpu_deps.sh first (and carry .gpu-deps)" >&2; exit 2; }
export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out="${OUT:-build-gpu}"
mkdir -p "$out"
# The autotuner's choices on this GPU come back in $out/hfta-cache/forms.json.
export HFTA_CACHE_DIR="$out/hfta-cache"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$(command -v "$python")" \
  -DCMAKE_PREFIX_PATH="$deps" -DHFTA_BUILD_LIT=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep -E "hfta:|CUDA kernels" "$out/configure.log" || true
cmake --build build-gpu -j "$(nproc)" --target hfta_cuda_tests optimizer_step train_modes hfta-fuse hfta-train hfta-tune hfta_python \
  >"$out/build.log" 2>&1 ||
  { grep -E "error|Error" -A3 "$out/build.log" | head -40; exit 1; }
nvidia-smi -L 2>/dev/null || echo "gpu_check: no GPU here; the CUDA tests skip"
# PyTorch's loss-scaler answers for the CUDA scaler tests.
"$python" tests/python/make_optim_references.py "$out/test_models" >/dev/null
HFTA_TEST_MODELS="$out/test_models" build-gpu/tests/hfta_cuda_tests 2>&1 | tee "$out/cuda_tests.log" | grep -E "OK|FAILED|SKIPPED|PASSED" | head -40
device=cpu
nvidia-smi -L >/dev/null 2>&1 && device=cuda
# The Python package on the device: hfta.optim, its schedules and loss scaler against torch's per member.
PYTHONPATH=build-gpu/python "$python" tests/python/check_package_device.py --device "$device" 2>&1 |
  tee "$out/package_device.log" | grep -E "OK|FAILED|Error"
"$python" tests/python/check_text_fused.py --device "$device" --fuse build-gpu/tools/hfta-fuse \
  --runtime build-gpu/runtime/libhfta_runtime.so 2>&1 | tee "$out/text_fused.log" | grep -E "OK|FAILED|Error"
# Mixed precision: the fused array under autocast against each member alone (float16 and bfloat16),
# in the heuristic's forms (tests/CMakeLists.txt says why).
HFTA_AUTOTUNE=0 "$python" tests/python/check_autocast.py --device "$device" --dtypes float16,bfloat16 --fuse build-gpu/tools/hfta-fuse \
  --runtime build-gpu/runtime/libhfta_runtime.so 2>&1 | tee "$out/autocast.log" | grep -E "OK|FAILED|Error"
build-gpu/bench/optimizer_step "--device=$device" --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true 2>&1 | tee "$out/optimizer_step.log" | grep -E "median|Run on|CPU"
# Training throughput, every way (results.md, results.csv, throughput.png under $out/).
if [ "$device" = cuda ]; then
  sizes=(--models mlp,lenet,pointnet_cls,resnet18,mobilenet_v2 --arrays 1,8 --batch 64 --rounds 1 --min-seconds 0.3)
  amp_sizes=(--models resnet18,mobilenet_v2 --arrays 1,8 --batch 64 --rounds 1 --min-seconds 0.3)
  sweep_limit=5000
  text_sizes=(--models lm_small,bert_small,lm --arrays 1,8 --batch 32 --rounds 1 --min-seconds 0.3)
  tune_epochs=9
else  # the same commands, small enough for a CPU check
  sizes=(--models mlp,lenet --arrays 1,2 --rounds 1 --steps-scale 0.2 --min-seconds 0.2)
  amp_sizes=(--models mlp --arrays 2 --rounds 1 --steps-scale 0.2 --min-seconds 0.2)
  sweep_limit=128
  text_sizes=(--models lm_small --arrays 2 --rounds 1 --steps-scale 0.5 --batch 4 --min-seconds 0.2)
  tune_epochs=3
fi
timeout 420 "$python" bench/throughput.py --device "$device" --build build-gpu "${sizes[@]}" \
  --out "$out/throughput" 2>&1 | tail -25
# Mixed precision: bfloat16, and float16 with a loss scale per member.
for dtype in bfloat16 float16; do
  timeout 120 "$python" bench/throughput.py --device "$device" --amp "$dtype" --build build-gpu "${amp_sizes[@]}" \
    --out "$out/throughput_$dtype" 2>&1 | tail -8
done
# HFTA's README figure: MobileNet-V2 (published width) on CIFAR-sized images
# (the tests' patterned images in CIFAR-10's format), 5 epochs, --amp --eval,
# one model against three fused; the ratio of their training epoch times.
"$python" tests/python/data_files.py cifar10 "$out/cifar10"
"$python" examples/vision.py "$out/sweep" --kind mobilenet_v2 --members 1 --width 1.0 >/dev/null
for array in "1 0.01" "3 0.01,0.03,0.1"; do
  set -- $array
  timeout 150 build-gpu/tools/hfta-train "$out/sweep/mobilenet_v2_0.pt" --array-size "$1" --lr "$2" --momentum 0.9 \
    --dataset cifar10 --data "$out/cifar10" --limit "$sweep_limit" --epochs 5 --batch-size 64 --amp --eval \
    --device "$device" --out "$out/sweep/b$1" 2>&1 | tee "$out/sweep/b$1.log" | grep -E "took|epochs:"
done
"$python" - "$out/sweep" <<'RATIO'
import re, sys
per_epoch = {b: float(re.search(r"\(([0-9.]+) s per epoch\)", open(f"{sys.argv[1]}/b{b}.log").read()).group(1))
             for b in (1, 3)}
print(f"MobileNet-V2 --amp: {per_epoch[1]:.2f} s per epoch alone, {per_epoch[3]:.2f} s for 3 fused: "
      f"ratio {per_epoch[3] / per_epoch[1]:.2f} (HFTA's README on a V100: 7.6 / 6.0 = 1.27)")
RATIO
timeout 150 "$python" bench/throughput.py --device "$device" --build build-gpu "${text_sizes[@]}" \
  --out "$out/throughput_text" 2>&1 | tail -10
# hfta-tune: Hyperband of the digits CNN on the synthetic 8x8 images, the
# trials fused (the planned array size) against every trial alone.
"$python" examples/cnn.py "$out/tune" --kind digits --members 1 >/dev/null
for mode in fused alone; do
  flags=()
  [ "$mode" = alone ] && flags=(--array-size 1)
  start=$(date +%s.%N)
  timeout 200 build-gpu/tools/hfta-tune examples/tune/digits_space.json --model "$out/tune/digits_0.pt" \
    --dataset synthetic --max-epochs "$tune_epochs" --device "$device" --out "$out/tune/$mode" "${flags[@]}" \
    >"$out/tune/$mode.log" 2>&1 || { tail -5 "$out/tune/$mode.log"; }
  echo "hfta-tune $mode: $("$python" -c "print(round($(date +%s.%N) - $start, 1))") s;" \
    "$(grep -E "array size|trials in|best trial" "$out/tune/$mode.log" | tr '\n' ' ')"
done
# Beyond one process: hfta-train data parallel under torchrun against one
# process (CUDA: one rank per GPU over NCCL; with one GPU a world of one,
# which still builds the NCCL group and runs every collective; CPU: 2 ranks
# over Gloo), and hfta-tune's Hyperband with 2 workers sharing the device.
ranks=2
[ "$device" = cuda ] && ranks=$(nvidia-smi -L | wc -l)
dp=(build-gpu/tools/hfta-train "$out/sweep/mobilenet_v2_0.pt" --array-size 3 --lr 0.01,0.03,0.1 --momentum 0.9
  --dataset cifar10 --data "$out/cifar10" --limit "$sweep_limit" --epochs 2 --batch-size 64 --device "$device")
timeout 150 "${dp[@]}" --out "$out/dp/one" 2>&1 | grep -E "epochs:|^epoch"
timeout 150 "$python" -m torch.distributed.run --standalone --nproc-per-node "$ranks" --no-python "${dp[@]}" \
  --sync-batch-norm --out "$out/dp/ranks" 2>&1 | grep -E "data parallel|epochs:|^epoch|rror"
start=$(date +%s.%N)
timeout 200 build-gpu/tools/hfta-tune examples/tune/digits_space.json --model "$out/tune/digits_0.pt" \
  --dataset synthetic --max-epochs "$tune_epochs" --device "$device" --out "$out/tune/workers" --workers 2 \
  >"$out/tune/workers.log" 2>&1 || { tail -5 "$out/tune/workers.log"; }
echo "hfta-tune --workers 2: $("$python" -c "print(round($(date +%s.%N) - $start, 1))") s;" \
  "$(grep -E "array size|trials in|best trial" "$out/tune/workers.log" | tr '\n' ' ')"
