"""A learning-rate and weight-decay sweep in your own training loop: your
Dataset and DataLoader, your nn.Module, B members fused by hfta and trained
at once with hfta.optim.AdamW and a per-member cosine schedule; each
member's held-out accuracy printed, the best member saved as a plain model.

    PYTHONPATH=build/python .venv/bin/python examples/python/own_loop.py --epochs 10 --out best.pt
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset, random_split

import hfta


class Cnn(nn.Module):
    """A small CNN for 8x8 digits: a plain nn.Module, nothing of hfta in it."""

    def __init__(self, width=32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc = nn.Linear(2 * width * 4, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.adaptive_avg_pool2d(x, 2)
        return self.fc(x.flatten(1))


def digits():
    """scikit-learn's 8x8 digits as a Dataset of ([1, 8, 8] images, labels)."""
    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    return TensorDataset(images, torch.tensor(data.target))


def held_out_accuracy(fused, loader):
    """Each member's accuracy on the loader's samples, [B]."""
    fused.eval()
    correct, count = 0.0, 0
    with torch.no_grad():
        for images, labels in loader:
            correct = correct + hfta.accuracies(fused(images), labels) * len(labels)
            count += len(labels)
    return correct / count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3, 1e-2])
    parser.add_argument("--weight-decay", type=float, nargs="+", default=[0.0, 1e-2, 1e-2, 1e-1])
    parser.add_argument("--out", default="best_member.pt")
    args = parser.parse_args()
    hfta.keep_large_allocations()  # malloc keeps the array's large activations for reuse (as hfta-train)
    torch.manual_seed(0)
    train_set, held_out = random_split(digits(), [0.8, 0.2])
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    held_out_loader = DataLoader(held_out, batch_size=256)

    # B members of one topology, each its own initialization, fused: every
    # member reads the same batches (shared_input), with its own settings.
    members = [Cnn() for _ in args.lr]
    fused = hfta.fuse(members, shared_input=True)
    optimizer = hfta.optim.AdamW(fused.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    schedule = hfta.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    for epoch in range(args.epochs):
        fused.train()
        for images, labels in train_loader:
            optimizer.zero_grad()
            # The fused graph as it is, with eager autograd (as hfta-train
            # runs it): faster than TorchScript's profiling executor here.
            with torch.jit.optimized_execution(False):
                outputs = fused(images)
            # Each member's loss is its own; their sum gives each member the
            # gradient it would get alone.
            hfta.losses(outputs, labels).sum().backward()
            optimizer.step()
        schedule.step()
        accuracy = held_out_accuracy(fused, held_out_loader)
        print(f"epoch {epoch + 1:2}: " + "  ".join(
            f"lr {lr:g} wd {wd:g}: {100 * a:5.1f}%" for lr, wd, a in zip(args.lr, args.weight_decay, accuracy)))

    best = int(accuracy.argmax())
    torch.jit.save(hfta.split(fused, best), args.out)
    print(f"best: member {best} (lr {args.lr[best]:g}, weight decay {args.weight_decay[best]:g}), "
          f"{100 * accuracy[best]:.1f}% held out; saved to {args.out}")


if __name__ == "__main__":
    main()
