"""Mixed precision in Python: 3 members each of an MLP, LeNet, MobileNet-V2,
PointNet, the DCGAN generator and the word LM (examples/, small widths,
float32) fused by hfta-fuse; under `torch.autocast(device, dtype)` the fused
forward, each member's gradients and batch-norm statistics, and the
eval-mode forward against each member alone under the same autocast, with
the member's dtypes. ctest runs it on the CPU in bfloat16;
scripts/gpu_check.sh on CUDA in float16 and bfloat16.

Tolerances (tests/passes/autocast_test.cpp says why): the distance the member's
own autocast moves it from float32 measures how far the network carries a
rounding of the low dtype; fusion changes only some roundings by one unit
in the last place, so it must stay within max(2 ulps of the largest value,
half that distance) for outputs and statistics; each gradient's distance
to float32 within max(4 ulps of its largest element, 4 times the member's
own distance for it).

python tests/python/check_autocast.py --fuse BUILD/tools/hfta-fuse --runtime BUILD/runtime/libhfta_runtime.so \
    [--device cuda] [--dtypes float16,bfloat16]
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import warnings

import torch

warnings.filterwarnings("ignore", message=r".*TorchScript.*")
warnings.filterwarnings("ignore", message=r".*torch\.jit.*")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import cnn  # noqa: E402
import mlp  # noqa: E402
import text  # noqa: E402
import vision  # noqa: E402

MEMBERS = 3
# kind: (constructor arguments (no dropout: the members draw other masks than alone),
# one member's input shape, or the vocabulary for token ids [4, 8])
CASES = {
    "mlp": ({}, (8, 4, 4)),
    "lenet": ({}, (8,) + cnn.INPUT_SHAPES["lenet"]),
    "mobilenet_v2": ({"width": 0.25}, (8,) + vision.INPUT_SHAPES["mobilenet_v2"]),
    "pointnet_cls": ({"width": 0.25, "dropout": 0.0}, (8,) + vision.INPUT_SHAPES["pointnet_cls"]),
    "dcgan_g": ({"width": 0.125}, (8,) + vision.INPUT_SHAPES["dcgan_g"]),
    "lm_tiny": ({}, text.VOCABULARIES["lm_tiny"]),
}
SIGNIFICAND_BITS = {torch.bfloat16: 8, torch.float16: 11}


def ulp(x, dtype):
    return math.ldexp(1.0, math.frexp(x)[1] - SIGNIFICAND_BITS[dtype]) if x > 0 else 0.0


def first(out):
    return out[0] if isinstance(out, tuple) else out


def forward_backward(module, x, device, dtype, stacked):
    """One forward (under autocast when dtype is given), then the backward of
    each member's mean squared output outside autocast."""
    module.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        out = first(module(x))
    squared = out.float().pow(2)
    (squared.flatten(1).mean(1).sum() if stacked else squared.mean()).backward()
    with torch.no_grad(), torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        module.eval()
        eval_out = first(module(x))
        module.train()
    return {"out": out.detach(), "eval": eval_out,
            "grads": {n: p.grad for n, p in module.named_parameters()},
            "buffers": {n: b.detach().clone() for n, b in module.named_buffers()}}


def distance(a, b):
    return (a.double() - b.double()).abs().max().item()


def check(kind, paths, fused_path, device, dtype):
    fused = torch.jit.load(fused_path, map_location=device)
    args, shape = CASES[kind]
    gen = torch.Generator().manual_seed(1)
    if isinstance(shape, int):
        x = torch.randint(1, shape, (MEMBERS, 4, 8), generator=gen)
    else:
        x = torch.randn((MEMBERS,) + shape, generator=gen)
    x = x.to(device)
    fused_run = forward_backward(fused, x, device, dtype, stacked=True)
    problems, worst = [], 0.0

    def compare(what, f, alone, exact, ulps, of_distance):
        nonlocal worst
        if f.dtype != alone.dtype:
            problems.append(f"{what}: {f.dtype}, alone {alone.dtype}")
        allowed = max(ulps * ulp(exact.abs().max().item(), dtype), of_distance * distance(alone, exact))
        worst = max(worst, distance(f, alone) / allowed if allowed > 0 else 0.0)
        if distance(f, alone) > allowed:
            problems.append(f"{what}: {distance(f, alone):.3g} > {allowed:.3g}")

    for b, path in enumerate(paths):
        alone = forward_backward(torch.jit.load(path, map_location=device), x[b], device, dtype, stacked=False)
        exact = forward_backward(torch.jit.load(path, map_location=device), x[b], device, None, stacked=False)
        compare(f"member {b} forward", fused_run["out"][b], alone["out"], exact["out"], 2, 0.5)
        compare(f"member {b} eval forward", fused_run["eval"][b], alone["eval"], exact["eval"], 2, 0.5)
        # Each gradient against its own scale and distance, as
        # tests/passes/autocast_test.cpp says: the fused gradient's distance
        # to float32 within 4 times the member's own (two draws of rounding
        # noise); under 32 elements, within the member's largest distance.
        largest_distance = max(distance(alone["grads"][n], g) for n, g in exact["grads"].items())
        for name, g in fused_run["grads"].items():
            if g.dtype != alone["grads"][name].dtype:
                problems.append(f"member {b} gradient of {name}: {g.dtype}")
            theirs = exact["grads"][name]
            moved = distance(alone["grads"][name], theirs)
            noise = 4 * moved if g[b].numel() >= 32 else max(4 * moved, largest_distance)
            allowed = max(4 * ulp(theirs.abs().max().item(), dtype), noise)
            worst = max(worst, distance(g[b], theirs) / allowed)
            if distance(g[b], theirs) > allowed:
                problems.append(f"member {b} gradient of {name}: {distance(g[b], theirs):.3g} from float32 > "
                                f"{allowed:.3g}")
        for name, buf in fused_run["buffers"].items():
            if buf.is_floating_point():
                compare(f"member {b} {name}", buf[b], alone["buffers"][name], exact["buffers"][name], 2, 0.5)
            elif not torch.equal(buf[b], alone["buffers"][name]):
                problems.append(f"member {b} {name} differs")
    dtype_name = str(dtype).replace("torch.", "")
    print(f"{kind} on {device.type} in {dtype_name}: worst {worst:.2f} of the tolerance" +
          (" OK" if not problems else " FAILED\n  " + "\n  ".join(problems[:10])))
    return not problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fuse", required=True)
    parser.add_argument("--runtime", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtypes", default="bfloat16")
    args = parser.parse_args()
    torch.ops.load_library(args.runtime)
    device = torch.device(args.device)
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    models = {**mlp.MODELS, **cnn.MODELS, **vision.MODELS, **text.MODELS}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for kind, (kwargs, _) in CASES.items():
            paths = []
            for b in range(MEMBERS):
                torch.manual_seed(b)
                paths.append(os.path.join(tmp, f"{kind}_{b}.pt"))
                torch.jit.save(torch.jit.script(models[kind](**kwargs)), paths[-1])
            fused_path = os.path.join(tmp, f"{kind}_fused.pt")
            subprocess.run([args.fuse, *paths, "-o", fused_path], check=True, stdout=subprocess.DEVNULL)
            for dtype in dtypes:
                ok = check(kind, paths, fused_path, device, dtype) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
