#!/usr/bin/env bash
# hfta-tune's benchmark: a Hyperband search (R = 27 epochs, eta = 3: 49
# trials, 357 trial-epochs) of the digits CNN over learning rate, momentum
# and weight decay (examples/tune/digits_space.json), once with the trials
# fused (the planned array size) and once with every trial alone
# (--array-size 1), on the shipped digits. Prints both wall times, their
# ratio, and each search's best trial.
#
#   bench/tune_bench.sh [OUT] [extra hfta-tune flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/tune_bench}"
shift || true
source bench/tune_bench_common.sh
fused=$(run fused --max-epochs 27 "$@")
alone=$(run alone --max-epochs 27 "$@" --array-size 1)
arrays() { tail -n +2 "$out/$1/arrays.csv" | wc -l; }
grep "array size" "$out/fused.log" || true
printf 'fused: %.1f s (%d arrays), best trial %s\n' "$fused" "$(arrays fused)" "$(best fused)"
printf 'alone: %.1f s (%d arrays), best trial %s\n' "$alone" "$(arrays alone)" "$(best alone)"
echo "speed-up: $(.venv/bin/python -c "print(round($alone / $fused, 2))")x"
