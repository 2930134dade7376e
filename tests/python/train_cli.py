"""The command line the hfta-train tests share: --train (the hfta-train
binary), --runtime (libhfta_runtime.so, loaded here so that fused
modules load in Python), the other binaries a test names (--fuse), and
--device for the tests that run on a GPU too (scripts/gpu_check.sh)."""
import argparse

import torch


def parse_args(*tools):
    parser = argparse.ArgumentParser()
    for flag in ("--train", "--runtime", *tools):
        parser.add_argument(flag, required=True)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.ops.load_library(args.runtime)
    return args
