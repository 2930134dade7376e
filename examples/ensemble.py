"""Ensembles inside one module, scripted from Python: what
hfta::fuseParallel (hfta-opt --pass fuse-parallel) rewrites, and the
cases it must leave alone.

`python examples/ensemble.py OUT_DIR` writes OUT_DIR/<case>.pt for every case.
"""
import argparse
import os

import torch
from torch import nn

import cnn
import mlp


class Averaged(nn.Module):
    """B members on one shared input, outputs averaged."""

    def __init__(self, members):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, x):
        outs = []
        for m in self.members:
            outs.append(m(x))
        return torch.stack(outs).mean(0)


class Stacked(nn.Module):
    """B members, member b on xs[b], outputs stacked."""

    def __init__(self, members):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, xs):
        outs = []
        i = 0
        for m in self.members:
            outs.append(m(xs[i]))
            i += 1
        return torch.stack(outs)


class TwoHeads(nn.Module):
    """A member with two outputs (a tuple)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 32)
        self.head_a = nn.Linear(32, 10)
        self.head_b = nn.Linear(32, 3)

    def forward(self, x):
        h = self.body(x).relu()
        return self.head_a(h), self.head_b(h)


class Summed(nn.Module):
    """B members with two outputs each on one shared input; the caller sums
    what they give as it goes (so the first member's step of the sum starts
    from a value no member computed)."""

    def __init__(self, members):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, x):
        total = torch.zeros(x.shape[0], 10)
        for m in self.members:
            a, b = m(x)
            total = total + a + b.sum(1, keepdim=True)
        return total


class Chained(nn.Module):
    """Two members where the second reads the first's output: not parallel."""

    def __init__(self):
        super().__init__()
        self.members = nn.ModuleList([mlp.MLP(in_features=16, classes=16), mlp.MLP(in_features=16, classes=16)])

    def forward(self, x):
        y = x
        for m in self.members:
            y = m(y)
        return y


class InPlace(nn.Module):
    """A member that writes to its input in place."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(x.relu_())


class Scale(nn.Module):
    """A member whose parameter's size is not part of its TorchScript type:
    members of one type but of different sizes (only a check when the graph
    runs can tell)."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return (x[:, : self.weight.shape[0]] * self.weight).sum(1)


def members(kind, count, **kwargs):
    out = []
    for b in range(count):
        torch.manual_seed(b)
        out.append(mlp.MODELS[kind](**kwargs))
    return out


class TiedMLP(nn.Module):
    """Two layers that share one weight (each member ties its own)."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 16)
        self.second = nn.Linear(16, 16)
        self.second.weight = self.first.weight

    def forward(self, x):
        return self.second(self.first(x).tanh())


def cases():
    torch.manual_seed(0)
    shared_member = mlp.MLP()
    return {
        # fused
        "mlp_averaged_b2": Averaged(members("mlp", 2)),
        "mlp_averaged_b5": Averaged(members("mlp", 5)),
        "mlp_stacked_b5": Stacked(members("mlp", 5)),
        "lenet_stacked_b3": Stacked(members("lenet", 3)),
        "lenet_averaged_b2": Averaged(members("lenet", 2)),
        "mlp_averaged_b8": Averaged(members("mlp", 8)),
        "lenet_stacked_b8": Stacked(members("lenet", 8)),
        "tied_averaged_b3": Averaged([TiedMLP() for _ in range(3)]),
        # left alone
        "shared_parameter": Averaged([shared_member, shared_member]),
        "chained": Chained(),
        "in_place": Averaged([InPlace(), InPlace()]),
        "different_shapes": Averaged([mlp.MLP(hidden=32), mlp.MLP(hidden=64)]),
        "two_heads_summed_b3": Summed([TwoHeads() for _ in range(3)]),
        # one type, different sizes: fused in the graph behind a check that fails when it runs
        "uneven": Averaged([Scale(4), Scale(8)]),
    }


# One sample's shape for each fused case's members.
INPUT_SHAPES = {"mlp": (16,), "lenet": cnn.INPUT_SHAPES["lenet"], "scale": (16,), "tied": (16,)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name, module in cases().items():
        path = os.path.join(args.out_dir, f"{name}.pt")
        torch.jit.save(torch.jit.script(module), path)
        print(path)


if __name__ == "__main__":
    main()
