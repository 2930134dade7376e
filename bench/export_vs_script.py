"""Training steps of the same members fused two ways, side by side in one
run: from TorchScript (scripted members) and from torch.export (hfta.export,
.pt2). The fused graphs differ (an exported member's forward is a branch
on `training` between two programs; sizes, views and constants come in as
export records them), so the step time may differ too: this measures it.
The figure is the median step time (forward, backward, hfta.optim.SGD) over
rounds that alternate between the two, in float32, on the CPU.

    PYTHONPATH=build/python .venv/bin/python bench/export_vs_script.py --members 4 --steps 20 --rounds 5
"""
import argparse
import os
import statistics
import sys
import time
import warnings

import torch

import hfta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import mlp  # noqa: E402
import cnn  # noqa: E402,F401  (registers the CNN families)
import vision  # noqa: E402,F401
import text  # noqa: E402

# family -> (model, one member's batch)
FAMILIES = {
    "lenet": (lambda: mlp.MODELS["lenet"](), lambda: torch.randn(32, 1, 16, 16)),
    "resnet18": (lambda: mlp.MODELS["resnet18"](width=0.25), lambda: torch.randn(8, 3, 32, 32)),
    "lm_small": (lambda: text.MODELS["lm_small"](), lambda: torch.randint(0, 2000, (16, 35))),
}


def step_time(fused, x, steps):
    opt = hfta.optim.SGD(fused.parameters(), lr=0.01)
    fused.train()
    for _ in range(3):  # the graph executor's profiling runs
        opt.zero_grad()
        fused(x).float().pow(2).mean().backward()
        opt.step()
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        fused(x).float().pow(2).mean().backward()
        opt.step()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    hfta.keep_large_allocations()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, B = {args.members}, "
          f"{args.steps} steps x {args.rounds} rounds")
    print("| model | scripted ms/step | exported ms/step | exported / scripted |")
    print("| --- | ---: | ---: | ---: |")
    for family in args.families.split(","):
        make, batch = FAMILIES[family]
        models = []
        for b in range(args.members):
            torch.manual_seed(b)
            models.append(make())
        example = batch()
        scripted = hfta.fuse(models)
        exported = hfta.fuse(models, example_inputs=(example,))
        x = torch.stack([batch() for _ in range(args.members)])
        times = {"scripted": [], "exported": []}
        for _ in range(args.rounds):
            for name, fused in (("scripted", scripted), ("exported", exported)):
                with torch.jit.optimized_execution(False):
                    times[name].append(step_time(fused, x, args.steps))
        s, e = statistics.median(times["scripted"]), statistics.median(times["exported"])
        print(f"| {family} | {s * 1e3:.2f} | {e * 1e3:.2f} | {e / s:.2f} |", flush=True)


if __name__ == "__main__":
    main()
