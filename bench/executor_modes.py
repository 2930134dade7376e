"""The fused array (B = 8) under TorchScript's profiling executor against
the graph run as it is with eager autograd (what hfta-train does): the
table in bench/README.md's "The executor". Each model's members are
written, fused, then trained by train_modes --modes hfta under each
executor, alternating, each run a process of its own; prints samples per
second per run and the ratio of the medians (simple / profiling).

.venv/bin/python bench/executor_modes.py [--build build] [--rounds 5] [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from throughput import ENV, MODELS, ROOT, TOKENS  # noqa: E402

ROWS = ["mlp", "lenet", "lm_small", "dcgan_d", "mobilenet_v2", "resnet18", "pointnet_cls"]
MEMBERS = 8


def rate(args, model, members, fused, executor):
    shape, batch, _, steps = MODELS[model]
    command = [os.path.join(args.build, "bench", "train_modes"), *members, "--modes", "hfta", "--fused", fused,
               "--executor", executor, "--batch", str(batch), "--input-shape", shape, "--rounds", "1", "--steps",
               str(steps), "--min-seconds", str(args.min_seconds), "--warmup", "3", "--threads", str(args.threads)]
    command += ["--tokens", str(TOKENS[model])] if model in TOKENS else []
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=ENV).stdout
    return json.loads(out.strip().splitlines()[-1])["hfta"]["samples_per_s"][0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--min-seconds", type=float, default=1.0)
    args = parser.parse_args()
    print(f"B = {MEMBERS}, {args.rounds} alternating processes per executor, {args.threads} threads; samples/s")
    print("| model | batch | profiling | simple | simple / profiling |")
    print("| --- | --- | --- | --- | --- |")
    for model in ROWS:
        with tempfile.TemporaryDirectory() as workdir:
            script = {"mlp": "mlp.py", "lenet": "cnn.py"}.get(model, "text.py" if model in TOKENS else "vision.py")
            subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), workdir, "--kind", model,
                            "--members", str(MEMBERS)], check=True, stdout=subprocess.DEVNULL)
            members = [os.path.join(workdir, f"{model}_{b}.pt") for b in range(MEMBERS)]
            fused = os.path.join(workdir, "fused.pt")
            subprocess.run([os.path.join(args.build, "tools", "hfta-fuse"), *members, "-o", fused], check=True,
                           stdout=subprocess.DEVNULL)
            rates = {"profiling": [], "simple": []}
            for _ in range(args.rounds):
                for executor in rates:
                    rates[executor].append(rate(args, model, members, fused, executor))
        ratio = statistics.median(rates["simple"]) / statistics.median(rates["profiling"])
        cells = [", ".join(f"{r:.0f}" if r >= 1000 else f"{r:.1f}" for r in rates[e]) for e in ("profiling", "simple")]
        print(f"| {model} | {MODELS[model][1]} | {cells[0]} | {cells[1]} | {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
