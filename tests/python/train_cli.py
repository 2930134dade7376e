"""The command line the hfta-train tests share: --train (the hfta-train
binary) and --runtime (libhfta_runtime.so, loaded here so that fused
modules load in Python)."""
import argparse

import torch


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", required=True)
    parser.add_argument("--runtime", required=True)
    args = parser.parse_args()
    torch.ops.load_library(args.runtime)
    return args
