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


class LayerZoo(nn.Module):
    """The remaining conv, pooling and shape forms, 2-D and 1-D: 'valid' and
    'same' padding, dilation, replicate padding, max pooling with indices
    and ceil_mode, average pooling with count_include_pad=False and a
    divisor_override, in-place channel dropout, adaptive max and average
    pooling, a grouped
    transposed convolution with output_padding and dilation, amax and mean over spatial
    dims, chunk, split, permute, contiguous, squeeze and unsqueeze."""

    def __init__(self, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding="valid", dilation=2)
        self.up = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2)
        self.conv1d = nn.Conv1d(6, 6, 3, padding="same")
        self.head = nn.Linear(6 + 6 + 24 + 4, classes)

    def forward(self, x):
        a = self.conv(x)                                      # [N, 6, 8, 8]
        a = F.pad(a, (1, 1, 1, 1), mode="replicate")          # 10 x 10
        a, idx = F.max_pool2d(a, 3, stride=2, ceil_mode=True, return_indices=True)  # 5 x 5
        a = a + idx.to(a.dtype) * 1e-3
        a = F.avg_pool2d(a, 2, stride=1, padding=1, count_include_pad=False)        # 6 x 6
        a = F.dropout2d(a, 0.0, self.training, inplace=True)  # the in-place form; p = 0 keeps the oracle exact
        b = F.adaptive_max_pool2d(F.avg_pool2d(a, 3, divisor_override=4), 1)       # [N, 6, 1, 1]
        c = self.up(a).amax(dim=(2, 3))                       # [N, 4]
        t = a.flatten(2)                                      # [N, 6, 36]
        t1, t2 = t.chunk(2, dim=1)
        u = torch.cat([t1.amax(dim=2), t2.mean(dim=2)], dim=1).unsqueeze(2).squeeze(2)  # [N, 6]
        s1, s2 = torch.split(t.permute(0, 2, 1).contiguous(), [20, 16], dim=1)
        v = F.max_pool1d(s1.transpose(1, 2), 2, ceil_mode=True)                     # [N, 6, 10]
        v = F.avg_pool1d(v, 3, stride=1, padding=1, count_include_pad=False)
        w = self.conv1d(F.adaptive_avg_pool1d(v, 4)) + s2.mean(dim=1, keepdim=True).transpose(1, 2)[:, :, :4]
        z = torch.cat([torch.flatten(b, 1), u, w.flatten(1), c], dim=1)
        return self.head(z)


class DigitsCNN(nn.Module):
    """A small CNN for the 8x8 digits (hfta-train's default data set)."""

    def __init__(self, classes=10, conv_bias=True):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=conv_bias)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=conv_bias)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 4 * 4, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(torch.flatten(x, 1))


MODELS = {"lenet": LeNet, "resblock": ResBlockNet, "pointnet": PointNetLike, "generator": TinyGenerator,
          "zoo": LayerZoo, "digits": DigitsCNN}
# One member's input shape (without the batch dim), for tests and tools.
INPUT_SHAPES = {"lenet": (1, 16, 16), "resblock": (3, 8, 8), "pointnet": (3, 32), "generator": (8, 1, 1),
                "zoo": (3, 12, 12), "digits": (1, 8, 8)}
mlp.MODELS.update(MODELS)

if __name__ == "__main__":
    mlp.main(__doc__, MODELS, "lenet")
