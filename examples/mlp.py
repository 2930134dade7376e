"""Small MLP-style models, scripted from Python: the members that hfta fuses.

`python examples/mlp.py OUT_DIR --members 3` writes OUT_DIR/mlp_{b}.pt, one
TorchScript file per member, each initialized from its own seed.
"""
import argparse
import os
import warnings

import torch
from torch import nn
import torch.nn.functional as F

# TorchScript is deprecated from torch 2.11 but shipped and working; its
# warning would drown real ones.
warnings.filterwarnings("ignore", message=r".*TorchScript.*", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=r".*torch\.jit.*")


class MLP(nn.Module):
    """Flatten -> Linear -> ReLU -> Dropout -> Linear -> GELU -> Linear."""

    def __init__(self, in_features=16, hidden=32, classes=10, dropout=0.0, activation="gelu"):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, hidden)
        self.act = nn.GELU() if activation == "gelu" else nn.Tanh()
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = self.drop(F.relu(self.fc1(x)))
        x = self.act(self.fc2(x))
        return self.fc3(x)


class WideMLP(nn.Module):
    """Exercises the rest of the MLP rule set: the addmm and matmul+add forms
    of linear, element-wise activations and arithmetic, cat, size, view,
    an If on a uniform condition and a tuple output."""

    def __init__(self, in_features=16, hidden=24, classes=6):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(hidden, in_features) / in_features ** 0.5)
        self.b1 = nn.Parameter(torch.randn(hidden) * 0.1)
        self.w2 = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
        self.b2 = nn.Parameter(torch.randn(hidden) * 0.1)
        self.head = nn.Linear(4 * hidden, classes, bias=False)
        self.scale: float = 0.5
        self.leaky = nn.LeakyReLU(0.1)

    def forward(self, x):
        n = x.size(0)
        x = x.view(n, -1)
        a = torch.addmm(self.b1, x, self.w1.t())               # addmm form
        b = torch.matmul(torch.tanh(a), self.w2.t()) + self.b2  # matmul + add form
        parts = [
            torch.sigmoid(a) * b,
            F.silu(b) - 0.25 * self.leaky(a),
            F.softplus(b) / 2.0 + F.elu(a),
            F.hardtanh(a * self.scale) + torch.relu(b),
        ]
        h = torch.cat(parts, dim=1)
        if h.dim() == 2:
            h = h * 1.5
        else:
            h = h - 1.0
        logits = self.head(h)
        return logits, torch.tanh(logits.sum(dim=1))


class FallbackMLP(nn.Module):
    """An op with no fusion rule (cumsum) between fused layers: it runs per
    member, and the model still trains equivalently."""

    def __init__(self, in_features=16, hidden=16, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.cumsum(h, dim=1) / h.size(1)
        return self.fc2(h)


MODELS = {"mlp": MLP, "wide": WideMLP, "fallback": FallbackMLP}


def make_member(kind, seed, dtype=torch.float32, **kwargs):
    torch.manual_seed(seed)
    return torch.jit.script(MODELS[kind](**kwargs).to(dtype))


def save_members(out_dir, kind="mlp", members=3, first_seed=0, prefix=None, dtype=torch.float32, **kwargs):
    """Writes OUT_DIR/<prefix or kind>_<b>.pt, member b seeded first_seed + b."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for b in range(members):
        path = os.path.join(out_dir, f"{prefix or kind}_{b}.pt")
        torch.jit.save(make_member(kind, first_seed + b, dtype, **kwargs), path)
        paths.append(path)
    return paths


def main(description, kinds, default_kind):
    """Command line: write --members scripted members of --kind to OUT_DIR."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out_dir")
    parser.add_argument("--kind", choices=sorted(kinds), default=default_kind)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--width", type=float, help="channel multiplier (models that take one)")
    args = parser.parse_args()
    kwargs = {} if args.width is None else {"width": args.width}
    for p in save_members(args.out_dir, args.kind, args.members, args.first_seed, **kwargs):
        print(p)


if __name__ == "__main__":
    main(__doc__, MODELS, "mlp")
