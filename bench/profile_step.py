"""Where a training step's time goes: torch.profiler's operator table for
one fused step against the same B members stepped one after another (the
members' files and the fused module hfta-fuse wrote from them), and the two
step times. How the findings in bench/README.md were made.

.venv/bin/python bench/profile_step.py --kind pointnet_cls --members 8 --batch 32 --threads 2 [--shapes]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import cnn  # noqa: E402,F401  (registers the CNN kinds)
import vision  # noqa: E402  (registers the vision kinds)
import text  # noqa: E402  (the Transformers)


def main_output(out):
    return out[0] if isinstance(out, tuple) else out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", required=True)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--input-shape", help="one sample's shape (default: the model's)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--shapes", action="store_true", help="group the fused step's operators by input shape")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    torch.ops.load_library(os.path.join(args.build, "runtime", "libhfta_runtime.so"))
    torch.set_num_threads(args.threads)
    shapes = {**cnn.INPUT_SHAPES, **vision.INPUT_SHAPES, "mlp": (16,),
              **{kind: (length,) for kind, length in text.SEQUENCE_LENGTHS.items()}}
    shape = [int(s) for s in args.input_shape.split(",")] if args.input_shape else list(shapes[args.kind])
    script = {"mlp": "mlp.py"}.get(args.kind, "cnn.py" if args.kind in cnn.MODELS else
                                   "text.py" if args.kind in text.MODELS else "vision.py")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), tmp, "--kind", args.kind,
                        "--members", str(args.members)], check=True, stdout=subprocess.DEVNULL)
        paths = [os.path.join(tmp, f"{args.kind}_{b}.pt") for b in range(args.members)]
        subprocess.run([os.path.join(args.build, "tools", "hfta-fuse"), *paths, "-o", os.path.join(tmp, "fused.pt")],
                       check=True, stdout=subprocess.DEVNULL)
        fused = torch.jit.load(os.path.join(tmp, "fused.pt"))
        members = [torch.jit.load(p) for p in paths]
    if args.kind in text.VOCABULARIES:  # token ids
        x = torch.randint(text.VOCABULARIES[args.kind], (args.members, args.batch, *shape))
    else:
        x = torch.randn(args.members, args.batch, *shape)

    def fused_step():
        main_output(fused(x)).pow(2).flatten(1).mean(1).sum().backward()

    def separate_step():
        for b, m in enumerate(members):
            main_output(m(x[b])).pow(2).mean().backward()

    steps = {"fused": fused_step, "separate": separate_step}
    for step in steps.values():  # the profiling executor's first runs
        for _ in range(3):
            step()
    for name, step in steps.items():
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        print(f"{name}: {(time.perf_counter() - start) / args.steps * 1e3:.1f} ms per step")
    for name, step in steps.items():
        with profile(activities=[ProfilerActivity.CPU], record_shapes=args.shapes) as prof:
            for _ in range(args.steps):
                step()
        table = prof.key_averages(group_by_input_shape=args.shapes and name == "fused")
        print(f"\n{name}, {args.steps} steps:")
        print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=45,
                          max_shapes_column_width=80))


if __name__ == "__main__":
    main()
