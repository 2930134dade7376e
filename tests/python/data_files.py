"""Data files in their authors' formats, written for the tests and the
README's CIFAR-10 workflow on a machine without the real data set: images
whose class k has a bright patch at row band k (something to learn), in
CIFAR-10's binary batches.

python tests/python/data_files.py cifar10 DIR     (data_batch_1..5.bin and test_batch.bin)
"""
import os
import sys

import torch


def patterned(count, channels, size, generator):
    """uint8 images [count, C, H, W] whose class k has a bright patch at row
    band k, and their labels."""
    labels = torch.randint(0, 10, (count,), generator=generator)
    images = torch.randint(0, 80, (count, channels, size, size), generator=generator, dtype=torch.uint8)
    band = size // 10
    for k in range(10):
        images[labels == k, :, k * band:(k + 1) * band, :] = 250
    return images, labels



def write_cifar10(folder, generator, test=False):
    """data_batch_1.bin ... data_batch_5.bin (and test_batch.bin if `test`):
    10000 records each of a label byte and the R, G, B planes; returns the
    training images and labels."""
    os.makedirs(folder, exist_ok=True)
    all_images, all_labels = [], []
    for name in [f"data_batch_{batch}" for batch in range(1, 6)] + (["test_batch"] if test else []):
        images, labels = patterned(10000, 3, 32, generator)
        records = torch.cat([labels.to(torch.uint8)[:, None], images.flatten(1)], 1)  # label, R, G, B planes
        with open(os.path.join(folder, f"{name}.bin"), "wb") as f:
            f.write(records.numpy().tobytes())
        if name != "test_batch":
            all_images.append(images)
            all_labels.append(labels)
    return torch.cat(all_images), torch.cat(all_labels)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "cifar10":
        sys.exit(__doc__)
    write_cifar10(sys.argv[2], torch.Generator().manual_seed(0), test=True)
