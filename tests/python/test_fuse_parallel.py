"""hfta::fuseParallel against the ensemble it rewrites: every fused case of
examples/ensemble.py, scripted from Python and rewritten by
`hfta-opt --pass fuse-parallel -o`, gives the original module's outputs,
each member's gradients (on the stacked parameters' slices) and batch-norm
running statistics, in training mode.

python tests/python/test_fuse_parallel.py --opt BUILD/tools/hfta-opt --runtime BUILD/runtime/libhfta_runtime.so
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import ensemble  # noqa: E402

FUSED_CASES = {"mlp_averaged_b2": ("mlp", 2, False), "mlp_averaged_b5": ("mlp", 5, False),
               "mlp_stacked_b5": ("mlp", 5, True), "lenet_stacked_b3": ("lenet", 3, True),
               "lenet_averaged_b2": ("lenet", 2, False)}


def close(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--opt", required=True)
    parser.add_argument("--runtime", required=True)
    args = parser.parse_args()
    torch.ops.load_library(args.runtime)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "examples", "ensemble.py"), tmp], check=True,
                       stdout=subprocess.DEVNULL)
        for name, (kind, members, own_inputs) in FUSED_CASES.items():
            original_path, fused_path = os.path.join(tmp, f"{name}.pt"), os.path.join(tmp, f"{name}_fused.pt")
            subprocess.run([args.opt, original_path, "--pass", "fuse-parallel", "-o", fused_path], check=True,
                           stdout=subprocess.DEVNULL)
            original, fused = torch.jit.load(original_path), torch.jit.load(fused_path)
            assert hasattr(fused, "hfta_parallel_0"), f"{name}: not fused"
            torch.manual_seed(1)
            shape = ensemble.INPUT_SHAPES[kind]
            x = torch.randn(members, 6, *shape) if own_inputs else torch.randn(6, *shape)
            expected, got = original(x), fused(x)
            assert close(got, expected), f"{name}: outputs differ by {(got - expected).abs().max()}"
            expected.pow(2).sum().backward()
            got.pow(2).sum().backward()
            stacked = fused.hfta_parallel_0
            stacked_params = dict(stacked.named_parameters())
            stacked_buffers = dict(stacked.named_buffers())
            for b, (_, member) in enumerate(original.members.named_children()):
                for pname, p in member.named_parameters():
                    assert close(stacked_params[pname].grad[b], p.grad), f"{name}: member {b} {pname}.grad differs"
                for bname, buf in member.named_buffers():
                    assert close(stacked_buffers[bname][b].to(buf.dtype), buf), f"{name}: member {b} {bname} differs"
            # The members now mirror their slices: an update of the stacked
            # tensors shows in them, and only the stacked ones are trainable.
            with torch.no_grad():
                for p in stacked.parameters():
                    p.sub_(0.1 * p.grad)
            for b, (_, member) in enumerate(fused.members.named_children()):
                for pname, p in member.named_parameters():
                    assert torch.equal(p, stacked_params[pname][b]) and not p.requires_grad, (name, b, pname)
            trainable = {n for n, p in fused.named_parameters() if p.requires_grad}
            assert trainable == {"hfta_parallel_0." + n for n in stacked_params}, trainable
            print(f"{name}: outputs, gradients and buffers match the original ensemble; members mirror the fused")
    print("test_fuse_parallel: OK")


if __name__ == "__main__":
    main()
