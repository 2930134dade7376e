"""hfta-fuse at scale: wall time and peak resident memory of fusing B
ResNet-18 members (the published width, 43 MB each) for B = 8 ... 64.

    .venv/bin/python bench/fuse_scale.py [--members-dir DIR] [--arrays 8,16,32,64] [--repeats 3]

Writes the members once (examples/vision.py --width 1) into --members-dir
(default /tmp/hfta_fuse_scale), then runs build/tools/hfta-fuse on the
first B of them, --repeats times each (the machines are shared: the median
is reported, with the spread), and prints a Markdown table. Peak memory is
the child's ru_maxrss; "one copy" is the members' bytes on disk.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run(command):
    """Wall seconds and peak resident MB of one run of `command`."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}")
    return seconds, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--members-dir", default="/tmp/hfta_fuse_scale")
    parser.add_argument("--arrays", default="8,16,32,64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fuse", default=os.path.join(ROOT, "build", "tools", "hfta-fuse"))
    args = parser.parse_args()
    arrays = [int(b) for b in args.arrays.split(",")]
    paths = sorted(glob.glob(os.path.join(args.members_dir, "resnet18_*.pt")),
                   key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    if len(paths) < max(arrays):
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "vision.py"), args.members_dir,
                        "--kind", "resnet18", "--members", str(max(arrays)), "--width", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        paths = sorted(glob.glob(os.path.join(args.members_dir, "resnet18_*.pt")),
                       key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    out = os.path.join(args.members_dir, "fused.pt")
    print("| B | members on disk (MB) | wall s (median, min-max) | peak RSS MB (median) | RSS / one copy |")
    print("| --- | --- | --- | --- | --- |")
    for b in arrays:
        members = paths[:b]
        size = sum(os.path.getsize(p) for p in members) / 2**20
        runs = []
        for _ in range(args.repeats):
            runs.append(run([args.fuse, *members, "-o", out]))
            os.remove(out)
        seconds = [r[0] for r in runs]
        rss = statistics.median(r[1] for r in runs)
        print(f"| {b} | {size:.0f} | {statistics.median(seconds):.1f} ({min(seconds):.1f}-{max(seconds):.1f}) "
              f"| {rss:.0f} | {rss / size:.2f} |", flush=True)


if __name__ == "__main__":
    main()
