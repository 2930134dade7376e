"""What the tests of the Python package share: float64 (so that a member
fused and the member alone agree to rounding), and small models whose
layers are wider than 16 lanes, so that AVX2 and AVX-512 machines take the
same kernels."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

# Fused and alone compute the same sums in other orders (one batched GEMM
# against B GEMMs): float64 rounding, 1e-16 relative per operation, grows
# over a few layers and steps to ~1e-14; 1e-10 leaves room for that and
# fails on any real difference (a wrong member's value is off by 1e-3 or more).
TOLERANCE = 1e-10


class Mlp(nn.Module):
    def __init__(self, width=40):
        super().__init__()
        self.fc1 = nn.Linear(24, width)
        self.fc2 = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 20, 3, padding=1)
        self.bn = nn.BatchNorm2d(20)
        self.fc = nn.Linear(20 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


@pytest.fixture(autouse=True)
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def members(make, count, seed=0):
    """`count` members, member b made after torch.manual_seed(seed + b)."""
    made = []
    for b in range(count):
        torch.manual_seed(seed + b)
        made.append(make())
    return made


def alone_copies(models):
    return [copy.deepcopy(m) for m in models]


def assert_member_matches(fused, b, model):
    """Member b of the fused module has `model`'s parameters and buffers."""
    import hfta
    member = hfta.split(fused, b)
    got = dict(member.named_parameters())
    got.update(dict(member.named_buffers()))
    want = dict(model.named_parameters())
    want.update(dict(model.named_buffers()))
    assert got.keys() == want.keys()
    for name, tensor in want.items():
        torch.testing.assert_close(got[name], tensor.detach(), rtol=TOLERANCE, atol=TOLERANCE,
                                   msg=lambda m: f"member {b}, {name}: {m}")
