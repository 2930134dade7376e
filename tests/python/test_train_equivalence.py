"""hfta-train's promise, end to end: training 4 fresh members of a model
fused (--array-size 4, --seeds) gives each member the metrics it has when
trained alone in plain PyTorch (pytorch_reference.py) from
`torch.manual_seed(seed); Model()`; and with learning rate 0 the exported
members are exactly that initialization.

The runs are in float64. Fused and alone differ only in the order of their
sums (one grouped convolution against one dense one), and over 2 epochs at
learning rate 0.3 with momentum 0.9 training amplifies that rounding: in
float32 (unit roundoff 6e-8) the losses differed by up to 1.7e-3 relative
on an Intel Xeon and 1e-4 on an AMD EPYC, which no tolerance can tell from
a real error. The amplified difference scales with the unit roundoff, which
is 2^-29 (1.9e-9) times smaller in float64: 1.7e-3 becomes ~3e-12, so the
tolerance below, 1e-9, leaves a margin of 300 and still fails on any real
error larger than one part in a billion.

test_train_against_pytorch.py holds every optimizer and schedule to the
same oracle; this test adds members' own seeds and a high learning rate,
and runs on a GPU as well (--device cuda, from scripts/gpu_check.sh: both
sides there, float64 again).

python tests/python/test_train_equivalence.py --train BUILD/tools/hfta-train --runtime BUILD/runtime/libhfta_runtime.so
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch

import train_cli  # the script's own folder
from pytorch_reference import Run, digits_split, train_alone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import cnn  # noqa: E402

LRS = [0.01, 0.03, 0.1, 0.3]
TOLERANCE = 1e-9  # relative; see above
SEEDS = [5, 11, 2, 7]
LIMIT, HOLDOUT, BATCH, EPOCHS, SEED = 800, 0.2, 32, 2, 3


def main():
    args = train_cli.parse_args()
    torch.set_num_threads(1)
    train, heldout = digits_split(LIMIT, HOLDOUT, SEED, torch.float64)
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(123)  # any weights: hfta-train re-initializes the members
        model = os.path.join(tmp, "model.pt")
        torch.jit.save(torch.jit.script(cnn.DigitsCNN()), model)
        subprocess.run([args.train, model, "--array-size", "4", "--seeds", ",".join(map(str, SEEDS)),
                        "--lr", ",".join(map(str, LRS)), "--optimizer", "sgd", "--momentum", "0.9", "--device", args.device,
                        "--epochs", str(EPOCHS), "--batch-size", str(BATCH), "--limit", str(LIMIT), "--holdout",
                        str(HOLDOUT), "--seed", str(SEED), "--threads", "1", "--dtype", "float64",
                        "--out", os.path.join(tmp, "fused")], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(tmp, "fused", "metrics.json")) as f:  # every bit (metrics.csv has 6 digits)
            fused = json.load(f)
        worst = 0.0
        for b, (seed, lr) in enumerate(zip(SEEDS, LRS)):
            torch.manual_seed(seed)
            alone = cnn.DigitsCNN().double().to(args.device)
            expected = train_alone(alone, torch.optim.SGD(alone.parameters(), lr=lr, momentum=0.9), train, heldout,
                                   Run(EPOCHS, BATCH, SEED, device=args.device))
            mine = [r for r in fused if int(r["member"]) == b]
            assert len(mine) == len(expected) == EPOCHS
            for f, a in zip(mine, expected):
                for key in ("train_loss", "heldout_loss"):
                    worst = max(worst, abs(f[key] - a[key]) / abs(a[key]))
                    assert math.isclose(f[key], a[key], rel_tol=TOLERANCE), \
                        f"member {b} {key}: {f[key]!r} fused, {a[key]!r} in PyTorch"
                # (Two top logits within 1e-12 of each other would be needed to flip a prediction.)
                assert f["heldout_accuracy"] == a["heldout_accuracy"], (b, f, a)
                assert f["lr"] == a["lr"]
        print(f"fused vs PyTorch on {args.device}: worst relative loss difference {worst:.2e}")
        # A member that diverges (float32, lr 1e30: its loss overflows) is
        # frozen and reported diverged from the epoch PyTorch's loop stops
        # it; the other trains on as alone (float32: within 1e-4 relative,
        # 25 times the 4e-6 that fused and alone differ by in float32).
        subprocess.run([args.train, model, "--array-size", "2", "--lr", "0.05,1e30", "--optimizer", "sgd", "--momentum",
                        "0.9", "--epochs", str(EPOCHS), "--batch-size", str(BATCH), "--limit", str(LIMIT), "--holdout",
                        str(HOLDOUT), "--seed", str(SEED), "--threads", "1", "--out", os.path.join(tmp, "diverging")],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(tmp, "diverging", "metrics.json")) as f:
            diverging = json.load(f)
        train32, heldout32 = digits_split(LIMIT, HOLDOUT, SEED, torch.float32)
        for b, lr in enumerate([0.05, 1e30]):
            torch.manual_seed(b)
            alone = cnn.DigitsCNN()
            expected = train_alone(alone, torch.optim.SGD(alone.parameters(), lr=lr, momentum=0.9), train32, heldout32,
                                   Run(EPOCHS, BATCH, SEED))
            mine = [r for r in diverging if int(r["member"]) == b]
            assert [r["diverged"] for r in mine] == [a["diverged"] for a in expected], (b, mine, expected)
            if b == 0:
                for f, a in zip(mine, expected):
                    assert math.isclose(f["train_loss"], a["train_loss"], rel_tol=1e-4), (f, a)
        assert [r["diverged"] for r in diverging if r["member"] == 1] == [True] * EPOCHS, diverging
        print("a diverging member is frozen and reported from the step PyTorch's loop stops it; the other trains on")
        # With lr 0 the exported members' parameters are their initial ones.
        start = os.path.join(tmp, "start")
        subprocess.run([args.train, model, "--array-size", "4", "--seeds", ",".join(map(str, SEEDS)), "--lr", "0",
                        "--epochs", "1", "--export-best", start, "--top", "4", "--threads", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        for b, seed in enumerate(SEEDS):
            torch.manual_seed(seed)
            expected = dict(cnn.DigitsCNN().named_parameters())
            got = dict(torch.jit.load(os.path.join(start, f"member_{b}.pt")).named_parameters())
            for name, value in expected.items():
                assert torch.equal(got[name], value), f"member {b} ({seed}): {name} is not PyTorch's initialization"
    print("test_train_equivalence: OK")


if __name__ == "__main__":
    main()
