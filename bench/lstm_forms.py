"""A stacked LSTM's forward + backward over B members, three ways: hfta::lstm
in its stepped form (every member at once at each time step:
runtime/ops/lstm_steps.cpp), each member's own ATen LSTM one after another
(what hfta::lstm's per-member form runs, and what the members run alone:
oneDNN's kernel in float32 on the CPU), and one member's LSTM at batch
B x N (the dense bound). The measurements behind hfta::lstm's choice of
form (runtime/ops/recurrent_ops.cpp). The ways alternate in rounds, so that
machine noise hits them alike; prints one CSV line per way (the median
round and every round, ms per call).

.venv/bin/python bench/lstm_forms.py --threads 2   # the LSTM LM's shapes
"""
import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from throughput import reexec_with_harness_malloc  # noqa: E402


def main():
    reexec_with_harness_malloc()  # malloc as the harness runs
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--steps", type=int, default=35, help="time steps")
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=64, help="hidden size (and input size)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--calls", type=int, default=20, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    args = parser.parse_args()
    # Without the autotuner hfta::lstm takes its stepped form.
    os.environ["HFTA_AUTOTUNE"] = "0"
    torch.ops.load_library(os.path.join(args.build, "runtime", "libhfta_runtime.so"))
    torch.set_num_threads(args.threads)
    B, T, N, H, L = args.members, args.steps, args.batch, args.hidden, args.layers
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, T, N, H, generator=gen).requires_grad_()
    params = [(torch.randn(B, *shape, generator=gen) * 0.1).requires_grad_()
              for _ in range(L) for shape in ((4 * H, H), (4 * H, H), (4 * H,), (4 * H,))]
    zeros = torch.zeros(B, L, N, H)
    grad_out = torch.randn(B, T, N, H, generator=gen)

    def stepped():
        y, _, _ = torch.ops.hfta.lstm(x, [zeros, zeros], params, True, L, 0.0, True, False, False)
        y.backward(grad_out)

    def members():  # as the per-member form runs: unbind, whose backward is one stack
        xs, ps = x.unbind(0), [p.unbind(0) for p in params]
        ys = [torch.lstm(xs[b], [zeros[b], zeros[b]], [p[b] for p in ps], True, L, 0.0, True, False, False)[0]
              for b in range(B)]
        torch.stack(ys).backward(grad_out)

    dense_x = x.detach().transpose(0, 1).reshape(T, B * N, H).requires_grad_()
    dense_params = [p[0].detach().clone().requires_grad_() for p in params]
    dense_zeros = torch.zeros(L, B * N, H)
    dense_grad = grad_out.transpose(0, 1).reshape(T, B * N, H)

    def dense():
        y, _, _ = torch.lstm(dense_x, [dense_zeros, dense_zeros], dense_params, True, L, 0.0, True, False, False)
        y.backward(dense_grad)

    ways = {"stepped": stepped, "members": members, "dense": dense}
    times = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, call in ways.items():
            for _ in range(3):
                call()
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            times[name].append((time.perf_counter() - start) / args.calls * 1e3)
    print("way,ms_per_call,rounds_ms")
    for name, ts in times.items():
        print(f"{name},{statistics.median(ts):.2f},{' '.join(f'{t:.1f}' for t in ts)}")


if __name__ == "__main__":
    main()
