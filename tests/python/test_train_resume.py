"""hfta-train stopped by SIGINT in the middle of an epoch writes a
checkpoint and exits with 130; --resume then ends with the same metrics
(the learning rates of a schedule stepped every batch included) and the same
weights, bit for bit, as a run that was never stopped.

The three runs share a cache of measured forms of their own: the forms the
first run races are the ones the others read, as runs on a machine with a
writable cache do. (Without one, each process races anew and may choose a
form that rounds differently; test_tune_workers.py pins the heuristic's.)

python tests/python/test_train_resume.py --train BUILD/tools/hfta-train --fuse BUILD/tools/hfta-fuse \
    --runtime BUILD/runtime/libhfta_runtime.so
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import torch

import train_cli  # the script's own folder

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import mlp  # noqa: E402
import cnn  # noqa: E402,F401  (registers the digits CNN)

EPOCHS = 6
# The digits' 1438 training samples in batches of 16.
BATCHES = 90
DELAYS = (0.15, 0.05, 0.3)


def metrics(path):
    """The metrics without the wall times (the "seconds" and "train_seconds" columns)."""
    with open(path) as f:
        rows = [line.strip().split(",") for line in f]
    kept = [i for i, name in enumerate(rows[0]) if not name.endswith("seconds")]
    return [",".join(row[i] for i in kept) for row in rows]


def interrupt(command, delay, checkpoint):
    """Runs `command`, sends SIGINT `delay` seconds after epoch 2's line, and
    returns where the checkpoint says the run stopped."""
    run = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    for line in run.stdout:
        if line.startswith("epoch   2"):
            time.sleep(delay)
            run.send_signal(signal.SIGINT)
            break
    run.stdout.read()
    assert run.wait() == 130, f"an interrupted run exits with 130, got {run.returncode}"
    assert os.path.isfile(os.path.join(checkpoint, "state.pt")), "no checkpoint after the interrupt"
    state = torch.load(os.path.join(checkpoint, "state.pt"), weights_only=False)  # (our own file)
    return {"epochs_done": state["epochs_done"], "batches_done": state["batches_done"]}


def main():
    args = train_cli.parse_args("--fuse")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HFTA_CACHE_DIR"] = os.path.join(tmp, "cache")  # see above
        paths = mlp.save_members(tmp, "digits", 3)
        fused = os.path.join(tmp, "fused.pt")
        subprocess.run([args.fuse, *paths, "-o", fused], check=True, stdout=subprocess.DEVNULL)
        common = [args.train, fused, "--optimizer", "sgd", "--lr", "0.05,0.1,0.2", "--momentum", "0.9",
                  "--scheduler", "onecycle", "--max-lr", "0.1,0.2,0.4",  # stepped every batch: resumed mid-epoch
                  "--epochs", str(EPOCHS), "--batch-size", "16", "--threads", "1", "--export-best"]
        whole, cut = os.path.join(tmp, "whole"), os.path.join(tmp, "cut")
        subprocess.run(common + [whole, "--top", "3", "--out", whole], check=True, stdout=subprocess.DEVNULL)

        checkpoint = os.path.join(cut, "checkpoint")
        position = None
        for delay in DELAYS:  # a later delay only if a stop fell on the epoch's boundary
            shutil.rmtree(cut, ignore_errors=True)
            position = interrupt(common + [cut, "--top", "3", "--out", cut], delay, checkpoint)
            if position["epochs_done"] == 2 and 0 < position["batches_done"] < BATCHES:
                break
        assert position["epochs_done"] == 2 and 0 < position["batches_done"] < BATCHES, \
            f"no interrupt fell inside epoch 3 (of {BATCHES} batches): {position}"
        print(f"interrupted after epoch {position['epochs_done']} and {position['batches_done']} batches of the next")
        out = subprocess.run(common + [cut, "--top", "3", "--out", cut, "--resume", checkpoint], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        assert "resumed from" in out, out
        print(out.splitlines()[0])
        expected, got = metrics(os.path.join(whole, "metrics.csv")), metrics(os.path.join(cut, "metrics.csv"))
        differ = [f"never stopped: {a}\n      resumed: {b}" for a, b in zip(expected, got) if a != b]
        assert expected == got, f"metrics differ after resuming ({len(expected)} and {len(got)} rows; the first " \
            f"of {len(differ)} differing:\n" + "\n".join([expected[0]] + differ[:3])
        for b in range(3):
            a = torch.jit.load(os.path.join(whole, f"member_{b}.pt")).state_dict()
            c = torch.jit.load(os.path.join(cut, f"member_{b}.pt")).state_dict()
            for name in a:
                assert torch.equal(a[name], c[name]), f"member {b}: {name} differs after resuming"
    print("test_train_resume: OK: interrupted + resumed == uninterrupted (metrics and weights)")


if __name__ == "__main__":
    main()
