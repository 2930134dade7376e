#!/usr/bin/env bash
# The census of torchvision's classification zoo (tests/python/zoo_census.py):
# every model built with 10 classes and no weights, scripted as 2 members of
# different seeds in float64, fused by hfta-fuse, and compared with each
# member alone (forward in train and eval mode, gradients, batch-norm
# statistics, hfta-split of member 0). Prints a Markdown table; progress
# goes to stderr.
#   scripts/zoo_census.sh [zoo_census.py options, e.g. --models resnet18,swin_t --max-params 0]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
scripts/build.sh hfta-fuse hfta-split hfta_runtime >&2
exec .venv/bin/python tests/python/zoo_census.py --fuse build/tools/hfta-fuse --split build/tools/hfta-split \
  --runtime build/runtime/libhfta_runtime.so "$@"
