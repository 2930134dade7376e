"""ATen's dropout against hfta::dropout (runtime/ops/dropout_ops.cpp), forward
and forward + backward, on the CPU, at the sizes of the Transformers' dropouts
in the harness at B = 8: the measurements behind the runtime's own generator.
The two are timed in alternating rounds (median of each), so that machine
noise hits both alike. Prints one CSV line per size.

.venv/bin/python bench/dropout.py --threads 2 [--build build]
"""
import argparse
import os
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, elements)
SIZES = [
    ("lm_small.activations [8,20,35,64]", 8 * 20 * 35 * 64),
    ("lm_small.attention [160,2,35,35]", 160 * 2 * 35 * 35),
    ("bert_small.attention [64,2,64,64]", 64 * 2 * 64 * 64),
    ("lm.activations [8,20,35,200]", 8 * 20 * 35 * 200),
]


def seconds(step, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--p", type=float, default=0.1)
    args = parser.parse_args()
    torch.ops.load_library(os.path.join(args.build, "runtime", "libhfta_runtime.so"))
    torch.set_num_threads(args.threads)
    print("size,elements,aten_forward_ms,hfta_forward_ms,aten_step_ms,hfta_step_ms,forward_ratio,step_ratio")
    for name, elements in SIZES:
        x = torch.randn(elements, requires_grad=True)
        grad = torch.randn(elements)
        ways = {"aten": lambda t: F.dropout(t, args.p, True), "hfta": lambda t: torch.ops.hfta.dropout(t, args.p, True)}
        forward, step = {w: [] for w in ways}, {w: [] for w in ways}
        for _ in range(3):  # alternating blocks of rounds
            for way, drop in ways.items():
                with torch.no_grad():
                    forward[way].append(seconds(lambda: drop(x), args.rounds))
                step[way].append(seconds(lambda: drop(x).backward(grad), args.rounds))
        ms = {f"{kind}_{w}": 1e3 * sorted(v[w])[1] for kind, v in (("forward", forward), ("step", step)) for w in ways}
        print(f"{name},{elements},{ms['forward_aten']:.3f},{ms['forward_hfta']:.3f},{ms['step_aten']:.3f},"
              f"{ms['step_hfta']:.3f},{ms['forward_aten'] / ms['forward_hfta']:.2f},"
              f"{ms['step_aten'] / ms['step_hfta']:.2f}")


if __name__ == "__main__":
    main()
