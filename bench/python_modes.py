"""The PyTorch (Python) side of the throughput harness (bench/throughput.py):
trains B members one way for a few timed steps and prints what it measured
as one JSON object, like bench/train_modes. The ways:
  vmap   PyTorch's own ensembling: torch.func.stack_module_state + vmap +
         functional_call, the stacked parameters in one torch.optim.SGD.
         Batch norm runs without running statistics there (vmap cannot
         update a buffer per member in place), so it does less work than
         the others for models with batch norm.
  eager  the B members as plain PyTorch modules, stepped one after another.
A step is the same as train_modes': forward, each member's loss against a
fixed random target (summed; cross entropy against token ids for the text
models, MSE otherwise), backward, SGD with momentum 0.9. With --amp
the forward runs under torch.autocast (bfloat16, or float16 with
torch.amp.GradScaler: one per member in eager, one for the stacked
parameters in vmap, whose members share one loss).

python bench/python_modes.py --kind resnet18 --members 4 --modes vmap,eager --batch 8
"""
import argparse
import copy
import json
import os
import resource
import sys
import time

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import cnn  # noqa: E402,F401  (registers the CNN kinds)
import mlp  # noqa: E402
import vision  # noqa: E402,F401  (registers the vision kinds)
import text  # noqa: E402,F401  (registers the Transformers)
import torchvision_zoo  # noqa: E402,F401  (registers torchvision's classifiers)
from throughput import keep_large_allocations  # noqa: E402

LR, MOMENTUM = 0.01, 0.9


# The most warm-up steps --settle takes past --warmup (support/allocator.h says why a way settles).
MAX_SETTLE_STEPS = 20


def minor_page_faults():
    """Pages this process has faulted in so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def members_of(kind, count, width):
    kwargs = {} if width is None else {"width": width}
    out = []
    for b in range(count):
        torch.manual_seed(b)
        out.append(mlp.MODELS[kind](**kwargs))
    return out


def without_running_stats(model):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.track_running_stats = False
            m.running_mean = m.running_var = m.num_batches_tracked = None
    return model


def main_output(out):
    """The output, or the first one where a model returns several (PointNet's transforms)."""
    return out[0] if isinstance(out, tuple) else out


def member_losses(out, target, members, token_scores):
    """Each member's loss (`members` values) of outputs `out` ([N, ...], or
    [B, N, ...] stacked) against `target` (None: drawn now, returned too), as
    train_modes' memberLosses: cross entropy against random token ids where
    the outputs score the vocabulary (the text models), MSE otherwise."""
    out = out.float()
    if not token_scores:
        target = torch.randn_like(out) if target is None else target
        return (out - target).pow(2).reshape(members, -1).mean(1), target
    vocabulary = out.size(-1)
    target = torch.randint(vocabulary, out.shape[:-1], device=out.device) if target is None else target
    losses = nn.functional.cross_entropy(out.reshape(-1, vocabulary), target.reshape(-1), reduction="none")
    return losses.reshape(members, -1).mean(1), target


def amp_context(device, dtype):
    """The forward's autocast (dtype None: none)."""
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def scaler_for(device, dtype):
    return torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)


def vmap_way(models, x, device, amp, token_scores):
    models = [without_running_stats(m).to(device) for m in models]
    params, buffers = torch.func.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def call(p, b, xb):
        return torch.func.functional_call(base, (p, b), (xb,))

    run = torch.vmap(call, randomness="different")
    opt = torch.optim.SGD(list(params.values()), lr=LR, momentum=MOMENTUM)
    scaler = scaler_for(device, amp)
    target = None

    def step():
        nonlocal target
        opt.zero_grad()
        with amp_context(device, amp):
            out = main_output(run(params, buffers, x))
        losses, target = member_losses(out, target, len(models), token_scores)
        scaler.scale(losses.sum()).backward()
        scaler.step(opt)
        scaler.update()
    return step


def eager_way(models, x, device, amp, token_scores):
    models = [m.to(device) for m in models]
    opts = [torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM) for m in models]
    scalers = [scaler_for(device, amp) for _ in models]
    targets = [None] * len(models)

    def step():
        for b, (m, opt, scaler) in enumerate(zip(models, opts, scalers)):
            opt.zero_grad()
            with amp_context(device, amp):
                out = main_output(m(x[b]))
            loss, targets[b] = member_losses(out, targets[b], 1, token_scores)
            scaler.scale(loss.sum()).backward()
            scaler.step(opt)
            scaler.update()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", required=True)
    parser.add_argument("--members", type=int, required=True)
    parser.add_argument("--modes", default="vmap,eager")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--input-shape", required=True, help="one sample's shape, e.g. 3,32,32")
    parser.add_argument("--width", type=float)
    parser.add_argument("--tokens", type=int, default=0, help="inputs are token ids in [0, tokens)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=0.0,
                        help="a round goes on stepping until it has run this long (short steps time poorly)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--settle", action="store_true",
                        help="after --warmup, warm up until a step maps almost no new memory (support/allocator.h's rule)"
                        ", at most 20 steps more")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", choices=["bfloat16", "float16"], help="autocast dtype (float16: loss scaling)")
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build"),
                        help="the build whose `import hfta` keeps large blocks, as in the LibTorch ways")
    args = parser.parse_args()
    keep_large_allocations(args.build)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = device.type == "cuda"  # every way, as hfta-train runs
    shape = [int(s) for s in args.input_shape.split(",")]
    if args.tokens:  # token ids for the text models
        x = torch.randint(args.tokens, [args.members, args.batch, *shape], device=device)
    else:
        x = torch.randn([args.members, args.batch, *shape], device=device)
    makers = {"vmap": vmap_way, "eager": eager_way}
    amp = getattr(torch, args.amp) if args.amp else None
    ways = {mode: makers[mode](members_of(args.kind, args.members, args.width), x, device, amp, args.tokens > 0)
            for mode in args.modes.split(",")}

    def run(step, count):
        for _ in range(count):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    result = {}
    for mode, step in ways.items():
        run(step, args.warmup)
        taken = args.warmup
        while args.settle and taken < args.warmup + MAX_SETTLE_STEPS:
            before = minor_page_faults()
            run(step, 1)
            taken += 1
            if (minor_page_faults() - before) * 100 < before:  # under 1% of the pages mapped so far: settled
                break
        result[mode] = {"warmup_steps": taken, "samples_per_s": [], "start": [], "end": [], "samples": []}
    for _ in range(args.rounds):
        for mode, step in ways.items():
            start, steps = time.time(), 0
            while steps == 0 or time.time() - start < args.min_seconds:
                run(step, args.steps)
                steps += args.steps
            end = time.time()
            samples = args.members * args.batch * steps
            entry = result[mode]
            entry["samples_per_s"].append(samples / (end - start))
            entry["start"].append(start)
            entry["end"].append(end)
            entry["samples"].append(samples)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
