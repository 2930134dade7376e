"""Models for the fusion rules of group and instance norm, the upsample
family, 3-D convolution and pooling, expand_as and the random ops
(torchvision's stochastic depth among them). make_test_models.py scripts
their members and writes PyTorch's answers.

Sizes reach past 16 lanes (channels or the innermost spatial size above 16)
so that AVX2 and AVX-512 machines run the same ATen paths: full vectors and
a tail.
"""
import torch
from torch import nn, Tensor
import torch.nn.functional as F

import mlp


def _log_api_usage_once(obj) -> None:
    """torchvision's usage logging (a no-op here; scripting skips it)."""


# torchvision.ops.stochastic_depth (torchvision 0.26.0), as it is: torchvision
# may be missing from the environment, and the IR hfta fuses is this code's.
def stochastic_depth(input: Tensor, p: float, mode: str, training: bool = True) -> Tensor:
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(stochastic_depth)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
    if mode not in ["batch", "row"]:
        raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
    if not training or p == 0.0:
        return input

    survival_rate = 1.0 - p
    if mode == "row":
        size = [input.shape[0]] + [1] * (input.ndim - 1)
    else:
        size = [1] * input.ndim
    noise = torch.empty(size, dtype=input.dtype, device=input.device)
    noise = noise.bernoulli_(survival_rate)
    if survival_rate > 0.0:
        noise.div_(survival_rate)
    return input * noise


class StochasticDepth(nn.Module):
    """torchvision.ops.StochasticDepth."""

    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
        _log_api_usage_once(self)
        self.p = p
        self.mode = mode

    def forward(self, input: Tensor) -> Tensor:
        return stochastic_depth(input, self.p, self.mode, self.training)


class EncoderDecoder(nn.Module):
    """An encoder-decoder CNN: GroupNorm (affine and not), InstanceNorm2d
    (affine; with running statistics), a transposed convolution, and
    F.interpolate in every 2-D mode: nearest and nearest-exact, bilinear
    with align_corners and antialiased, bicubic, area; by size and by scale
    factor."""

    def __init__(self, out_channels=2):
        super().__init__()
        self.enc1 = nn.Conv2d(3, 20, 3, padding=1)
        self.gn = nn.GroupNorm(4, 20)
        self.enc2 = nn.Conv2d(20, 24, 3, stride=2, padding=1)
        self.inorm = nn.InstanceNorm2d(24, affine=True)
        self.dec = nn.ConvTranspose2d(44, 20, 4, stride=2, padding=1)
        self.inorm_stats = nn.InstanceNorm2d(20, track_running_stats=True)
        self.mix = nn.Conv2d(44, 20, 1)
        self.gn_plain = nn.GroupNorm(5, 20, affine=False)
        self.head = nn.Conv2d(20, out_channels, 3, padding=1)

    def forward(self, x):                                                       # [N, 3, 20, 20]
        e1 = F.relu(self.gn(self.enc1(x)))                                      # [N, 20, 20, 20]
        e2 = F.relu(self.inorm(self.enc2(e1)))                                  # [N, 24, 10, 10]
        a = F.interpolate(e1, scale_factor=0.5, mode="bilinear", antialias=True)
        b = F.interpolate(e1, size=(10, 10), mode="area")
        m = torch.cat([e2, a + b], 1)                                           # [N, 44, 10, 10]
        d = self.inorm_stats(self.dec(m))                                       # [N, 20, 20, 20]
        u = (F.interpolate(m, scale_factor=2.0, mode="nearest")
             + F.interpolate(m, size=(20, 20), mode="bilinear", align_corners=True)
             + F.interpolate(m, scale_factor=2.0, mode="bicubic")
             - F.interpolate(m, size=(20, 20), mode="nearest-exact")
             + F.interpolate(m, scale_factor=2.0, mode="bilinear"))
        z = self.gn_plain(F.relu(d + self.mix(u) + e1))
        return self.head(z)                                                     # [N, 2, 20, 20]


class Resample1d(nn.Module):
    """The 1-D forms: InstanceNorm1d (neither affine nor running
    statistics), GroupNorm, F.interpolate linear (align_corners, scale
    factor), nearest, nearest-exact and area, max pooling with indices and
    adaptive max pooling."""

    def __init__(self, classes=6):
        super().__init__()
        self.conv = nn.Conv1d(4, 18, 3, padding=1)
        self.inorm = nn.InstanceNorm1d(18)
        self.gn = nn.GroupNorm(3, 18)
        self.out = nn.Conv1d(36, classes, 3, stride=2)

    def forward(self, x):                                                       # [N, 4, 24]
        h = F.gelu(self.gn(self.inorm(self.conv(x))))                           # [N, 18, 24]
        u = (F.interpolate(h, scale_factor=2.0, mode="linear")
             + F.interpolate(h, size=48, mode="linear", align_corners=True)
             + F.interpolate(h, size=48, mode="nearest")
             - F.interpolate(h, scale_factor=2.0, mode="nearest-exact")) / 2    # [N, 18, 48]
        p, idx = F.max_pool1d(u, 2, return_indices=True)                        # [N, 18, 24]
        p = p + idx.to(p.dtype) * 1e-3
        q = F.interpolate(u, size=24, mode="area") + F.adaptive_max_pool1d(u, 24)
        return self.out(torch.cat([p, q], 1))                                   # [N, 6, 11]


class Conv3dNet(nn.Module):
    """3-D convolutions (padded, 'same', transposed) with BatchNorm3d,
    InstanceNorm3d and GroupNorm, 3-D max (with indices), average and
    adaptive pooling, trilinear and nearest 3-D interpolation."""

    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv3d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm3d(8)
        self.conv2 = nn.Conv3d(8, 12, 3, padding="same")
        self.inorm = nn.InstanceNorm3d(12, affine=True)
        self.up = nn.ConvTranspose3d(12, 8, (1, 2, 2), stride=(1, 2, 2))
        self.gn = nn.GroupNorm(2, 8)
        self.head = nn.Linear(2 * 8 * 2 * 3 * 3, classes)

    def forward(self, x):                                                       # [N, 3, 4, 18, 18]
        x = F.relu(self.bn(self.conv1(x)))                                      # [N, 8, 4, 18, 18]
        x, idx = F.max_pool3d(x, (1, 2, 2), return_indices=True)               # [N, 8, 4, 9, 9]
        x = x + idx.to(x.dtype) * 1e-4
        x = F.relu(self.inorm(self.conv2(x)))                                   # [N, 12, 4, 9, 9]
        x = F.avg_pool3d(x, (2, 1, 1))                                          # [N, 12, 2, 9, 9]
        y = self.gn(self.up(x))                                                 # [N, 8, 2, 18, 18]
        y = (F.interpolate(y, scale_factor=(2.0, 1.0, 1.0), mode="trilinear")
             + F.interpolate(y, size=(4, 18, 18), mode="trilinear", align_corners=True)
             + F.interpolate(y, size=(4, 18, 18), mode="nearest")
             - F.interpolate(y, scale_factor=(2.0, 1.0, 1.0), mode="nearest-exact")) / 2  # [N, 8, 4, 18, 18]
        y = F.max_pool3d(y, 2, ceil_mode=True)                                  # [N, 8, 2, 9, 9]
        a = F.adaptive_avg_pool3d(y, (2, 3, 3)) + F.interpolate(y, size=(2, 3, 3), mode="area")
        b = F.adaptive_max_pool3d(y, (2, 3, 3))
        # (scaled: 288 features of size ~1 would make SGD at the reference's
        # learning rates diverge)
        return self.head(torch.cat([a, b], 1).flatten(1) / 16)


class ExpandAsEncoder(nn.Module):
    """A BERT-style embedding block that broadcasts with expand_as: learned
    positions (per member) to the batch, a per-member gate to the features,
    and token-type ids made from constants (the same in every member) to
    the batch's shape."""

    def __init__(self, length=20, dim=24, classes=5):
        super().__init__()
        self.inp = nn.Linear(dim, dim)
        self.pos = nn.Parameter(torch.randn(length, dim) * 0.1)
        self.types = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):                                                       # [N, 20, 24]
        h = self.inp(x)
        pos = self.pos.unsqueeze(0).expand_as(h)
        gate = torch.sigmoid(x[:, :, :1]).expand_as(h)
        types = torch.zeros(1, x.size(1), dtype=torch.long, device=x.device).expand_as(x[:, :, 0])
        h = self.norm(h + pos * gate + self.types(types))
        return self.head(h.mean(1))


class StochasticDepthNet(nn.Module):
    """Residual blocks behind torchvision's StochasticDepth in both modes
    (EfficientNet's "row", and "batch")."""

    def __init__(self, p=0.0, classes=5):
        super().__init__()
        self.stem = nn.Conv2d(3, 18, 3, padding=1)
        self.bn = nn.BatchNorm2d(18)
        self.block1 = nn.Sequential(nn.Conv2d(18, 18, 3, padding=1), nn.BatchNorm2d(18), nn.ReLU())
        self.drop_row = StochasticDepth(p, "row")
        self.block2 = nn.Sequential(nn.Conv2d(18, 18, 3, padding=1, groups=18), nn.BatchNorm2d(18), nn.SiLU())
        self.drop_batch = StochasticDepth(p, "batch")
        self.head = nn.Linear(18, classes)

    def forward(self, x):                                                       # [N, 3, 17, 17]
        x = F.relu(self.bn(self.stem(x)))
        x = x + self.drop_row(self.block1(x))
        x = x + self.drop_batch(self.block2(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class RandomDraws(nn.Module):
    """Every random op hfta fuses, with its draws as outputs, for the
    statistics test: stochastic depth in both modes, rand_like, randn_like,
    bernoulli, the in-place fills of a fresh tensor all members share
    (torch.empty's bernoulli_ with a float and a tensor probability, and
    new_empty's normal_) and of a per-member one (uniform_), and dropout,
    element-wise and channel-wise, at p."""

    def __init__(self, p=0.25):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.row = StochasticDepth(p, "row")
        self.batch = StochasticDepth(p, "batch")
        self.p = p

    def forward(self, x):
        h = x * self.scale                                                      # per member
        return (self.row(h), self.batch(h), torch.rand_like(h), torch.randn_like(h), torch.bernoulli(h * 0.3),
                torch.empty(x.size(), dtype=x.dtype).bernoulli_(0.3),
                torch.empty(x.size(), dtype=x.dtype).bernoulli_(torch.full_like(h, 0.6)),
                h.new_empty(x.size()).normal_(2.0, 3.0),
                torch.empty_like(h).uniform_(-1.0, 1.0), F.dropout(h, self.p, self.training),
                F.dropout2d(h, self.p, self.training))


MODELS = {"encdec": EncoderDecoder, "resample1d": Resample1d, "conv3d": Conv3dNet, "expand_as": ExpandAsEncoder,
          "stochastic_depth": StochasticDepthNet, "random_draws": RandomDraws}
# One member's input shape (without the batch dim).
INPUT_SHAPES = {"encdec": (3, 20, 20), "resample1d": (4, 24), "conv3d": (3, 4, 18, 18), "expand_as": (20, 24),
                "stochastic_depth": (3, 17, 17), "random_draws": (2, 4, 17)}
mlp.MODELS.update(MODELS)
