# Sourced by bench/tune_bench.sh and bench/tune_workers_bench.sh, with
# $out set: sets up, builds hfta-tune, scripts the digits CNN into $out, and
# defines `run NAME FLAGS...` (the Hyperband search of
# examples/tune/digits_space.json, eta = 3, seed 1, into $out/NAME; its wall
# time on stdout) and `best NAME` (that search's best trial).
scripts/setup.sh
scripts/build.sh hfta-tune
rm -rf "$out" && mkdir -p "$out"
.venv/bin/python examples/cnn.py "$out" --kind digits --members 1 > /dev/null
run() {
  local name=$1
  shift
  local start
  start=$(date +%s.%N)
  build/tools/hfta-tune examples/tune/digits_space.json --model "$out/digits_0.pt" --algorithm hyperband --eta 3 \
    --seed 1 --out "$out/$name" "$@" > "$out/$name.log"
  .venv/bin/python -c "print(round($(date +%s.%N) - $start, 1))"
}
best() { sed -n 's/.*the best trial, \([0-9]*\),.*/\1/p' "$out/$1.log"; }
