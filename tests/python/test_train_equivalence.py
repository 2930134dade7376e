"""hfta-train's promise, end to end: training 4 fresh members of a model
fused (--array-size 4) gives each member the metrics that 4 separate runs
of the same command with --array-size 1 give it; and member b starts as
`torch.manual_seed(b); Model()` in Python.

The runs are in float64. Fused and alone differ only in the order of their
sums (one grouped convolution against one dense one), and over 90 steps at
learning rate 0.3 with momentum 0.9 training amplifies that rounding: in
float32 (unit roundoff 6e-8) the losses differed by up to 1.7e-3 relative
on an Intel Xeon and 1e-4 on an AMD EPYC, which no tolerance can tell from
a real error. The amplified difference scales with the unit roundoff, which
is 2^-29 (1.9e-9) times smaller in float64: 1.7e-3 becomes ~3e-12, so the
tolerance below, 1e-9, leaves a margin of 300 and still fails on any real
error larger than one part in a billion.

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import cnn  # noqa: E402

LRS = [0.01, 0.03, 0.1, 0.3]
TOLERANCE = 1e-9  # relative; see above
SEEDS = [0, 1, 2, 3]


def rows(path):
    """metrics.json: every value to the last bit (metrics.csv rounds to 6 digits)."""
    with open(path) as f:
        return json.load(f)


def main():
    args = train_cli.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(123)  # any weights: hfta-train re-initializes the members
        model = os.path.join(tmp, "model.pt")
        torch.jit.save(torch.jit.script(cnn.DigitsCNN()), model)
        common = ["--optimizer", "sgd", "--momentum", "0.9", "--epochs", "2", "--batch-size", "32", "--threads", "1",
                  "--dtype", "float64"]
        subprocess.run([args.train, model, "--array-size", "4", "--seeds", ",".join(map(str, SEEDS)),
                        "--lr", ",".join(map(str, LRS)), "--out", os.path.join(tmp, "fused"),
                        "--export-best", os.path.join(tmp, "fused_best"), "--top", "4", *common],
                       check=True, stdout=subprocess.DEVNULL)
        fused = rows(os.path.join(tmp, "fused", "metrics.json"))
        worst = 0.0
        for b, (seed, lr) in enumerate(zip(SEEDS, LRS)):
            out = os.path.join(tmp, f"alone{b}")
            subprocess.run([args.train, model, "--array-size", "1", "--seeds", str(seed), "--lr", str(lr),
                            "--out", out, *common], check=True, stdout=subprocess.DEVNULL)
            alone = rows(os.path.join(out, "metrics.json"))
            mine = [r for r in fused if int(r["member"]) == b]
            assert len(mine) == len(alone) == 2
            for f, a in zip(mine, alone):
                for key in ("train_loss", "heldout_loss"):
                    x, y = float(f[key]), float(a[key])
                    worst = max(worst, abs(x - y) / abs(y))
                    assert math.isclose(x, y, rel_tol=TOLERANCE), f"member {b} {key}: {x!r} fused, {y!r} alone"
                # (Two top logits within 1e-12 of each other would be needed to flip a prediction.)
                assert f["heldout_accuracy"] == a["heldout_accuracy"], (b, f, a)
                assert f["lr"] == a["lr"]
        print(f"fused vs alone: worst relative loss difference {worst:.2e}")
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
