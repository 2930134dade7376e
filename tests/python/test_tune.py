"""hfta-tune against each trial run alone.

1. Every trial of a Hyperband search and of an ASHA search (fused arrays
   that shrink as rungs stop trials, survivors of several arrays merged)
   has, epoch by epoch, the metrics it has trained alone in plain PyTorch
   (pytorch_reference.py: torch.optim.SGD with the trial's settings, from
   `torch.manual_seed(member_seed); Model()`, the same data order); each
   Hyperband bracket decides on as many trials at each rung, after as
   many epochs, and promotes as many, as Li et al.'s arithmetic says; and
   each rung promotes the trials that the alone runs rank best.
2. A search stopped in the middle of a rung (SIGINT, or the journal cut
   back to the middle of a round) and resumed ends with the same results as
   one never stopped, and trains only what was not finished.

python tests/python/test_tune.py --tune BUILD/tools/hfta-tune
"""
import argparse
import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import torch

from pytorch_reference import Run, digits_split, train_alone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import mlp  # noqa: E402
import cnn  # noqa: E402,F401  (registers the digits CNN)

SPACE = {"lr": {"loguniform": [0.003, 0.3]}, "momentum": {"uniform": [0.5, 0.95]},
         "weight_decay": {"choice": [0, 0.0001, 0.001]}, "seed": {"int": [0, 99]}}
R, ETA = 9, 3
LIMIT, BATCH, SEED = 600, 32, 3
RUN = ["--limit", str(LIMIT), "--batch-size", str(BATCH), "--seed", str(SEED), "--threads", "1", "--dtype", "float64"]
# float64, as test_train_equivalence.py: fused and alone differ only in the
# order of their sums. In float32, 9 epochs of SGD with momentum up to 0.95
# amplify that rounding to 1e-3 of a loss (measured), too much to tell a
# wrong carry-over from rounding; in float64 the same amplification of a
# 2^-29 times smaller rounding is ~1e-12, and 1e-9 leaves a margin for any
# processor's kernels.
TOLERANCE = 1e-9


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def tune(args, tmp, name, *extra, check=True):
    out = os.path.join(tmp, name)
    command = [args.tune, os.path.join(tmp, "space.json"), "--model", os.path.join(tmp, "digits_0.pt"),
               "--max-epochs", str(R), "--eta", str(ETA), "--out", out, *RUN, *extra]
    subprocess.run(command, check=check, stdout=subprocess.DEVNULL)
    return out


def alone(data, trial, cache):
    """Trial `trial` (its settings and seed from trials.json) trained alone
    in PyTorch for all R epochs, its rows by epoch."""
    key = json.dumps([trial["settings"], trial["member_seed"]], sort_keys=True)
    if key not in cache:
        s = trial["settings"]
        torch.manual_seed(trial["member_seed"])
        model = cnn.DigitsCNN().double()
        optimizer = torch.optim.SGD(model.parameters(), lr=s["lr"], momentum=s["momentum"],
                                    weight_decay=s["weight_decay"])
        rows = train_alone(model, optimizer, *data, Run(R, BATCH, SEED))
        cache[key] = {r["epoch"]: r for r in rows}
    return cache[key]


def check_against_alone(data, out, cache):
    """Returns the worst relative difference of a loss, fused against alone."""
    with open(os.path.join(out, "trials.json")) as f:
        trials = json.load(f)
    worst = 0.0
    for trial in trials:
        mine = alone(data, trial, cache)
        assert trial["metrics"], f"trial {trial['trial']} never trained"
        for row in trial["metrics"]:
            theirs = mine[row["epoch"]]
            for key in ("train_loss", "heldout_loss"):
                x, y = row[key], theirs[key]
                worst = max(worst, abs(x - y) / abs(y))
                assert math.isclose(x, y, rel_tol=TOLERANCE), \
                    f"{out}: trial {trial['trial']} epoch {row['epoch']} {key}: {x!r} tuned, {y!r} alone"
            assert row["heldout_accuracy"] == theirs["heldout_accuracy"], (trial["trial"], row, theirs)
    return trials, worst


def hyperband_rungs():
    """Li et al.'s brackets for R and ETA: {(bracket s, rung i): (trials
    decided on, epochs trained, trials promoted)}, every rung that decides.
    Bracket s starts n = ceil((s_max + 1) / (s + 1) * ETA^s) trials at
    R * ETA^-s epochs; rung i keeps floor(n * ETA^-i) of them, trained
    R * ETA^(i - s) epochs, and promotes floor(that / ETA)."""
    s_max = round(math.log(R, ETA))
    rungs = {}
    for s in range(s_max + 1):
        n = math.ceil((s_max + 1) / (s + 1) * ETA ** s)
        for i in range(s):  # the last rung, i = s, trains to R and decides nothing
            kept = n // ETA ** i
            rungs[(s, i)] = (kept, R // ETA ** (s - i), kept // ETA)
    return rungs


def check_hyperband_rungs(out, trials, cache, data):
    """Each rung decides on and promotes as many trials as the arithmetic
    says, and promotes those the alone runs rank best after its epochs."""
    by_id = {t["trial"]: t for t in trials}
    rungs = {}
    for d in read_csv(os.path.join(out, "rungs.csv")):
        rungs.setdefault((int(d["bracket"]), int(d["rung"])), []).append(d)
    expected = hyperband_rungs()
    assert sorted(rungs) == sorted(expected), f"rungs decided {sorted(rungs)}, Hyperband's {sorted(expected)}"
    for (bracket, rung), decisions in rungs.items():
        count, epoch, promote = expected[(bracket, rung)]
        assert len(decisions) == count, f"bracket {bracket} rung {rung} decided on {len(decisions)} trials, not {count}"
        ranked = sorted(decisions, key=lambda d: (alone(data, by_id[int(d["trial"])], cache)[epoch]["heldout_loss"],
                                                  int(d["trial"])))
        promoted = {int(d["trial"]) for d in decisions if d["decision"] == "promoted"}
        best = {int(d["trial"]) for d in ranked[:promote]}
        assert promoted == best, f"bracket {bracket} rung {rung}: promoted {promoted}, alone ranks {best} best"


def results(out):
    """What a finished search reports, without times and the journal column."""
    keep = {}
    for name in ("metrics.csv", "rungs.csv", "trials.csv"):
        with open(os.path.join(out, name)) as f:
            keep[name] = f.read()
    keep["arrays"] = [{k: v for k, v in a.items() if k not in ("seconds", "from_journal")}
                      for a in read_csv(os.path.join(out, "arrays.csv"))]
    return keep


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tune", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mlp.save_members(tmp, "digits", 1)
        with open(os.path.join(tmp, "space.json"), "w") as f:
            json.dump(SPACE, f)
        cache = {}
        data = digits_split(LIMIT, 0.2, SEED, torch.float64)  # hfta-train's default --holdout

        # 1. Hyperband (arrays of at most 4: rung 0's 9 trials in 3 arrays,
        # its 3 survivors merged into one) and ASHA, against alone.
        hyperband = tune(args, tmp, "hyperband", "--array-size", "4", "--keep-checkpoints")
        arrays = read_csv(os.path.join(hyperband, "arrays.csv"))
        assert [len(a["trials"].split()) for a in arrays if a["bracket"] == "2"] == [3, 3, 3, 3, 1], arrays
        trials, worst = check_against_alone(data, hyperband, cache)
        assert len(trials) == 17  # R = 9, eta = 3: brackets of 9, 5 and 3 trials
        check_hyperband_rungs(hyperband, trials, cache, data)
        asha = tune(args, tmp, "asha", "--algorithm", "asha", "--trials", "8", "--array-size", "3")
        trials, worst_asha = check_against_alone(data, asha, cache)
        assert len(trials) == 8 and any(t["epochs"] == R for t in trials), trials
        # Once every trial is done, only the best one's array is kept (for best.pt).
        best = min(trials, key=lambda t: (t["metrics"][-1]["heldout_loss"], t["trial"]))
        arrays = read_csv(os.path.join(asha, "arrays.csv"))
        last = max(int(a["array"]) for a in arrays if str(best["trial"]) in a["trials"].split())
        assert os.listdir(os.path.join(asha, "arrays")) == [str(last)], os.listdir(os.path.join(asha, "arrays"))
        print(f"tuned vs PyTorch alone over {len(cache)} trials: worst relative loss difference {max(worst, worst_asha):.2e}")

        # 2. The journal cut back to the first two of the first round's arrays, as a stop
        # there leaves it: --resume replays those and trains the rest.
        cut = os.path.join(tmp, "cut")
        shutil.copytree(hyperband, cut)
        with open(os.path.join(cut, "journal.jsonl")) as f:
            lines = f.readlines()
        with open(os.path.join(cut, "journal.jsonl"), "w") as f:
            f.writelines(lines[:2])
        for entry in os.listdir(os.path.join(cut, "arrays")):
            if int(entry) >= 2:
                shutil.rmtree(os.path.join(cut, "arrays", entry))
        with open(os.path.join(cut, "command.json")) as f:
            command = json.load(f)
        command["args"] = [a if a != hyperband else cut for a in command["args"]]
        with open(os.path.join(cut, "command.json"), "w") as f:
            json.dump(command, f)
        subprocess.run([args.tune, "--resume", cut], check=True, stdout=subprocess.DEVNULL)
        assert results(cut) == results(hyperband), "a resumed search ended elsewhere"
        replayed = [a["from_journal"] for a in read_csv(os.path.join(cut, "arrays.csv"))]
        assert replayed == ["1", "1"] + ["0"] * (len(replayed) - 2), replayed

        # SIGINT once the second array has finished: exit 130, then --resume.
        stopped = os.path.join(tmp, "stopped")
        command = [args.tune, os.path.join(tmp, "space.json"), "--model", os.path.join(tmp, "digits_0.pt"),
                   "--max-epochs", str(R), "--out", stopped, "--array-size", "4", *RUN]
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in run.stdout:
            if line.startswith("hfta-tune: array   1:"):
                run.send_signal(signal.SIGINT)
                break
        run.stdout.read()
        stderr = run.stderr.read()
        assert run.wait() == 130, (run.returncode, stderr)
        assert f"go on with hfta-tune --resume {stopped}" in stderr, stderr
        subprocess.run([args.tune, "--resume", stopped], check=True, stdout=subprocess.DEVNULL)
        assert results(stopped) == results(hyperband), "a search resumed after SIGINT ended elsewhere"
    print("test_tune: OK")


if __name__ == "__main__":
    main()
