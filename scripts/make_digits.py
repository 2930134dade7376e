"""Converts the 8x8 handwritten digits that scikit-learn ships (1797 images,
10 classes) into OUT (a torch.save'd {"images": [N, 1, 8, 8] in [0, 1],
"labels": [N]}): hfta-train's default data set, which needs no download."""
import os
import sys

import torch
from sklearn.datasets import load_digits


def main(out):
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    torch.save({"images": images, "labels": labels}, out + ".tmp")
    os.replace(out + ".tmp", out)
    print(f"make_digits: {len(labels)} images -> {out}")


if __name__ == "__main__":
    main(sys.argv[1])
