"""hfta-train against the training loop a PyTorch user writes, for every
optimizer and every schedule: 4 fresh members of a digits CNN (torch.manual_seed(b);
Model()) trained fused by hfta-train, and each trained alone in plain
PyTorch (torch.optim's optimizer with the member's settings, the
torch.optim.lr_scheduler policy stepped where hfta-train steps it:
pytorch_reference.py), give the same per-epoch training loss, held-out
loss, accuracy and learning rate, and the same parameters at the end.

Each case gives each member its own settings (a list per flag) and pairs
one of the six optimizers with one of the seven schedules; two cases use
the other losses (BCE with logits, MSE).

Both sides train in float64 (hfta-train --dtype float64; the members as
PyTorch initializes them in float32, then .double()). They sum in other
orders (hfta's fused kernels, PyTorch's per-member ones), and 3 epochs of
training carry that rounding on: in float32 the losses differed by up to
4e-6 relative, a figure that depends on the processor's kernels. In float64
the same amplification of a 2^-29 times smaller rounding gives ~1e-14
(measured: at most 7e-14 over the cases); the tolerance, 1e-9, leaves a
wide margin on any processor and still fails on a real error larger than
one part in a billion. Parameters are held to the same 1e-9, relative to
each tensor's largest element (pytorch_reference.relative_difference).

python tests/python/test_train_against_pytorch.py --train BUILD/tools/hfta-train --runtime BUILD/runtime/libhfta_runtime.so
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch

import train_cli  # the script's own folder
from pytorch_reference import Run, digits_split, relative_difference, train_alone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import cnn  # noqa: E402

B = 4
LIMIT, HOLDOUT, BATCH, EPOCHS, SEED = 400, 0.2, 32, 3, 7
TOLERANCE = 1e-9  # relative; see above
SCHEDULERS = torch.optim.lr_scheduler


def digits_cnn():
    """examples/cnn.py's DigitsCNN without biases in the convolutions that
    batch norm follows, as ResNets build them. Such a bias changes no
    output (the normalization subtracts it) and its gradient is 0 up to
    rounding; Adam, Adagrad, RMSprop and Adadelta divide each gradient by
    its own running magnitude, so the bias would take learning-rate-sized
    steps in the direction of that rounding, which differs between any two
    kernels, and the eval-mode output, which subtracts the running mean
    instead, would follow it (measured: 2e-7 relative in the held-out loss
    after one epoch of AdamW at lr 0.02). That model trains on rounding
    noise under any implementation; this one does not."""
    return cnn.DigitsCNN(conv_bias=False)


# name: (hfta-train flags, the loss, member b's optimizer, member b's
# schedule (given the optimizer and the total steps), stepped every batch?)
CASES = {
    "sgd-step": (
        ["--optimizer", "sgd", "--lr", "0.01,0.03,0.1,0.05", "--momentum", "0.9,0.5,0,0.9",
         "--dampening", "0,0.1,0,0.5", "--weight-decay", "0,1e-3,1e-2,0", "--scheduler", "step", "--step-size", "1,2,1,1",
         "--gamma", "0.5,0.3,0.9,0.1"], "cross_entropy",
        lambda p, b: torch.optim.SGD(p, lr=[0.01, 0.03, 0.1, 0.05][b], momentum=[0.9, 0.5, 0, 0.9][b],
                                     dampening=[0, 0.1, 0, 0.5][b], weight_decay=[0, 1e-3, 1e-2, 0][b]),
        lambda o, b, total: SCHEDULERS.StepLR(o, step_size=[1, 2, 1, 1][b], gamma=[0.5, 0.3, 0.9, 0.1][b]), False),
    "sgd-nesterov-onecycle-bce": (
        ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9,0.8,0.7,0.95", "--nesterov", "1",
         "--scheduler", "onecycle", "--max-lr", "0.1,0.2,0.05,0.1", "--pct-start", "0.4,0.3,0.2,0.5"], "bce_with_logits",
        lambda p, b: torch.optim.SGD(p, lr=0.05, momentum=[0.9, 0.8, 0.7, 0.95][b], nesterov=True),
        lambda o, b, total: SCHEDULERS.OneCycleLR(o, max_lr=[0.1, 0.2, 0.05, 0.1][b], total_steps=total,
                                                  pct_start=[0.4, 0.3, 0.2, 0.5][b]), True),
    "adam-multistep": (
        ["--optimizer", "adam", "--lr", "1e-3,5e-3,2e-2,1e-3", "--beta1", "0.9,0.8,0.95,0.9", "--beta2", "0.999,0.99,0.9,0.999",
         "--eps", "1e-8", "--weight-decay", "0,1e-2,0.1,0", "--amsgrad", "0,1,0,1", "--scheduler", "multistep",
         "--milestones", "1,2", "--gamma", "0.5,0.1,0.3,0.9"], "cross_entropy",
        lambda p, b: torch.optim.Adam(p, lr=[1e-3, 5e-3, 2e-2, 1e-3][b], betas=([0.9, 0.8, 0.95, 0.9][b], [0.999, 0.99, 0.9, 0.999][b]),
                                      eps=1e-8, weight_decay=[0, 1e-2, 0.1, 0][b], amsgrad=bool([0, 1, 0, 1][b])),
        lambda o, b, total: SCHEDULERS.MultiStepLR(o, milestones=[1, 2], gamma=[0.5, 0.1, 0.3, 0.9][b]), False),
    "adamw-exponential-mse": (
        ["--optimizer", "adamw", "--lr", "1e-3,5e-3,2e-2,3e-3", "--weight-decay", "0,1e-2,0.1,0.5", "--amsgrad", "0,0,1,0",
         "--scheduler", "exponential", "--gamma", "0.9,0.5,0.7,0.99"], "mse",
        lambda p, b: torch.optim.AdamW(p, lr=[1e-3, 5e-3, 2e-2, 3e-3][b], weight_decay=[0, 1e-2, 0.1, 0.5][b],
                                       amsgrad=bool([0, 0, 1, 0][b])),
        lambda o, b, total: SCHEDULERS.ExponentialLR(o, gamma=[0.9, 0.5, 0.7, 0.99][b]), False),
    "adagrad-cosine": (
        ["--optimizer", "adagrad", "--lr", "0.01,0.05,0.1,0.02", "--lr-decay", "0,0.01,0.1,0",
         "--initial-accumulator-value", "0,0.1,0.5,0", "--weight-decay", "1e-3", "--eps", "1e-10",
         "--scheduler", "cosine", "--t-max", "3,2,5,1", "--eta-min", "0,1e-3,1e-2,0"], "cross_entropy",
        lambda p, b: torch.optim.Adagrad(p, lr=[0.01, 0.05, 0.1, 0.02][b], lr_decay=[0, 0.01, 0.1, 0][b],
                                         initial_accumulator_value=[0, 0.1, 0.5, 0][b], weight_decay=1e-3, eps=1e-10),
        lambda o, b, total: SCHEDULERS.CosineAnnealingLR(o, T_max=[3, 2, 5, 1][b], eta_min=[0, 1e-3, 1e-2, 0][b]), False),
    "rmsprop-linear": (
        ["--optimizer", "rmsprop", "--lr", "1e-3,5e-3,1e-2,2e-3", "--alpha", "0.99,0.9,0.8,0.95", "--momentum", "0,0.5,0.9,0",
         "--centered", "0,1,1,0", "--weight-decay", "0,1e-3,1e-2,0", "--scheduler", "linear",
         "--start-factor", "0.25,0.5,1,0.1", "--end-factor", "1,0.2,0.1,1", "--total-iters", "2,1,3,5"], "cross_entropy",
        lambda p, b: torch.optim.RMSprop(p, lr=[1e-3, 5e-3, 1e-2, 2e-3][b], alpha=[0.99, 0.9, 0.8, 0.95][b],
                                         momentum=[0, 0.5, 0.9, 0][b], centered=bool([0, 1, 1, 0][b]),
                                         weight_decay=[0, 1e-3, 1e-2, 0][b]),
        lambda o, b, total: SCHEDULERS.LinearLR(o, start_factor=[0.25, 0.5, 1, 0.1][b], end_factor=[1, 0.2, 0.1, 1][b],
                                                total_iters=[2, 1, 3, 5][b]), False),
    "adadelta-plateau": (
        ["--optimizer", "adadelta", "--lr", "1.0,0.5,0.1,2.0", "--rho", "0.9,0.8,0.95,0.9", "--weight-decay", "0,1e-3,1e-2,0",
         "--scheduler", "plateau", "--patience", "0", "--factor", "0.5,0.3,0.5,0.2", "--threshold", "0.05,0.5,0.3,0.9"],
        "cross_entropy",
        lambda p, b: torch.optim.Adadelta(p, lr=[1.0, 0.5, 0.1, 2.0][b], rho=[0.9, 0.8, 0.95, 0.9][b],
                                          weight_decay=[0, 1e-3, 1e-2, 0][b]),
        lambda o, b, total: SCHEDULERS.ReduceLROnPlateau(o, factor=[0.5, 0.3, 0.5, 0.2][b], patience=0,
                                                         threshold=[0.05, 0.5, 0.3, 0.9][b]), False),
}


def check_case(args, tmp, model, name, case, train, heldout):
    flags, loss, make_optimizer, make_scheduler, per_batch = case
    out, best = os.path.join(tmp, name), os.path.join(tmp, name + "_members")
    subprocess.run([args.train, model, "--array-size", str(B), "--loss", loss, "--limit", str(LIMIT),
                    "--holdout", str(HOLDOUT), "--seed", str(SEED), "--batch-size", str(BATCH), "--epochs", str(EPOCHS),
                    "--threads", "1", "--dtype", "float64", "--out", out, "--export-best", best, "--top", str(B), *flags],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "metrics.json")) as f:  # every bit (metrics.csv has 6 digits)
        fused = json.load(f)
    run = Run(EPOCHS, BATCH, SEED, loss)
    batches = math.ceil(len(train[0]) / BATCH)
    worst, lrs = 0.0, set()
    for b in range(B):
        torch.manual_seed(b)
        alone = digits_cnn().double()
        optimizer = make_optimizer(alone.parameters(), b)
        expected = train_alone(alone, optimizer, train, heldout, run, make_scheduler(optimizer, b, EPOCHS * batches),
                               per_batch)
        got = [r for r in fused if int(r["member"]) == b]
        assert len(got) == EPOCHS
        for row, want in zip(got, expected):
            where = f"{name}: member {b} epoch {row['epoch']}"
            for key in ("train_loss", "heldout_loss"):
                worst = max(worst, abs(row[key] - want[key]) / abs(want[key]))
                assert math.isclose(row[key], want[key], rel_tol=TOLERANCE), f"{where}: {key} {row[key]!r} vs {want[key]!r}"
            assert row["heldout_accuracy"] == want["heldout_accuracy"], f"{where}: accuracy {row} vs {want}"
            assert math.isclose(row["lr"], want["lr"], rel_tol=1e-12), f"{where}: lr {row['lr']!r} vs {want['lr']!r}"
            lrs.add((b, want["lr"]))
        exported = dict(torch.jit.load(os.path.join(best, f"member_{b}.pt")).state_dict())
        for key, value in alone.state_dict().items():
            difference = relative_difference(exported[key].double(), value.double())
            assert difference <= TOLERANCE, f"{name}: member {b}'s {key} after training: {difference:.2e} relative"
    # The schedule moved the rates (a test that would pass with no schedule
    # proves nothing): every member's, but on a plateau only those whose
    # held-out loss stalled.
    moved = {b for b in range(B) if len({lr for m, lr in lrs if m == b}) > 1}
    assert len(moved) >= (2 if "plateau" in name else B), f"{name}: the schedule moved the rates of members {moved} only"
    return worst


def main():
    args = train_cli.parse_args()
    torch.set_num_threads(1)
    train, heldout = digits_split(LIMIT, HOLDOUT, SEED, torch.float64)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.pt")
        torch.jit.save(torch.jit.script(digits_cnn()), model)
        for name in CASES:
            worst = check_case(args, tmp, model, name, CASES[name], train, heldout)
            print(f"{name}: hfta-train vs PyTorch, worst relative loss difference {worst:.2e}")
    print("test_train_against_pytorch: OK")


if __name__ == "__main__":
    main()
