"""Training throughput of B members, every way a user could train them,
measured side by side (issue 6's harness).

For each model and array size B it measures samples per second summed over
the B members, after warm-up (--warmup steps, then more until a step maps
almost no new memory: support/allocator.h), for:
  serial      the B members as LibTorch modules stepped one after another
  concurrent  B processes, each training one member, started together
  hfta        the fused module from hfta-fuse with the fused SGD
  vmap        torch.func ensembling in Python (batch norm without running stats)
  eager       the B members as PyTorch modules in Python, one after another
  dense       one member at batch B x N (the ceiling fusion approaches)
The ways run in alternating rounds (every way once per round, the order
kept), so that machine noise hits them alike; the median round counts.
Forms: which form the autotuner (runtime/ops/autotune.h) chose for each fused
convolution and linear shape of each model, measured afresh in OUT/hfta-cache (or
kept in $HFTA_CACHE_DIR when set), in OUT/forms.csv and results.md; and which
plan each segment of the fused graph took (runtime/ops/segment_plan.h: its
fused ops or the members' own, raced on the first call of the first round),
with every trial's forward + backward time, in OUT/forms.csv and results.md.
Memory: the peak of tensor memory while training (bench/peak_memory.h: ATen's
CPU allocator counted, or CUDA's max_memory_allocated) of the fused array
against B times one member's (run as hfta runs, with the simple executor; and
under the profiling executor), each in a process of its own.
Writes OUT/results.csv, OUT/memory.csv, OUT/forms.csv, OUT/results.md and OUT/throughput.png
(throughput relative to serial, against B, one panel per model).

.venv/bin/python bench/throughput.py --quick                 # a sanity run, < 5 minutes on 2 cores
.venv/bin/python bench/throughput.py --out bench/results/cpu # every model and B
.venv/bin/python bench/throughput.py --device cuda --amp     # on a GPU machine (bfloat16 autocast)
.venv/bin/python bench/throughput.py --amp --models lenet,resnet18,mobilenet_v2   # CPU, bfloat16
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import text  # noqa: E402  (the Transformers' sequence lengths and vocabularies)

MODES = ["serial", "concurrent", "hfta", "vmap", "eager", "dense"]

# model: (one member's input shape, batch N per member, array sizes, timed steps per round)
MODELS = {
    "mlp": ("16", 32, [1, 2, 4, 8, 16], 40),
    "lenet": ("1,16,16", 32, [1, 2, 4, 8, 16], 10),
    "pointnet_cls": ("3,64", 32, [1, 2, 4, 8, 16], 4),
    "dcgan_d": ("3,64,64", 8, [1, 2, 4, 8], 1),
    "mobilenet_v2": ("3,32,32", 8, [1, 2, 4, 8], 1),
    "resnet18": ("3,32,32", 8, [1, 2, 4, 8], 1),
    # The Transformers of examples/text.py: token ids [N, L] (the shape is L).
    "lm_small": (str(text.SEQUENCE_LENGTHS["lm_small"]), 20, [1, 2, 4, 8, 16], 2),
    "bert_small": (str(text.SEQUENCE_LENGTHS["bert_small"]), 8, [1, 2, 4, 8, 16], 2),
    "lm": (str(text.SEQUENCE_LENGTHS["lm"]), 20, [1, 2, 4, 8], 3),
    # The LSTM language model of the same example (vmap cannot batch nn.LSTM:
    # the harness reports it as failing there).
    "lstm_lm_small": (str(text.SEQUENCE_LENGTHS["lstm_lm_small"]), 20, [1, 2, 4, 8, 16], 2),
    "bert": (str(text.SEQUENCE_LENGTHS["bert"]), 8, [1, 2], 2),
    # torchvision's (examples/torchvision_zoo.py), at 64x64
    "resnet50": ("3,64,64", 8, [1, 2, 4, 8], 1),
    "efficientnet_b0": ("3,64,64", 8, [1, 2, 4, 8], 1),
    "convnext_tiny": ("3,64,64", 8, [1, 2, 4, 8], 1),
    "vit_b_32": ("3,64,64", 8, [1, 2, 4, 8], 1),
}
TORCHVISION = {"resnet50", "efficientnet_b0", "convnext_tiny", "vit_b_32"}
# The text models' inputs are token ids below their vocabulary's size.
TOKENS = {m: text.VOCABULARIES[m] for m in ("lm_small", "bert_small", "lm", "bert", "lstm_lm_small")}
QUICK = {"models": ["mlp", "lenet", "pointnet_cls"], "arrays": [1, 8], "rounds": 2}


# Every way runs with malloc keeping large blocks for reuse (what
# hfta::keepLargeAllocations sets in train_modes; support/allocator.h says why).
ENV = dict(os.environ, MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_="1099511627776")


def reexec_with_harness_malloc():
    """Restarts this Python script under ENV's malloc settings, unless it
    already runs with them (for the scripts that time steps in-process)."""
    if os.environ.get("MALLOC_MMAP_MAX_") != ENV["MALLOC_MMAP_MAX_"]:
        os.execve(sys.executable, [sys.executable, *sys.argv], ENV)


def keep_large_allocations(build):
    """What hfta-train and train_modes do first thing, done in a Python way's
    process as a user's own loop does it: `import hfta` (the build's) and
    hfta.keep_large_allocations(), which keeps large CPU blocks whole for
    reuse (support/cpu_block_cache.h)."""
    sys.path.insert(0, os.path.join(build, "python"))
    import hfta
    hfta.keep_large_allocations()


def run_json(command):
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, env=ENV).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(args, model, array_size, workdir):
    """{mode: [samples per second, one per round]} for one model and B."""
    shape, batch, _, steps = MODELS[model]
    batch = args.batch or batch
    steps = max(1, int(steps * args.steps_scale))
    python = sys.executable
    script = {"mlp": "mlp.py", "lenet": "cnn.py"}.get(
        model, "text.py" if model in TOKENS else "torchvision_zoo.py" if model in TORCHVISION else "vision.py")
    subprocess.run([python, os.path.join(ROOT, "examples", script), workdir, "--kind", model, "--members",
                    str(array_size)], check=True, stdout=subprocess.DEVNULL)
    members = [os.path.join(workdir, f"{model}_{b}.pt") for b in range(array_size)]
    fused = []
    if array_size > 1:  # (hfta-fuse wants two or more; train_modes fuses one member itself)
        fused_path = os.path.join(workdir, "fused.pt")
        subprocess.run([os.path.join(args.build, "tools", "hfta-fuse"), *members, "-o", fused_path], check=True,
                       stdout=subprocess.DEVNULL)
        fused = ["--fused", fused_path]
    def settings(steps, warmup, min_seconds=args.min_seconds, settle=True):
        timed = ["--batch", str(batch), "--input-shape", shape, "--rounds", "1", "--steps", str(steps),
                 "--min-seconds", str(min_seconds), "--warmup", str(warmup), "--device", args.device]
        timed += ["--settle"] if settle else []
        timed += ["--amp", args.amp] if args.amp else []
        return timed + (["--tokens", str(TOKENS[model])] if model in TOKENS else [])

    common = settings(steps, args.warmup)
    train_modes = os.path.join(args.build, "bench", "train_modes")
    modes = [m for m in MODES if m in args.modes]
    rates = {m: [] for m in modes}
    unsupported = set()
    for _ in range(args.rounds):
        # Each LibTorch way in a process of its own: after serial's steps in
        # the same process, ResNet-18's fused array (B = 8) trained at 22-46
        # samples/s against 62-66 alone (the heap and caches the other way
        # left behind), as dense's one big batch did before.
        for m in ("serial", "hfta", "dense"):
            if m in modes:
                result = run_json([train_modes, *members, "--modes", m, *fused, *common, "--threads",
                                   str(args.threads)])
                rates[m] += result[m]["samples_per_s"]
        if "concurrent" in modes:
            # B processes, each with its share of the cores, one member each.
            share = str(max(1, args.threads // array_size))
            procs = [subprocess.Popen([train_modes, member, "--modes", "single", *common, "--threads", share],
                                      stdout=subprocess.PIPE, text=True, env=ENV) for member in members]
            results = []
            for p in procs:
                out, _ = p.communicate()
                if p.returncode != 0:
                    raise RuntimeError(f"a concurrent process failed ({p.returncode})")
                results.append(json.loads(out.strip().splitlines()[-1])["single"])
            # All samples over the span from the first start to the last end.
            span = max(r["end"][0] for r in results) - min(r["start"][0] for r in results)
            rates["concurrent"].append(sum(r["samples"][0] for r in results) / span)
        python_modes = [m for m in ("vmap", "eager") if m in modes and m not in unsupported]
        if python_modes:
            command = [python, os.path.join(HERE, "python_modes.py"), "--kind", model, "--members", str(array_size),
                       *common, "--threads", str(args.threads), "--build", args.build]
            try:
                result = run_json(command + ["--modes", ",".join(python_modes)])
            except subprocess.CalledProcessError:
                # A way PyTorch cannot run here (vmap's conv1d under CPU
                # autocast): each alone, and the one that fails is left out.
                result = {}
                for m in python_modes:
                    try:
                        result.update(run_json(command + ["--modes", m]))
                    except subprocess.CalledProcessError:
                        unsupported.add(m)
                        print(f"{model} B={array_size}: {m} fails here (its error above); left out", flush=True)
            for m in python_modes:
                if m in result:
                    rates[m] += result[m]["samples_per_s"]
    rates = {m: v for m, v in rates.items() if v}
    memory = None
    if args.memory and "hfta" in modes:
        # One step after one warm-up (the peak is a step's), each way alone
        # in its process. The member runs as hfta does (the simple executor),
        # so the ratio is fusion's; under TorchScript's profiling executor,
        # its default, a member may save fewer values for backward
        # (member_profiling_bytes).
        peak = {}
        for key, files, way, executor in (("hfta", members + fused, "hfta", "default"),
                                          ("member", members[:1], "single", "simple"),
                                          ("member_profiling", members[:1], "single", "profiling")):
            result = run_json([train_modes, *files, "--modes", way, *settings(1, 1, 0, settle=False), "--threads", str(args.threads),
                               "--executor", executor, "--memory"])
            peak[key] = result["memory"]["peak_bytes"]
        memory = {"hfta_bytes": peak["hfta"], "member_bytes": peak["member"],
                  "member_profiling_bytes": peak["member_profiling"],
                  "ratio": peak["hfta"] / (array_size * peak["member"])}
    return rates, memory


def cache_entries():
    """The entries of the autotuner's cache file (forms.json in HFTA_CACHE_DIR): op forms and segment plans."""
    path = os.path.join(ENV["HFTA_CACHE_DIR"], "forms.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def cached_forms():
    """{key: chosen form name} of the autotuner's cache (runtime/ops/autotune.h)."""
    forms = {}
    for key, entry in cache_entries().items():
        names = next((part[len("forms "):].split(",") for part in key.split("|") if part.startswith("forms ")), None)
        if names and isinstance(entry, dict) and entry.get("form", -1) < len(names):
            forms[key] = names[entry["form"]]
    return forms


def cached_plans():
    """{key: (plans, [(trial plans, median seconds)])} of the segment plans decided so far
    (runtime/ops/segment_plan.h)."""
    return {key: (entry["plans"], [(t["plans"], t["median_seconds"]) for t in entry.get("trials", [])])
            for key, entry in cache_entries().items() if key.startswith("segment_plan ") and isinstance(entry, dict)}


def plans_lines(plans):
    """The lines of the table of segment plans in results.md: the plan each segment of the fused graph took
    (F its fused ops, M the members' own ops) and every trial's median forward + backward time."""
    return ["", "Segment plans the fused arrays took (runtime/ops/segment_plan.h: per segment, F its fused ops, "
            "M the members' own ops; raced on a copy at the first call; forms.csv has each):", "",
            "| model | B | plans | trials (median forward + backward, ms; in pairs: the best so far against its "
            "challenger) |", "| --- | --- | --- | --- |"] + [
        f"| {model} | {b} | {chosen} | " + "".join(
            ("" if i == 0 else " against " if i % 2 else "; ") + f"{p} {t * 1e3:.1f}" for i, (p, t) in enumerate(trials))
        + " |" for (model, b), decided in plans.items() for chosen, trials in decided.values()]


def rounds_verdict(hfta, other):
    """Whether every round of hfta is faster than every round of the other way ("ahead"), every one slower
    ("behind"), or neither: then the medians' ratio is within the machine's noise ("level")."""
    if min(hfta) > max(other):
        return "ahead"
    return "behind" if max(hfta) < min(other) else "level"


def against_lines(rows):
    """The lines of the table of hfta against the best other way and the dense bound, per model and B."""
    others = ["serial", "concurrent", "eager", "vmap"]
    lines = ["", "hfta against the best other way of training the B members, and against the dense bound (one "
             "member at B times the batch); rounds: ahead where every round of hfta beat every round of the best "
             "other way, behind where every one lost, level where they overlap; round by round: each round of hfta "
             "over the best other way's round of the same alternation (minutes apart, so that slow drifts of the "
             "machine cancel):", "",
             "| model | B | hfta / best other (which) | rounds | round by round | hfta / dense |",
             "| --- | --- | --- | --- | --- | --- |"]
    for model, b in sorted({(r["model"], r["B"]) for r in rows}, key=lambda k: (list(MODELS).index(k[0]), k[1])):
        cells = {r["mode"]: r for r in rows if r["model"] == model and r["B"] == b}
        if "hfta" not in cells:
            continue
        hfta = cells["hfta"]
        best = max((m for m in others if m in cells), key=lambda m: cells[m]["rate"], default=None)
        vs_best = f"{hfta['rate'] / cells[best]['rate']:.2f}x ({best})" if best else "-"
        verdict = rounds_verdict(hfta["rounds"], cells[best]["rounds"]) if best else "-"
        paired = ", ".join(f"{h / o:.2f}" for h, o in zip(hfta["rounds"], cells[best]["rounds"])) if best else "-"
        vs_dense = f"{hfta['rate'] / cells['dense']['rate']:.2f}x" if "dense" in cells else "-"
        lines.append(f"| {model} | {b} | {vs_best} | {verdict} | {paired} | {vs_dense} |")
    return lines


def forms_lines(args, chosen, plans):
    """forms.csv (each op shape's form, and each fused graph's segment plans with every trial's median
    seconds), and the lines of its table in results.md: per model, how many shapes of each op took each form."""
    columns = [("conv", "grouped"), ("conv", "per-member"), ("conv", "channels-last"), ("conv", "unfolded"),
               ("linear", "batched"), ("linear", "per-member"), ("linear+log-softmax", "batched"),
               ("linear+log-softmax", "per-member"), ("recurrent", "stepped"), ("recurrent", "per-member")]
    prefixes = {"conv": ("hfta::conv|",), "linear": ("hfta::linear|",),
                "linear+log-softmax": ("hfta::linear_log_softmax|",),
                "recurrent": ("hfta::lstm|", "hfta::gru|", "hfta::rnn_tanh|", "hfta::rnn_relu|")}
    with open(os.path.join(args.out, "forms.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "key", "form"])
        for model, forms in chosen.items():
            for key, form in sorted(forms.items()):
                writer.writerow([model, key, form])
        for (model, _), decided in plans.items():
            for key, (chosen_plans, trials) in sorted(decided.items()):
                writer.writerow([model, key, f"plans {chosen_plans}; trials " +
                                 " ".join(f"{p}:{t:.6f}" for p, t in trials)])

    def count(forms, op, name):
        return sum(1 for key, form in forms.items() if key.startswith(prefixes[op]) and form == name)

    return ["", "Forms the autotuner chose (shapes of each model's convolutions, linears (alone, and with the "
            "log-softmax that alone reads them) and recurrent layers, "
            "every B and way measured; forms.csv has each shape):", "",
            "| model | " + " | ".join(f"{op} {name}" for op, name in columns) + " |",
            "|" + " --- |" * (1 + len(columns))] + [
        f"| {model} | " + " | ".join(str(count(forms, op, name)) for op, name in columns) + " |"
        for model, forms in chosen.items() if forms]


def processor(device):
    """The GPU's or the processor's model name, as hfta's caches name it."""
    import torch
    if device.startswith("cuda"):
        return torch.cuda.get_device_name()
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown processor")


def memory_lines(args, memories):
    """memory.csv, and the lines of its table in results.md."""
    with open(os.path.join(args.out, "memory.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "B", "hfta_bytes", "member_bytes", "hfta_vs_B_members", "member_profiling_bytes"])
        for m in memories:
            writer.writerow([m["model"], m["B"], m["hfta_bytes"], m["member_bytes"], f"{m['ratio']:.3f}",
                             m["member_profiling_bytes"]])
    mib = 2.0 ** 20
    return ["", "Peak tensor memory while training (one step after one warm-up, each in its own process): the fused "
            "array against B times one member alone, both run with the simple executor (as hfta-train runs); the "
            "last column is the member under TorchScript's profiling executor.", "",
            "| model | B | hfta MiB | one member MiB | hfta / (B x member) | member, profiling executor, MiB |",
            "| --- | --- | --- | --- | --- | --- |"] + [
        f"| {m['model']} | {m['B']} | {m['hfta_bytes'] / mib:.1f} | {m['member_bytes'] / mib:.2f} | {m['ratio']:.3f} "
        f"| {m['member_profiling_bytes'] / mib:.2f} |" for m in memories]


def write_outputs(args, rows, memories, chosen, plans, environment):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "B", "batch", "mode", "samples_per_s", "vs_serial", "rounds"])
        for r in rows:
            writer.writerow([r["model"], r["B"], r["batch"], r["mode"], f"{r['rate']:.1f}", f"{r['ratio']:.3f}",
                             " ".join(f"{x:.1f}" for x in r["rounds"])])
    modes = [m for m in MODES if m in args.modes]
    lines = [f"Samples per second summed over the B members (median of {args.rounds} alternating rounds); "
             f"in brackets, the ratio to serial. {environment}", "",
             "| model | B | batch | " + " | ".join(modes) + " |", "|" + " --- |" * (3 + len(modes))]
    keys = sorted({(r["model"], r["B"]) for r in rows}, key=lambda k: (list(MODELS).index(k[0]), k[1]))
    for model, b in keys:
        cells = {r["mode"]: r for r in rows if r["model"] == model and r["B"] == b}
        lines.append(f"| {model} | {b} | {next(iter(cells.values()))['batch']} | " +
                     " | ".join(f"{cells[m]['rate']:.0f} ({cells[m]['ratio']:.2f}x)" if m in cells else "fails"
                                for m in modes) + " |")
    if "hfta" in modes:
        lines += against_lines(rows)
    if memories:
        lines += memory_lines(args, memories)
    if any(chosen.values()) or any(plans.values()):
        lines += forms_lines(args, chosen, plans)
    if any(plans.values()):
        lines += plans_lines(plans)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(args, rows, modes)


def plot(args, rows, modes):
    try:
        import matplotlib
    except ImportError:
        print("plot: skipped (no matplotlib in this Python)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = [m for m in MODELS if any(r["model"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 3.6), squeeze=False)
    for ax, model in zip(axes[0], models):
        for mode in modes:
            points = sorted((r["B"], r["ratio"]) for r in rows if r["model"] == model and r["mode"] == mode)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=mode)
        ax.set_title(f"{model} (batch {args.batch or MODELS[model][1]})")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("B (models trained)")
        ax.set_ylabel("throughput / serial")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "throughput.png"), dpi=110)
    print(f"plot: {os.path.join(args.out, 'throughput.png')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--arrays", help="array sizes B (default: each model's list)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps per way in each process, then more until a step maps almost no new "
                        "memory (support/allocator.h)")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="each way's round steps on until it has run this long (a fast machine's 10 steps "
                        "of LeNet last 50 ms, too short to time well)")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiplies each model's timed steps")
    parser.add_argument("--batch", type=int, help="every model's batch per member (default: each model's own)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", nargs="?", const="bfloat16", choices=["bfloat16", "float16"],
                        help="autocast in every way: bfloat16 (the default), or float16 with loss scaling (a scale "
                             "per member in hfta and eager, one for the array in vmap)")
    parser.add_argument("--no-memory", dest="memory", action="store_false",
                        help="leave out the memory columns (two more processes per model and B)")
    parser.add_argument("--quick", action="store_true", help="the small models at B = 1 and 8, 2 rounds")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "latest"))
    args = parser.parse_args()
    models = args.models.split(",")
    if args.quick:
        models, args.rounds = QUICK["models"], QUICK["rounds"]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]}: use {', '.join(MODELS)}")
    args.modes = args.modes.split(",")
    import torch
    environment = (f"Device {args.device} ({processor(args.device)}){f', {args.amp} autocast' if args.amp else ''}, "
                   f"{args.threads} threads, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}.")
    rows, memories, chosen, plans = [], [], {}, {}
    if "HFTA_CACHE_DIR" not in os.environ:  # this run's own choices, measured afresh
        ENV["HFTA_CACHE_DIR"] = os.path.join(os.path.abspath(args.out), "hfta-cache")
        shutil.rmtree(ENV["HFTA_CACHE_DIR"], ignore_errors=True)
    started = time.time()
    for model in models:
        arrays = QUICK["arrays"] if args.quick else MODELS[model][2]
        if args.arrays:
            arrays = [int(b) for b in args.arrays.split(",")]
        known = cached_forms()
        for b in arrays:
            known_plans = cached_plans()
            with tempfile.TemporaryDirectory() as workdir:
                rates, memory = measure(args, model, b, workdir)
            plans[(model, b)] = {k: v for k, v in cached_plans().items() if k not in known_plans}
            if memory:
                memories.append({"model": model, "B": b, **memory})
            serial = statistics.median(rates["serial"]) if "serial" in rates else float("nan")
            for mode, values in rates.items():
                rate = statistics.median(values)
                rows.append({"model": model, "B": b, "batch": args.batch or MODELS[model][1], "mode": mode, "rate": rate,
                             "ratio": rate / serial, "rounds": values})
            print(f"[{time.time() - started:6.0f} s] {model} B={b}: " +
                  ", ".join(f"{m} {statistics.median(v):.0f}/s" for m, v in rates.items()), flush=True)
        chosen[model] = {k: v for k, v in cached_forms().items() if k not in known}
    write_outputs(args, rows, memories, chosen, plans, environment)


if __name__ == "__main__":
    main()
