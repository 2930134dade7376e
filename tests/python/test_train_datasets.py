"""hfta-train reads MNIST (idx files, through LibTorch's reader) and CIFAR-10
(its binary batches) as their authors lay them out: written here in those
formats, each gives the same training run, metric for metric, as the same
samples decoded in Python (pixels / 255, channels first) and handed over as
a torch.save'd {images, labels} file; and the members learn the classes
(each class has its own bright patch), so images and labels line up.

python tests/python/test_train_datasets.py --train BUILD/tools/hfta-train --runtime BUILD/runtime/libhfta_runtime.so
"""
import csv
import os
import struct
import subprocess
import tempfile

import torch

import train_cli  # the script's own folder
from data_files import patterned, write_cifar10
from torch import nn
import torch.nn.functional as F

LIMIT = 600


class Probe(nn.Module):
    """A small CNN for any [C, H, W] input, pooled to 10 row bands."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 10, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.conv(x)), (10, 1)), 1))


def write_mnist(folder, generator):
    images, labels = patterned(60000, 1, 28, generator)  # LibTorch's reader wants all 60000
    with open(os.path.join(folder, "train-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">iiii", 2051, 60000, 28, 28) + images.numpy().tobytes())
    with open(os.path.join(folder, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">ii", 2049, 60000) + labels.to(torch.uint8).numpy().tobytes())
    return images, labels


def metrics(path):
    with open(path) as f:
        return [{k: v for k, v in row.items() if not k.endswith("seconds")} for row in csv.DictReader(f)]


def main():
    args = train_cli.parse_args()
    generator = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, channels, write in (("mnist", 1, write_mnist), ("cifar10", 3, write_cifar10)):
            folder = os.path.join(tmp, name)
            os.makedirs(folder)
            images, labels = write(folder, generator)
            decoded = os.path.join(tmp, f"{name}.pt")
            torch.save({"images": images[:LIMIT].float() / 255, "labels": labels[:LIMIT]}, decoded)
            model = os.path.join(tmp, f"{name}_model.pt")
            torch.jit.save(torch.jit.script(Probe(channels)), model)
            common = [args.train, model, "--array-size", "2", "--lr", "0.05,0.2", "--momentum", "0.9",
                      "--epochs", "3", "--batch-size", "32", "--limit", str(LIMIT), "--threads", "2"]
            subprocess.run(common + ["--dataset", name, "--data", folder, "--out", os.path.join(tmp, name + "_run")],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run(common + ["--dataset", "digits", "--data", decoded, "--out", os.path.join(tmp, name + "_pt")],
                           check=True, stdout=subprocess.DEVNULL)
            read = metrics(os.path.join(tmp, name + "_run", "metrics.csv"))
            assert read == metrics(os.path.join(tmp, name + "_pt", "metrics.csv")), \
                f"{name}: training on the files differs from training on the same samples decoded in Python"
            final = [float(r["heldout_accuracy"]) for r in read if r["epoch"] == "3"]
            assert min(final) > 0.5, f"{name}: the members did not learn the patterned classes: {final}"
            print(f"{name}: same run as the Python-decoded samples; held-out accuracy {final}")
    print("test_train_datasets: OK")


if __name__ == "__main__":
    main()
