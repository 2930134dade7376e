"""Checks a fused module against its members in Python: the fused forward on
a [B, N, ...] batch must give, for every member b, what member b gives alone.

python examples/check_fused.py FUSED.pt RUNTIME_LIB MEMBER.pt... [--input-shape 3,32,32]
"""
import argparse
import sys
import warnings

import torch

warnings.filterwarnings("ignore", message=r".*TorchScript.*")
warnings.filterwarnings("ignore", message=r".*torch\.jit.*")


def outputs(value):
    """The tensors of a model's output (one tensor or a tuple of them)."""
    return list(value) if isinstance(value, tuple) else [value]


def main(fused_path, runtime_lib, member_paths, input_shape=(4, 4), batch=64):
    torch.ops.load_library(runtime_lib)
    fused = torch.jit.load(fused_path).eval()
    members = [torch.jit.load(p).eval() for p in member_paths]
    print(f"check: {fused_path} holds {fused.hfta_array_size} members; parameters:")
    for name, p in fused.named_parameters():
        print(f"  {name:<12} {tuple(p.shape)}")
    torch.manual_seed(0)
    x = torch.randn((len(members), batch) + tuple(input_shape))
    with torch.no_grad():
        out = outputs(fused(x))
        worst = 0.0
        for b, member in enumerate(members):
            alone = outputs(member(x[b]))
            err = max((o[b] - a).abs().max().item() for o, a in zip(out, alone))
            worst = max(worst, err)
            print(f"  member {b} ({member_paths[b]}): max |fused - alone| = {err:.2e}")
    ok = worst <= 1e-5
    print(f"check: {'OK' if ok else 'FAILED'}: every member's output matches within 1e-5 (worst {worst:.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("fused")
    parser.add_argument("runtime_lib")
    parser.add_argument("members", nargs="+")
    parser.add_argument("--input-shape", default="4,4", help="one member's input without the batch dim")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    shape = tuple(int(d) for d in args.input_shape.split(","))
    sys.exit(main(args.fused, args.runtime_lib, args.members, shape, args.batch))
