"""Checks a fused module against its members in Python: the fused forward on
a [B, N, ...] batch must give, for every member b, what member b gives alone.

python examples/check_fused.py FUSED.pt RUNTIME_LIB MEMBER.pt...
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore", message=r".*TorchScript.*")
warnings.filterwarnings("ignore", message=r".*torch\.jit.*")


def main(fused_path, runtime_lib, member_paths):
    torch.ops.load_library(runtime_lib)
    fused = torch.jit.load(fused_path).eval()
    members = [torch.jit.load(p).eval() for p in member_paths]
    print(f"check: {fused_path} holds {fused.hfta_array_size} members; parameters:")
    for name, p in fused.named_parameters():
        print(f"  {name:<12} {tuple(p.shape)}")
    torch.manual_seed(0)
    x = torch.randn((len(members), 64, 4, 4))
    with torch.no_grad():
        out = fused(x)
        worst = 0.0
        for b, member in enumerate(members):
            err = (out[b] - member(x[b])).abs().max().item()
            worst = max(worst, err)
            print(f"  member {b} ({member_paths[b]}): max |fused - alone| = {err:.2e}")
    ok = worst <= 1e-5
    print(f"check: {'OK' if ok else 'FAILED'}: every member's output matches within 1e-5 (worst {worst:.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
