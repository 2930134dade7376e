"""The command line the hfta-train tests share: --train (the hfta-train
binary), --runtime (libhfta_runtime.so, loaded here so that fused
modules load in Python), and the other binaries a test names (--fuse)."""
import argparse

import torch


def parse_args(*tools):
    parser = argparse.ArgumentParser()
    for flag in ("--train", "--runtime", *tools):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    torch.ops.load_library(args.runtime)
    return args
