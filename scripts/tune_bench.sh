#!/usr/bin/env bash
# hfta-tune's benchmark: a Hyperband search (R = 27 epochs, eta = 3: 49
# trials, 357 trial-epochs) of the digits CNN over learning rate, momentum
# and weight decay (examples/tune/digits_space.json), once with the trials
# fused (the planned array size) and once with every trial alone
# (--array-size 1), on the shipped digits. Prints both wall times, their
# ratio, and each search's best trial.
#
#   scripts/tune_bench.sh [OUT] [extra hfta-tune flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/tune_bench}"
shift || true
scripts/setup.sh
scripts/build.sh hfta-tune
rm -rf "$out" && mkdir -p "$out"
.venv/bin/python examples/cnn.py "$out" --kind digits --members 1 > /dev/null
common=(examples/tune/digits_space.json --model "$out/digits_0.pt" --algorithm hyperband --max-epochs 27 --eta 3
  --seed 1 "$@")
run() {  # run NAME FLAGS...: the search into OUT/NAME, its wall time on stdout
  local name=$1
  shift
  local start
  start=$(date +%s.%N)
  build/tools/hfta-tune "${common[@]}" --out "$out/$name" "$@" > "$out/$name.log"
  .venv/bin/python -c "print(round($(date +%s.%N) - $start, 1))"
}
fused=$(run fused)
alone=$(run alone --array-size 1)
best() { sed -n 's/.*the best trial, \([0-9]*\),.*/\1/p' "$out/$1.log"; }
arrays() { tail -n +2 "$out/$1/arrays.csv" | wc -l; }
grep "array size" "$out/fused.log" || true
printf 'fused: %.1f s (%d arrays), best trial %s\n' "$fused" "$(arrays fused)" "$(best fused)"
printf 'alone: %.1f s (%d arrays), best trial %s\n' "$alone" "$(arrays alone)" "$(best alone)"
echo "speed-up: $(.venv/bin/python -c "print(round($alone / $fused, 2))")x"
