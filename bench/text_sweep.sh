#!/usr/bin/env bash
# A Transformer sweep on the embedded English corpus (Debian's fortunes,
# converted at setup to WikiText-2's format in .data/fortunes): 4 members of
# the word language model of examples/text.py (lm_small, HFTA's Transformer
# workload at a CPU's size), fused, trained at once with one Adam learning
# rate each on 1000 sequences of 35 words for 2 epochs, ranked by held-out
# loss (perplexity in OUT/run/metrics.csv); the best exported as a plain
# TorchScript model. About a minute of training on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh hfta-fuse hfta-train hfta_runtime
out=out/text_sweep
rm -rf "$out" && mkdir -p "$out"
echo "== scripting 4 Transformer language models (seeds 0-3) for the corpus's vocabulary into $out"
.venv/bin/python examples/text.py "$out" --kind lm_small --members 4 --vocab-from .data/fortunes
echo "== fusing them"
build/tools/hfta-fuse "$out"/lm_small_{0..3}.pt -o "$out/fused.pt" --report
echo "== training the 4 members at once, one learning rate each"
build/tools/hfta-train "$out/fused.pt" --dataset wikitext --optimizer adam --lr 0.0003,0.001,0.002,0.004 \
  --epochs 2 --limit 1000 --batch-size 20 --metric loss --out "$out/run" --export-best "$out/best"
