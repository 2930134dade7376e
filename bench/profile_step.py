"""Where a training step's time goes: torch.profiler's operator table for
one fused step against the same B members stepped one after another (the
members' files and the fused module hfta-fuse wrote from them), or against
the dense bound (member 0 at batch B x N, --against dense: then one table
puts each operator's time in both side by side), and the step times: the
harness's steps without the optimizer. How the findings in bench/README.md
were made.

.venv/bin/python bench/profile_step.py --kind pointnet_cls --members 8 --batch 32 --threads 2 [--shapes]
.venv/bin/python bench/profile_step.py --kind lenet --against dense --executor simple
"""
import argparse
import os
import resource
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
from python_modes import main_output, member_losses  # noqa: E402  (the harness's losses)
from throughput import keep_large_allocations, reexec_with_harness_malloc  # noqa: E402


def main():
    # malloc as the harness and hfta-train keep it (support/allocator.h says
    # why): with glibc's defaults only the fused step's blocks, above 32 MB,
    # were mapped afresh each step, and PointNet's profile read it 30% slower.
    if "--glibc-malloc" not in sys.argv:
        reexec_with_harness_malloc()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", required=True)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--input-shape", help="one sample's shape (default: the model's)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--shapes", action="store_true", help="group the fused step's operators by input shape")
    parser.add_argument("--against", choices=["separate", "dense"], default="separate")
    parser.add_argument("--executor", choices=["profiling", "simple"], default="profiling",
                        help="TorchScript's executor for both (simple: the graph as it is, as hfta-train and the "
                        "harness run hfta and dense)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--per-step", action="store_true",
                        help="each timed step's wall, user and system time and page faults")
    parser.add_argument("--glibc-malloc", action="store_true",
                        help="keep glibc's malloc defaults (large blocks mapped afresh every step) and PyTorch's CPU "
                        "allocator, not the harness's")
    args = parser.parse_args()
    torch._C._set_graph_executor_optimize(args.executor == "profiling")
    torch.ops.load_library(os.path.join(args.build, "runtime", "libhfta_runtime.so"))
    if not args.glibc_malloc:
        keep_large_allocations(args.build)
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
    token_scores = args.kind in text.VOCABULARIES  # token ids in, scores over the vocabulary out
    if token_scores:
        x = torch.randint(text.VOCABULARIES[args.kind], (args.members, args.batch, *shape))
    else:
        x = torch.randn(args.members, args.batch, *shape)

    # The harness's losses (cross entropy for the text models, MSE for the
    # others), each target drawn at the first step.
    targets = {}

    def loss(key, out, members):
        losses, targets[key] = member_losses(main_output(out), targets.get(key), members, token_scores)
        return losses.sum()

    def fused_step():
        loss("fused", fused(x), args.members).backward()

    def separate_step():
        for b, m in enumerate(members):
            loss(b, m(x[b]), 1).backward()

    def dense_step():
        loss("dense", members[0](x.flatten(0, 1)), 1).backward()

    steps = {"fused": fused_step, args.against: separate_step if args.against == "separate" else dense_step}
    for step in steps.values():  # the profiling executor's first runs
        for _ in range(3):
            step()
    for name, step in steps.items():
        start = time.perf_counter()
        for i in range(args.steps):
            if not args.per_step:
                step()
                continue
            # Where a slow step's time went: the kernel mapping fresh pages shows as system time.
            before, step_start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            step()
            after = resource.getrusage(resource.RUSAGE_SELF)
            print(f"{name} step {i}: {(time.perf_counter() - step_start) * 1e3:.0f} ms, "
                  f"user {(after.ru_utime - before.ru_utime) * 1e3:.0f} ms, "
                  f"sys {(after.ru_stime - before.ru_stime) * 1e3:.0f} ms, "
                  f"{after.ru_minflt - before.ru_minflt} page faults")
        print(f"{name}: {(time.perf_counter() - start) / args.steps * 1e3:.1f} ms per step")
    tables = {}
    for name, step in steps.items():
        with profile(activities=[ProfilerActivity.CPU], record_shapes=args.shapes) as prof:
            for _ in range(args.steps):
                step()
        tables[name] = prof.key_averages(group_by_input_shape=args.shapes and name == "fused")
        if args.against == "separate":
            print(f"\n{name}, {args.steps} steps:")
            print(tables[name].table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=45,
                                     max_shapes_column_width=80))
    if args.against == "dense":
        print_side_by_side(tables, args)


def print_side_by_side(tables, args):
    """Each operator's self CPU time per step and calls per step, fused and dense, the largest first."""
    per_step = {name: {e.key: (e.self_cpu_time_total / args.steps / 1e3, e.count / args.steps) for e in table}
                for name, table in tables.items()}
    fused, dense = per_step["fused"], per_step["dense"]
    ops = sorted(set(fused) | set(dense), key=lambda op: -max(fused.get(op, (0, 0))[0], dense.get(op, (0, 0))[0]))
    print(f"\nself CPU ms per step (calls), {args.steps} steps profiled:")
    print(f"{'operator':45} {'fused':>16} {'dense':>16}")
    for op in ops[:args.rows]:
        cells = [f"{d[op][0]:8.2f} ({d[op][1]:4.0f})" if op in d else f"{'-':>16}" for d in (fused, dense)]
        print(f"{op[:45]:45} {cells[0]:>16} {cells[1]:>16}")
    print(f"{'total':45} {sum(v[0] for v in fused.values()):8.2f}{'':8} {sum(v[0] for v in dense.values()):8.2f}")


if __name__ == "__main__":
    main()
