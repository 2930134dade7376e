"""hfta-train against the training loop a PyTorch user writes: 4 fresh
DigitsCNN members (torch.manual_seed(b); Model()) trained fused by
hfta-train, and each trained alone in plain PyTorch (torch.optim.SGD, the
torch.optim.lr_scheduler policy stepped where hfta-train steps it, the same
loss, the same held-out split and batch order), give the same per-epoch
training loss, held-out loss, accuracy and learning rate.

Covers the schedules stepped every batch (OneCycleLR) and on each member's
held-out loss (ReduceLROnPlateau), per-member schedule settings, and the
cross-entropy and BCE-with-logits losses.

Both sides train in float64 (hfta-train --dtype float64; the members as
PyTorch initializes them in float32, then .double()). They sum in other
orders (hfta's fused kernels, PyTorch's per-member ones), and 3 epochs of
SGD with momentum carry that rounding on: in float32 the losses differed by
up to 4e-6 relative, a figure that depends on the processor's kernels. In
float64 the same amplification of a 2^-29 times smaller rounding gives
~1e-14; the tolerance, 1e-9, leaves a wide margin on any processor.

python tests/python/test_train_against_pytorch.py --train BUILD/tools/hfta-train --runtime BUILD/runtime/libhfta_runtime.so
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

import train_cli  # the script's own folder

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))
import cnn  # noqa: E402

LRS = [0.01, 0.03, 0.003, 0.02]
LIMIT, HOLDOUT, BATCH, EPOCHS, SEED = 600, 0.2, 32, 3, 7
TOLERANCE = 1e-9  # relative; see above

CASES = {
    # name: (hfta-train flags, loss, make a scheduler for member b, stepped per batch?)
    "onecycle-bce": (["--scheduler", "onecycle", "--max-lr", "0.1,0.2,0.05,0.1", "--pct-start", "0.4"],
                     "bce_with_logits",
                     lambda opt, b, total: torch.optim.lr_scheduler.OneCycleLR(
                         opt, max_lr=[0.1, 0.2, 0.05, 0.1][b], total_steps=total, pct_start=0.4), True),
    "plateau-ce": (["--scheduler", "plateau", "--patience", "0", "--factor", "0.5,0.3,0.5,0.2", "--threshold", "0.05,0.5,0.3,0.9"],
                   "cross_entropy",
                   lambda opt, b, total: torch.optim.lr_scheduler.ReduceLROnPlateau(
                       opt, factor=[0.5, 0.3, 0.5, 0.2][b], patience=0, threshold=[0.05, 0.5, 0.3, 0.9][b]), False),
}


def split(data):
    """hfta-train's --limit and held-out split: the first LIMIT samples, then
    a permutation from --seed."""
    images, labels = data["images"][:LIMIT].double(), data["labels"][:LIMIT].long()
    order = torch.randperm(LIMIT, generator=torch.Generator().manual_seed(SEED))
    held = int(LIMIT * HOLDOUT)
    train, heldout = order[:LIMIT - held], order[LIMIT - held:]
    return (images[train], labels[train]), (images[heldout], labels[heldout])


def member_loss(outputs, labels, loss):
    if loss == "cross_entropy":
        return F.cross_entropy(outputs, labels)
    return F.binary_cross_entropy_with_logits(outputs, F.one_hot(labels, outputs.shape[1]).to(outputs.dtype))


def train_alone(b, train, heldout, loss, make_scheduler, per_batch):
    """Member b in plain PyTorch: one row (train loss, held-out loss,
    accuracy, lr of the epoch's last batch) per epoch."""
    torch.manual_seed(b)
    model = cnn.DigitsCNN().double()
    opt = torch.optim.SGD(model.parameters(), lr=LRS[b], momentum=0.9)
    batches = math.ceil(len(train[0]) / BATCH)
    scheduler = make_scheduler(opt, b, EPOCHS * batches)
    rows = []
    for epoch in range(1, EPOCHS + 1):
        model.train()
        # hfta-train's batch order: a permutation from (seed, epoch).
        order = torch.randperm(len(train[0]), generator=torch.Generator().manual_seed(SEED * 1000003 + epoch))
        loss_sum = 0.0
        for i in range(batches):
            index = order[i * BATCH:(i + 1) * BATCH]
            opt.zero_grad()
            value = member_loss(model(train[0][index]), train[1][index], loss)
            value.backward()
            loss_sum += value.item()
            lr = opt.param_groups[0]["lr"]
            opt.step()
            if per_batch and scheduler.last_epoch + 1 < EPOCHS * batches:
                scheduler.step()
        model.eval()
        with torch.no_grad():
            held_sum, correct = 0.0, 0
            for i in range(0, len(heldout[0]), BATCH):
                x, y = heldout[0][i:i + BATCH], heldout[1][i:i + BATCH]
                out = model(x)
                held_sum += member_loss(out, y, loss).item() * len(x)
                correct += (out.argmax(1) == y).sum().item()
        held_loss = held_sum / len(heldout[0])
        if not per_batch:
            scheduler.step(held_loss)
        rows.append((loss_sum / batches, held_loss, correct / len(heldout[0]), lr))
    return rows


def main():
    args = train_cli.parse_args()
    torch.set_num_threads(1)
    data = torch.load(os.path.join(ROOT, ".data", "digits.pt"))
    train, heldout = split(data)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.pt")
        torch.jit.save(torch.jit.script(cnn.DigitsCNN()), model)
        for name, (flags, loss, make_scheduler, per_batch) in CASES.items():
            out = os.path.join(tmp, name)
            subprocess.run([args.train, model, "--array-size", "4", "--optimizer", "sgd", "--momentum", "0.9",
                            "--lr", ",".join(map(str, LRS)), "--loss", loss, "--limit", str(LIMIT),
                            "--holdout", str(HOLDOUT), "--seed", str(SEED), "--batch-size", str(BATCH),
                            "--epochs", str(EPOCHS), "--threads", "1", "--dtype", "float64", "--out", out, *flags],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "metrics.json")) as f:  # every bit (metrics.csv has 6 digits)
                fused = json.load(f)
            worst = 0.0
            lrs = set()
            for b in range(4):
                expected = train_alone(b, train, heldout, loss, make_scheduler, per_batch)
                got = [r for r in fused if int(r["member"]) == b]
                assert len(got) == EPOCHS
                for epoch, (row, (train_loss, held_loss, accuracy, lr)) in enumerate(zip(got, expected), 1):
                    where = f"{name}: member {b} epoch {epoch}"
                    for key, want in (("train_loss", train_loss), ("heldout_loss", held_loss)):
                        have = float(row[key])
                        worst = max(worst, abs(have - want) / abs(want))
                        assert math.isclose(have, want, rel_tol=TOLERANCE), f"{where}: {key} {have!r} vs {want!r}"
                    assert row["heldout_accuracy"] == accuracy, f"{where}: accuracy {row['heldout_accuracy']} vs {accuracy}"
                    assert math.isclose(row["lr"], lr, rel_tol=1e-12), f"{where}: lr {row['lr']!r} vs {lr!r}"
                    lrs.add(lr)
            # The schedule moved the rates (a test that would pass with no schedule proves nothing).
            assert len(lrs) > len(LRS), f"{name}: the learning rates never moved: {sorted(lrs)}"
            print(f"{name}: hfta-train vs PyTorch, worst relative loss difference {worst:.2e}, "
                  f"{len(lrs)} distinct learning rates")
    print("test_train_against_pytorch: OK")


if __name__ == "__main__":
    main()
