"""The CNNs that hyper-parameter sweeps train most, scripted from Python:
MobileNet-V2 and ResNet-18 (CIFAR-10 variants), PointNet classification and
segmentation (with the feature transform), and the DCGAN generator and
discriminator (64x64 images).

Each takes `width`, a multiplier of the published channel counts (1.0 is the
published model); the tests use small widths, the benchmarks 1.0.

`python examples/vision.py OUT_DIR --kind resnet18 --members 4 --width 0.25`
writes OUT_DIR/resnet18_{b}.pt, one TorchScript file per member.
"""
import torch
from torch import nn
import torch.nn.functional as F

import mlp


def scaled(channels, width):
    return max(1, int(round(channels * width)))


# --- ResNet-18 for CIFAR-10 (3x3 stem, no max pool; He et al. 2016) ----------

class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet18(nn.Module):
    def __init__(self, classes=10, width=1.0):
        super().__init__()
        planes = [scaled(c, width) for c in (64, 128, 256, 512)]
        self.conv1 = nn.Conv2d(3, planes[0], 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes[0])
        layers, in_planes = [], planes[0]
        for i, p in enumerate(planes):
            for stride in (1 if i == 0 else 2, 1):
                layers.append(BasicBlock(in_planes, p, stride))
                in_planes = p
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(planes[3], classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layers(out)
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        return self.linear(out)


# --- MobileNet-V2 for CIFAR-10 (stride 1 stem and first stages) --------------

class InvertedResidual(nn.Module):
    """expand (1x1) -> depthwise (3x3) -> project (1x1), residual when the
    shape allows, a 1x1 conv on the shortcut when only the channels differ."""

    def __init__(self, in_planes, out_planes, expansion, stride):
        super().__init__()
        self.stride = stride
        planes = expansion * in_planes
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, groups=planes, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut = nn.Sequential()
        if stride == 1 and in_planes != out_planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, out_planes, 1, bias=False),
                                          nn.BatchNorm2d(out_planes))

    def forward(self, x):
        out = F.relu6(self.bn1(self.conv1(x)))
        out = F.relu6(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.stride == 1:
            out = out + self.shortcut(x)
        return out


class MobileNetV2(nn.Module):
    # (expansion, out_planes, blocks, stride); stride 1 where ImageNet has 2,
    # for 32x32 inputs.
    CFG = [(1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2),
           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, classes=10, width=1.0):
        super().__init__()
        stem = scaled(32, width)
        self.conv1 = nn.Conv2d(3, stem, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        layers, in_planes = [], stem
        for expansion, out, blocks, stride in self.CFG:
            out = scaled(out, width)
            for s in [stride] + [1] * (blocks - 1):
                layers.append(InvertedResidual(in_planes, out, expansion, s))
                in_planes = out
        self.layers = nn.Sequential(*layers)
        head = scaled(1280, width)
        self.conv2 = nn.Conv2d(in_planes, head, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(head)
        self.linear = nn.Linear(head, classes)

    def forward(self, x):
        out = F.relu6(self.bn1(self.conv1(x)))
        out = self.layers(out)
        out = F.relu6(self.bn2(self.conv2(out)))
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        return self.linear(out)


# --- PointNet (Qi et al. 2017), after the reference PyTorch port -------------

class STNkd(nn.Module):
    """Predicts a k x k transform of the points (k = 3) or features (k = 64)."""

    def __init__(self, k, width):
        super().__init__()
        self.k = k
        c1, c2, c3, f1, f2 = (scaled(c, width) for c in (64, 128, 1024, 512, 256))
        self.conv1, self.conv2, self.conv3 = nn.Conv1d(k, c1, 1), nn.Conv1d(c1, c2, 1), nn.Conv1d(c2, c3, 1)
        self.fc1, self.fc2, self.fc3 = nn.Linear(c3, f1), nn.Linear(f1, f2), nn.Linear(f2, k * k)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(c1), nn.BatchNorm1d(c2), nn.BatchNorm1d(c3)
        self.bn4, self.bn5 = nn.BatchNorm1d(f1), nn.BatchNorm1d(f2)
        self.features = c3

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, self.features)
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)
        iden = torch.eye(self.k, dtype=x.dtype, device=x.device).view(1, self.k * self.k).repeat(batchsize, 1)
        x = x + iden
        return x.view(-1, self.k, self.k)


class PointNetFeat(nn.Module):
    def __init__(self, global_feat, width):
        super().__init__()
        c1, c2, c3 = (scaled(c, width) for c in (64, 128, 1024))
        self.stn = STNkd(3, width)
        self.fstn = STNkd(c1, width)
        self.conv1, self.conv2, self.conv3 = nn.Conv1d(3, c1, 1), nn.Conv1d(c1, c2, 1), nn.Conv1d(c2, c3, 1)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(c1), nn.BatchNorm1d(c2), nn.BatchNorm1d(c3)
        self.global_feat = global_feat
        self.features = c3

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        trans_feat = self.fstn(x)
        x = torch.bmm(x.transpose(2, 1), trans_feat).transpose(2, 1)
        pointfeat = x
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, self.features)
        if not self.global_feat:
            x = x.view(-1, self.features, 1).repeat(1, 1, n_pts)
            x = torch.cat([x, pointfeat], 1)
        return x, trans, trans_feat


class PointNetCls(nn.Module):
    """Returns (log-probabilities, input transform, feature transform)."""

    def __init__(self, classes=10, width=1.0, dropout=0.3):
        super().__init__()
        self.feat = PointNetFeat(True, width)
        f1, f2 = scaled(512, width), scaled(256, width)
        self.fc1, self.fc2, self.fc3 = nn.Linear(self.feat.features, f1), nn.Linear(f1, f2), nn.Linear(f2, classes)
        self.dropout = nn.Dropout(p=dropout)
        self.bn1, self.bn2 = nn.BatchNorm1d(f1), nn.BatchNorm1d(f2)

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        x = self.fc3(x)
        return F.log_softmax(x, dim=1), trans, trans_feat


class PointNetSeg(nn.Module):
    """Per-point log-probabilities [N, points, parts], and the transforms."""

    def __init__(self, classes=4, width=1.0):
        super().__init__()
        self.k = classes
        self.feat = PointNetFeat(False, width)
        c1, c2, c3 = (scaled(c, width) for c in (512, 256, 128))
        self.conv1 = nn.Conv1d(self.feat.features + scaled(64, width), c1, 1)
        self.conv2, self.conv3, self.conv4 = nn.Conv1d(c1, c2, 1), nn.Conv1d(c2, c3, 1), nn.Conv1d(c3, classes, 1)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(c1), nn.BatchNorm1d(c2), nn.BatchNorm1d(c3)

    def forward(self, x):
        batchsize = x.size()[0]
        n_pts = x.size()[2]
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = self.conv4(x)
        x = x.transpose(2, 1).contiguous()
        x = F.log_softmax(x.view(-1, self.k), dim=-1)
        return x.view(batchsize, n_pts, self.k), trans, trans_feat


# --- DCGAN (Radford et al. 2016), 64x64 images, after the PyTorch example ----

class DCGANGenerator(nn.Module):
    """A [nz, 1, 1] code to a [3, 64, 64] image."""

    def __init__(self, nz=100, width=1.0, channels=3):
        super().__init__()
        ngf = scaled(64, width)
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, channels, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class DCGANDiscriminator(nn.Module):
    """A [3, 64, 64] image to the probability that it is real."""

    def __init__(self, width=1.0, channels=3):
        super().__init__()
        ndf = scaled(64, width)
        self.main = nn.Sequential(
            nn.Conv2d(channels, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


MODELS = {"resnet18": ResNet18, "mobilenet_v2": MobileNetV2, "pointnet_cls": PointNetCls,
          "pointnet_seg": PointNetSeg, "dcgan_g": DCGANGenerator, "dcgan_d": DCGANDiscriminator}
# One member's input shape (without the batch dim).
INPUT_SHAPES = {"resnet18": (3, 32, 32), "mobilenet_v2": (3, 32, 32), "pointnet_cls": (3, 64),
                "pointnet_seg": (3, 64), "dcgan_g": (100, 1, 1), "dcgan_d": (3, 64, 64)}
mlp.MODELS.update(MODELS)

if __name__ == "__main__":
    mlp.main(__doc__, MODELS, "resnet18")
