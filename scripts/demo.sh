#!/usr/bin/env bash
# The main job on its embedded default: a learning-rate sweep of a small CNN
# on the 8x8 digits that scikit-learn ships. Scripts 4 members from Python,
# fuses them with hfta-fuse, trains the fused array with hfta-train (Adam,
# one learning rate per member), ranks the members, plots their curves and
# exports the best one as a plain TorchScript model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh hfta-fuse hfta-train hfta_runtime  # only what the demo runs
out=out/demo
rm -rf "$out" && mkdir -p "$out"
echo "== scripting 4 CNNs for the 8x8 digits (seeds 0-3) into $out"
.venv/bin/python examples/cnn.py "$out" --kind digits --members 4
echo "== fusing them"
build/tools/hfta-fuse "$out"/digits_{0..3}.pt -o "$out/fused.pt" --report
echo "== training the 4 members at once, one learning rate each"
build/tools/hfta-train "$out/fused.pt" --optimizer adam --lr 0.0001,0.0003,0.001,0.003 --epochs 10 \
  --batch-size 32 --out "$out/run" --checkpoint-every 5 --export-best "$out/best"
.venv/bin/python scripts/plot_metrics.py "$out/run/metrics.csv" "$out/run/curves.png"
echo "== the best member runs in plain PyTorch, without hfta"
.venv/bin/python -c "
import glob, torch
path = glob.glob('$out/best/member_*.pt')[0]
data = torch.load('.data/digits.pt')
model = torch.jit.load(path).eval()
with torch.no_grad():
    accuracy = (model(data['images']).argmax(1) == data['labels']).float().mean().item()
print(f'{path}: {100 * accuracy:.1f}% of all 1797 digits right')"
