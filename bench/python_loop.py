"""The same sweep three ways, measured side by side in one run: hfta-train
(the C++ loop), a Python loop over the same fused module with hfta.optim
(what a user of `import hfta` writes), and the B members trained one after
another in plain PyTorch (eager modules, torch.optim). Training steps only
(no held-out evaluation), the digits data set, Adam with one learning rate
per member; the figure is samples per second summed over the members.
The Python loop is written as the README recommends: hfta.keep_large_allocations()
once, the fused forward under torch.jit.optimized_execution(False).

    PYTHONPATH=build/python .venv/bin/python bench/python_loop.py --members 8 --epochs 3 --rounds 3
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import hfta

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))
from cnn import DigitsCNN  # noqa: E402


def batches(images, labels, batch_size, generator):
    order = torch.randperm(len(images), generator=generator)
    for i in range(0, len(images) - batch_size + 1, batch_size):  # whole batches, as hfta-train's
        index = order[i:i + batch_size]
        yield images[index], labels[index]


def python_loop(fused_path, images, labels, lrs, epochs, batch_size):
    fused = torch.jit.load(fused_path)
    fused.train()
    optimizer = hfta.optim.Adam(fused.parameters(), lr=lrs)
    generator = torch.Generator().manual_seed(0)
    steps, start = 0, time.perf_counter()
    for _ in range(epochs):
        for x, y in batches(images, labels, batch_size, generator):
            optimizer.zero_grad()
            with torch.jit.optimized_execution(False):  # eager autograd, as hfta-train runs the graph
                outputs = fused(x)
            hfta.losses(outputs, y).sum().backward()
            optimizer.step()
            steps += 1
    return steps * batch_size * len(lrs) / (time.perf_counter() - start)


def serial(images, labels, lrs, epochs, batch_size):
    seconds = 0.0
    samples = 0
    for b, lr in enumerate(lrs):
        torch.manual_seed(b)
        model = DigitsCNN()
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        generator = torch.Generator().manual_seed(0)
        start = time.perf_counter()
        for _ in range(epochs):
            for x, y in batches(images, labels, batch_size, generator):
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
                samples += batch_size
        seconds += time.perf_counter() - start
    return samples / seconds


def tool(train, fused_path, lrs, epochs, batch_size, holdout, out):
    run = subprocess.run([train, fused_path, "--optimizer", "adam", "--lr", ",".join(map(str, lrs)), "--epochs",
                          str(epochs), "--batch-size", str(batch_size), "--holdout", str(holdout), "--out", out],
                         check=True, capture_output=True, text=True)
    seconds = float(re.search(r"epochs: ([0-9.]+) s of training", run.stdout).group(1))
    trained = int(re.search(r"\(([0-9]+) training", run.stdout).group(1))
    return (trained // batch_size) * batch_size * epochs * len(lrs) / seconds, trained


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--train", default=os.path.join(ROOT, "build", "tools", "hfta-train"))
    parser.add_argument("--data", default=os.path.join(ROOT, ".data", "digits.pt"))
    args = parser.parse_args()
    hfta.keep_large_allocations()  # as hfta-train does; the serial loop profits from it as much
    lrs = [1e-4 * 2 ** (b % 6) for b in range(args.members)]
    data = torch.load(args.data)
    holdout = 0.2
    with tempfile.TemporaryDirectory() as work:
        members = []
        for b in range(args.members):
            torch.manual_seed(b)
            members.append(DigitsCNN())
        fused_path = os.path.join(work, "fused.pt")
        torch.jit.save(hfta.fuse(members, shared_input=True), fused_path)  # every member reads the batch
        results = {"hfta-train": [], "python loop": [], "serial PyTorch": []}
        for _ in range(args.rounds):  # interleaved, so that a noisy moment hits all three alike
            tool_rate, trained = tool(args.train, fused_path, lrs, args.epochs, args.batch_size, holdout,
                                      os.path.join(work, "run"))
            images, labels = data["images"][:trained], data["labels"][:trained]
            results["hfta-train"].append(tool_rate)
            results["python loop"].append(python_loop(fused_path, images, labels, lrs, args.epochs, args.batch_size))
            results["serial PyTorch"].append(serial(images, labels, lrs, args.epochs, args.batch_size))
    best = {k: max(v) for k, v in results.items()}
    print(f"B = {args.members}, batch {args.batch_size}, {args.epochs} epochs of {trained} samples, "
          f"{torch.get_num_threads()} threads; samples/s summed over members (best of {args.rounds}):")
    for name, rate in best.items():
        print(f"  {name:15} {rate:10.0f}   ({', '.join(f'{r:.0f}' for r in results[name])})")
    print(f"python loop / hfta-train: {best['python loop'] / best['hfta-train']:.3f}; "
          f"python loop / serial: {best['python loop'] / best['serial PyTorch']:.2f}")


if __name__ == "__main__":
    main()
