"""torchvision classifiers as members, for the throughput harness's rows
beyond examples/vision.py (bench/throughput.py): ResNet-50, EfficientNet-B0,
ConvNeXt-T and ViT-B/32, untrained (weights=None), 10 classes, sized for
64x64 inputs (ViT-B/32 built for 64-pixel images: 4 patches).

`python examples/torchvision_zoo.py OUT_DIR --kind resnet50 --members 8`
writes OUT_DIR/resnet50_{b}.pt, one TorchScript file per member, member b
seeded b.
"""
import os
import sys
import warnings

from torchvision import models

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp  # noqa: E402

warnings.filterwarnings("ignore", message=r".*TorchScript.*", category=DeprecationWarning)

SIDE = 64
MODELS = {
    "resnet50": lambda: models.resnet50(weights=None, num_classes=10),
    "efficientnet_b0": lambda: models.efficientnet_b0(weights=None, num_classes=10),
    "convnext_tiny": lambda: models.convnext_tiny(weights=None, num_classes=10),
    "vit_b_32": lambda: models.vit_b_32(weights=None, num_classes=10, image_size=SIDE),
}
# One member's input shape (without the batch dim).
INPUT_SHAPES = {kind: (3, SIDE, SIDE) for kind in MODELS}
mlp.MODELS.update(MODELS)

if __name__ == "__main__":
    mlp.main(__doc__, MODELS, "resnet50")
