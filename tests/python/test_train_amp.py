"""hfta-train --amp, end to end.

1. Fused equals alone under mixed precision: 3 fresh members of the digits
   CNN trained fused with --amp (bfloat16; and float16 with a loss scale
   per member) have the metrics each has when trained alone with the same
   flags (--array-size 1). Tolerance: fusion changes some bfloat16/float16
   roundings by one unit in the last place (tests/passes/autocast_test.cpp), and
   training carries such a change on as it carries any rounding of the low
   dtype; how far, this test measures per member as the distance between
   its run alone with and without --amp. Fusion must stay within that
   distance (and within 1e-3 where it is smaller).
2. One member's overflow costs only that member: in float16, member 2 (a
   learning rate that blows up) skips its steps while members 0 and 1 skip
   exactly the steps they skip alone; HFTA's one scaler for the summed
   loss would have skipped theirs too.
3. A run interrupted and resumed from its checkpoint gives the metrics of
   an uninterrupted one, loss scales included (the scaler's state is in the
   checkpoint); resuming with another precision is refused.
4. --eval on CIFAR-10's binary format: each member's top-1 and top-5 test
   accuracy equal those of the exported member run alone in PyTorch under
   torch.autocast on test_batch.bin's first images (to 0.2%: a sample whose top logits lie
   within the fused forward's rounding of each other may flip).

python tests/python/test_train_amp.py --train BUILD/tools/hfta-train --runtime BUILD/runtime/libhfta_runtime.so
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn
import torch.nn.functional as F

import train_cli  # the script's own folder
from data_files import write_cifar10

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import cnn  # noqa: E402

SEEDS = [0, 1, 2]
FLOOR = 1e-3
LIMIT = 2000  # training samples, and test samples for --eval


def rows(out):
    with open(os.path.join(out, "metrics.json")) as f:
        return json.load(f)


def train(args, model, out, *flags):
    subprocess.run([args.train, model, "--out", out, "--threads", "1", "--batch-size", "32", *flags], check=True,
                   stdout=subprocess.DEVNULL)
    return rows(out)


def fused_equals_alone(args, tmp, model, lrs, amp_flags):
    common = ["--momentum", "0.9", "--epochs", "2"]
    name = amp_flags[-1] if len(amp_flags) > 1 else "bfloat16"
    fused = train(args, model, os.path.join(tmp, f"fused_{name}"), "--array-size", "3",
                  "--seeds", ",".join(map(str, SEEDS)), "--lr", ",".join(map(str, lrs)), *common, *amp_flags)
    worst, skipped = 0.0, {}
    for b, (seed, lr) in enumerate(zip(SEEDS, lrs)):
        alone_flags = ["--array-size", "1", "--seeds", str(seed), "--lr", str(lr), *common]
        alone = train(args, model, os.path.join(tmp, f"alone_{name}_{b}"), *alone_flags, *amp_flags)
        exact = train(args, model, os.path.join(tmp, f"exact_{name}_{b}"), *alone_flags)
        mine = [r for r in fused if r["member"] == b]
        assert len(mine) == len(alone) == 2
        for f, a, e in zip(mine, alone, exact):
            assert f["amp"] == a["amp"] == name and e["amp"] == "none"
            skipped[b] = skipped.get(b, 0) + f["skipped_steps"]
            if a["diverged"]:
                assert f["diverged"], f"member {b} diverged alone but not fused"
                continue
            assert f["skipped_steps"] == a["skipped_steps"], f"member {b}: fused skipped {f}, alone {a}"
            assert f["loss_scale"] == a["loss_scale"], (b, f, a)
            for key in ("train_loss", "heldout_loss", "heldout_accuracy"):
                if a[key] is None or e[key] is None:  # NaN (null in JSON): a diverging member
                    assert (f[key] is None) == (a[key] is None), (name, b, key, f, a)
                    continue
                allowed = max(FLOOR, abs(a[key] - e[key]))
                worst = max(worst, abs(f[key] - a[key]) / allowed)
                assert abs(f[key] - a[key]) <= allowed, \
                    f"{name} member {b} epoch {f['epoch']} {key}: fused {f[key]}, alone {a[key]}, float32 {e[key]}"
    print(f"--amp {name}: fused vs alone within {worst:.2f} of the tolerance; skipped steps per member {skipped}")
    return skipped


def resume_keeps_the_scaler(args, tmp, model):
    common = ["--array-size", "3", "--lr", "0.01,0.03,3", "--momentum", "0.9", "--amp", "--amp-dtype", "float16"]
    whole = train(args, model, os.path.join(tmp, "whole"), *common, "--epochs", "3")
    cut = os.path.join(tmp, "cut")
    train(args, model, cut, *common, "--epochs", "2", "--checkpoint-every", "2")
    resumed = train(args, model, cut, *common, "--epochs", "3", "--resume", os.path.join(cut, "checkpoint"))
    without_time = [[{k: v for k, v in r.items() if not k.endswith("seconds")} for r in run] for run in (whole, resumed)]
    assert without_time[0] == without_time[1], "the resumed run differs from the uninterrupted one"
    refused = subprocess.run([args.train, model, *common[:-3], "--epochs", "3", "--resume",
                              os.path.join(cut, "checkpoint"), "--out", cut], capture_output=True, text=True)
    assert refused.returncode == 2 and "trained with mixed precision float16" in refused.stderr, refused.stderr
    print("--amp float16: resumed run equals the uninterrupted one (loss scales included)")


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 10, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.conv(x)), (10, 1)), 1))


def eval_matches_pytorch(args, tmp):
    data = os.path.join(tmp, "cifar10")
    write_cifar10(data, torch.Generator().manual_seed(0), test=True)
    model = os.path.join(tmp, "probe.pt")
    torch.jit.save(torch.jit.script(Probe()), model)
    out, best = os.path.join(tmp, "eval"), os.path.join(tmp, "eval_members")
    subprocess.run([args.train, model, "--dataset", "cifar10", "--data", data, "--limit", str(LIMIT), "--array-size", "3",
                    "--lr", "0.01,0.05,0.2", "--momentum", "0.9", "--epochs", "1", "--amp", "--eval", "--out", out,
                    "--export-best", best, "--top", "3", "--threads", "2"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "eval.csv")) as f:
        evaluated = list(csv.DictReader(f))
    raw = torch.frombuffer(bytearray(open(os.path.join(data, "test_batch.bin"), "rb").read()), dtype=torch.uint8)
    raw = raw.view(10000, 3073)[:LIMIT]  # --limit applies to the test split too
    labels, images = raw[:, 0].long(), raw[:, 1:].reshape(LIMIT, 3, 32, 32).float() / 255
    for row in evaluated:
        b = int(row["member"])
        member = torch.jit.load(os.path.join(best, f"member_{b}.pt")).eval()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            logits = torch.cat([member(images[i:i + 500]) for i in range(0, LIMIT, 500)]).float()
        top1 = (logits.argmax(1) == labels).double().mean().item()
        top5 = (logits.topk(5, 1).indices == labels[:, None]).any(1).double().mean().item()
        assert row["data"] == "cifar10 test" and len(evaluated) == 3, row
        assert abs(float(row["top1"]) - top1) <= 2e-3 and abs(float(row["top5"]) - top5) <= 2e-3, (row, top1, top5)
        assert float(row["top5"]) >= float(row["top1"])
    print(f"--eval: top-1/top-5 of {len(evaluated)} members on the CIFAR-10 test batch as PyTorch computes them")


def main():
    args = train_cli.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(123)
        model = os.path.join(tmp, "model.pt")
        torch.jit.save(torch.jit.script(cnn.DigitsCNN()), model)
        fused_equals_alone(args, tmp, model, [0.01, 0.03, 0.1], ["--amp"])
        skipped = fused_equals_alone(args, tmp, model, [0.01, 0.03, 3.0], ["--amp", "--amp-dtype", "float16"])
        assert skipped[2] > skipped[0] and skipped[2] > skipped[1], skipped
        resume_keeps_the_scaler(args, tmp, model)
        eval_matches_pytorch(args, tmp)
    print("test_train_amp: OK")


if __name__ == "__main__":
    main()
