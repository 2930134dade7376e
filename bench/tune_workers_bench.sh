#!/usr/bin/env bash
# hfta-tune over workers against one process: bench/tune_bench.sh's
# Hyperband search (R = 27, eta = 3: 49 trials of the digits CNN, fused in
# planned arrays), once as one process with every core's threads, once as
# --workers N processes sharing the cores (N = 2 by default). Prints both
# wall times, their ratio, and each search's best trial. The two train the
# same arrays, but in float32 with other thread counts (and forms each
# worker times for itself) they round differently, and 27 epochs amplify
# that: two trials within a fraction of a percent can swap places.
#
#   bench/tune_workers_bench.sh [WORKERS] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
workers="${1:-2}"
out="${2:-out/tune_workers_bench}"
source bench/tune_bench_common.sh
cores=$(nproc)
# The array size is measured once (and cached) by a short search first, and
# the convolutions' forms timed: neither timed run pays for them.
# (The plan is cached per thread count: once for each.)
threads=$((cores / workers > 0 ? cores / workers : 1))
run warm --max-epochs 1 --threads "$cores" > /dev/null
run warm_workers --max-epochs 1 --threads "$threads" > /dev/null
one=$(run one --max-epochs 27 --threads "$cores")
many=$(run workers --max-epochs 27 --workers "$workers" --threads "$threads")
grep "array size" "$out/one.log" || true
printf 'one process, %d threads: %.1f s, best trial %s\n' "$cores" "$one" "$(best one)"
printf '%d workers: %.1f s, best trial %s (arrays per worker: %s)\n' "$workers" "$many" "$(best workers)" \
  "$(tail -n +2 "$out/workers/arrays.csv" | awk -F, '{n[$11]++} END {for (w in n) printf "%s:%d ", w, n[w]}')"
echo "one process / workers: $(.venv/bin/python -c "print(round($one / $many, 2))")x"
