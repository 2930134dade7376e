"""The Transformers fused on a device (scripts/gpu_check.sh runs it on CUDA;
the tests check the same on the CPU, in float64): 3 members each of the word
LM (also with tied weights), the LSTM LM and BERT (examples/text.py, tiny
sizes, float32), fused by hfta-fuse, on
one batch of token ids per member: the fused forward, each member's
gradients, and the eval-mode forward (PyTorch's fast paths) against each
member alone on the same device.

Tolerance 1e-5 relative (|a - b| <= 1e-5 * (1 + |b|)): every sum in these
tiny models has at most 32 terms (hidden sizes 16-32, sequence 8, and a
weight gradient's sum over batch x sequence = 32 positions), which another
order (one batched GEMM or attention call for all members, or a device's
kernel choosing its own reduction) changes by at most 32 u = 1.9e-6
relative in float32 (u = 2^-24 = 6.0e-8); the few such sums chained in a
layer stay below 1e-5, since their roundings do not align. Measured on the
CPU: at most 4.3e-7 (BERT's eval forward). A real error (a wrong member's
slice, a missed update) is 1e-3 or more. (The bound was 1e-4 until
2026-12-05, with no reason given: issue 30.)

python tests/python/check_text_fused.py --fuse BUILD/tools/hfta-fuse --runtime BUILD/runtime/libhfta_runtime.so [--device cuda]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import text  # noqa: E402

MEMBERS, BATCH, LENGTH = 3, 4, 8
TOLERANCE = 1e-5


def worst(a, b):
    return ((a - b).abs() / (1 + b.abs())).max().item()


def check(kind, args, tmp):
    device = torch.device(args.device)
    paths = []
    for b in range(MEMBERS):
        torch.manual_seed(b)
        paths.append(os.path.join(tmp, f"{kind}_{b}.pt"))
        torch.jit.save(torch.jit.script(text.MODELS[kind]()), paths[-1])
    fused_path = os.path.join(tmp, f"{kind}_fused.pt")
    subprocess.run([args.fuse, *paths, "-o", fused_path], check=True, stdout=subprocess.DEVNULL)
    fused = torch.jit.load(fused_path, map_location=device)
    members = [torch.jit.load(p, map_location=device) for p in paths]
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(1, text.VOCABULARIES[kind], (MEMBERS, BATCH, LENGTH), generator=gen)
    x[:, :, -2:] = 0  # padding (BERT's key padding mask)
    x = x.to(device)
    out = fused(x)
    out.pow(2).mean(dim=(1, 2, 3)).sum().backward()
    errors = {"forward": 0.0, "gradients": 0.0, "eval": 0.0}
    for b, member in enumerate(members):
        alone = member(x[b])
        errors["forward"] = max(errors["forward"], worst(out[b], alone))
        alone.pow(2).mean().backward()
        own = dict(member.named_parameters())
        for name, p in fused.named_parameters():
            errors["gradients"] = max(errors["gradients"], worst(p.grad[b], own[name].grad))
    fused.eval()
    with torch.no_grad():
        out = fused(x)
        for b, member in enumerate(members):
            errors["eval"] = max(errors["eval"], worst(out[b], member.eval()(x[b])))
    ok = all(e <= TOLERANCE for e in errors.values())
    print(f"{kind} on {args.device}: " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()) +
          (" OK" if ok else f" FAILED (tolerance {TOLERANCE})"))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fuse", required=True)
    parser.add_argument("--runtime", required=True)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.ops.load_library(args.runtime)
    with tempfile.TemporaryDirectory() as tmp:
        ok = all([check(kind, args, tmp) for kind in ("lm_tiny", "lm_tiny_tied", "lstm_lm_tiny", "bert_tiny")])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
