"""Small convolutional models, scripted from Python: conv, batch norm,
pooling and the activations CNNs use, at sizes that keep the tests fast.

`python examples/cnn.py OUT_DIR --kind lenet --members 3` writes
OUT_DIR/lenet_{b}.pt, one TorchScript file per member.
"""
import torch
from torch import nn
import torch.nn.functional as F

import mlp


class LeNet(nn.Module):
    """conv-bn-relu-maxpool, conv-relu6-avgpool, channel dropout, two linears."""

    def __init__(self, classes=10, dropout=0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.drop = nn.Dropout2d(dropout)
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu6(self.conv2(x)), 2)
        x = torch.flatten(self.drop(x), 1)
        return self.fc2(F.hardswish(self.fc1(x)))


class ResBlockNet(nn.Module):
    """A residual block between a reflect-padded stem and a pooled head:
    padding modes and strings, a grouped conv, batch norm without affine and
    with a cumulative average (momentum=None), PReLU, adaptive pooling."""

    def __init__(self, classes=5):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect", bias=False)
        self.bn0 = nn.BatchNorm2d(8, momentum=None)
        self.conv1 = nn.Conv2d(8, 8, 3, padding="same", groups=2)
        self.bn1 = nn.BatchNorm2d(8, affine=False)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=1, padding=1, padding_mode="circular")
        self.bn2 = nn.BatchNorm2d(8)
        self.act = nn.PReLU(8)
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        x = F.relu(self.bn0(self.stem(x)))
        y = self.act(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = F.hardsigmoid(x + y) * x
        x = F.adaptive_avg_pool2d(x, 1)
        return self.head(torch.flatten(x, 1))


class PointNetLike(nn.Module):
    """Shared per-point MLP as 1x1 conv1d + BatchNorm1d (the second without
    running statistics: batch statistics in eval mode too), max over points."""

    def __init__(self, classes=4):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 16, 1)
        self.bn1 = nn.BatchNorm1d(16)
        self.conv2 = nn.Conv1d(16, 32, 1)
        self.bn2 = nn.BatchNorm1d(32, track_running_stats=False)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2)[0]
        return self.fc(x)


class TinyGenerator(nn.Module):
    """A DCGAN-style generator: transposed convolutions with batch norm and
    ReLU from a [8, 1, 1] code to a 1x16x16 image, flattened."""

    def __init__(self, code=8, width=8):
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(code, 2 * width, 4, 1, 0, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(True),
            nn.ConvTranspose2d(2 * width, width, 4, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True),
            nn.ConvTranspose2d(width, 1, 4, 2, 1, groups=1), nn.Tanh())

    def forward(self, z):
        return torch.flatten(self.net(z), 1)


MODELS = {"lenet": LeNet, "resblock": ResBlockNet, "pointnet": PointNetLike, "generator": TinyGenerator}
# One member's input shape (without the batch dim), for tests and tools.
INPUT_SHAPES = {"lenet": (1, 16, 16), "resblock": (3, 8, 8), "pointnet": (3, 32), "generator": (8, 1, 1)}
mlp.MODELS.update(MODELS)

if __name__ == "__main__":
    mlp.main(__doc__, MODELS, "lenet")
