"""The LSTM LM's tail at B = 8, three ways: the decoder (a linear layer), the
model's log-softmax and the harness's cross entropy, forward and backward.

  fused       the fused module's form: one baddbmm and log-softmax over the
              stacked [B, N, vocab] scores, the loss over them
  members     what a members plan of the module's tail would do: each
              member's linear and log-softmax, stacked at the exit, the loss
              over the stack (the loss is the training loop's, outside)
  whole-step  each member's tail and loss, forward and backward, in turn:
              a whole-step member plan (the loss inside the plan)

The scores are large (45 MB stacked for lstm_lm_small) and every op of the
tail passes over them; a member's 5.6 MB may stay in cache from one op to
the next. The ways are timed in alternating rounds (median of each), so
that machine noise hits all alike. Prints one CSV line per way.

.venv/bin/python bench/stacked_tail.py --threads 2 [--members 8 --rows 700 --hidden 64 --vocab 2000]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import reexec_with_harness_malloc  # noqa: E402


def main():
    reexec_with_harness_malloc()  # malloc as the harness runs
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--rows", type=int, default=20 * 35, help="positions per member (batch x sequence)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    B, N, V = args.members, args.rows, args.vocab
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(B, N, args.hidden, generator=gen)
    weight = (torch.randn(B, V, args.hidden, generator=gen) * 0.1).requires_grad_()
    bias = torch.zeros(B, 1, V, requires_grad=True)
    targets = torch.randint(V, (B, N), generator=gen)

    def loss_over(scores):  # the harness's: each member's mean over positions
        return F.cross_entropy(scores.reshape(-1, V), targets.reshape(-1), reduction="none").reshape(B, -1).mean(1)

    def fused(h):
        loss_over(torch.baddbmm(bias, h, weight.transpose(1, 2)).log_softmax(-1)).sum().backward()

    def members(h):
        hs = h.unbind(0)
        scores = [torch.addmm(bias[b, 0], hs[b], weight[b].t()).log_softmax(-1) for b in range(B)]
        loss_over(torch.stack(scores)).sum().backward()

    def whole_step(h):
        hs = h.unbind(0)
        for b in range(B):
            F.cross_entropy(torch.addmm(bias[b, 0], hs[b], weight[b].t()).log_softmax(-1), targets[b]).backward()

    ways = {"fused": fused, "members": members, "whole-step": whole_step}
    times = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, step in ways.items():
            h = hidden.clone().requires_grad_()
            for _ in range(3):  # warm: the heap holds the step's blocks
                step(h)
            start = time.perf_counter()
            for _ in range(args.steps):
                h.grad = weight.grad = bias.grad = None
                step(h)
            times[name].append((time.perf_counter() - start) / args.steps)
    fused_ms = statistics.median(times["fused"]) * 1e3
    print("way,ms_per_step,speed_vs_fused,rounds_ms")
    for name, ts in times.items():
        ms = statistics.median(ts) * 1e3
        print(f"{name},{ms:.2f},{fused_ms / ms:.2f}x,{' '.join(f'{t * 1e3:.1f}' for t in ts)}")


if __name__ == "__main__":
    main()
