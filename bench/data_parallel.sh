#!/usr/bin/env bash
# Data-parallel hfta-train against one process on the same machine: an
# array of B fused members of a CNN (examples/vision.py) trained on
# CIFAR-format images for a few epochs, once as one process with all the
# cores' threads, once as P ranks under torchrun (Gloo over the loopback,
# the threads shared out), with the same global batches. Prints each run's
# training seconds per epoch, the ranks' seconds in communication, and the
# ratio. On a 2-core machine two ranks share the cores one process had: the
# ratio shows what data parallelism costs here, not what it gains on P
# devices (docs/distributed.md models that).
#
#   bench/data_parallel.sh [KIND] [WIDTH] [MEMBERS] [RANKS] [LIMIT]
#
# KIND: resnet18, mobilenet_v2 (default resnet18), WIDTH its channel
# multiplier (default 0.5), MEMBERS the array size (default 4), RANKS
# (default 2), LIMIT the training images (default 1280).
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-resnet18}"
width="${2:-0.5}"
members="${3:-4}"
ranks="${4:-2}"
limit="${5:-1280}"
scripts/setup.sh
scripts/build.sh hfta-train hfta_runtime
data=.data/cifar10-patterned
[ -f "$data/test_batch.bin" ] || .venv/bin/python tests/python/data_files.py cifar10 "$data"
out=out/data_parallel
rm -rf "$out" && mkdir -p "$out"
.venv/bin/python examples/vision.py "$out" --kind "$kind" --members 1 --width "$width" >/dev/null
cores=$(nproc)
lrs=$(.venv/bin/python -c "print(','.join(str(0.01 * (b + 1)) for b in range($members)))")
common=("$out/${kind}_0.pt" --array-size "$members" --lr "$lrs" --momentum 0.9 --dataset cifar10 --data "$data"
  --limit "$limit" --epochs 3 --batch-size 64)
threads=$((cores / ranks > 0 ? cores / ranks : 1))
echo "== $kind (width $width), $members members, $limit images, batches of 64: one process, $cores threads"
build/tools/hfta-train "${common[@]}" --threads "$cores" --out "$out/one" | tee "$out/one.log"
for bn in per-shard sync; do
  echo "== the same over $ranks ranks (torchrun), $threads threads each, batch norm $bn"
  flags=()
  [ "$bn" = sync ] && flags=(--sync-batch-norm)
  .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node "$ranks" --no-python \
    build/tools/hfta-train "${common[@]}" "${flags[@]}" --threads "$threads" --out "$out/$bn" | tee "$out/$bn.log"
done
per_epoch() { sed -n 's/.*(\([0-9.]*\) s per epoch.*/\1/p' "$1"; }
talk() { sed -n 's/.*, \([0-9.]*\) s of it in communication.*/\1/p' "$1"; }
one=$(per_epoch "$out/one.log")
echo "== training seconds per epoch: one process $one"
for bn in per-shard sync; do
  dp=$(per_epoch "$out/$bn.log")
  echo "== $ranks ranks, batch norm $bn: $dp (of it in communication: $(talk "$out/$bn.log")):" \
    "one process / ranks = $(.venv/bin/python -c "print(f'{$one / $dp:.2f}')")"
done
