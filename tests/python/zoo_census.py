"""A census of torchvision's classification zoo through hfta-fuse: models no
one here wrote, fused as they come.

Every model of torchvision.models.list_models(module=torchvision.models)
(the classification models) is built with num_classes=10 and no weights,
in float64, as B = 2 members of different seeds, scripted by PyTorch, fused
by hfta-fuse and compared with each member alone:

  - fallback nodes: what hfta-fuse --report-json lists as run per member;
  - forward in train mode, gradients of a loss that weighs every output,
    batch-norm running statistics (every buffer) after that step, and
    forward in eval mode: per tensor, max |fused - alone| / (1 + max
    |alone|), the worst over both members, against TOLERANCE;
  - hfta-split --index 0 of the fused module: its state_dict and its
    forward (train and eval mode) against member 0's.

Where a difference exceeds TOLERANCE, the member's own sensitivity is
measured too: the same member run on its input changed by one rounding
step (1e-16 relative). A model whose fused difference stays within
SENSITIVITY_FACTOR times that is ill-conditioned, not wrong; the table says
so.

Random ops are switched off, since the fused module draws each member's own
numbers and none can equal a member run alone: every nn.Dropout and
torchvision.ops.StochasticDepth gets p = 0 before scripting (the graph is
the same; p is an operand). The table says which models had them on.

Inputs: [4, 3, S, S] per member. A batch of 4, not 2: several models pool
to 1x1 maps, where batch norm over 2 values is chaotic (DenseNet-169's
gradients move by 6.6 when its input moves by 1e-16; by 3e-11 with 4). S is
the smallest side the model takes in training mode (SMALLEST_INPUT; found
by --find-sizes), but at least 32, CIFAR-10's size: EfficientNet, MobileNet
and ResNet take 1x1 images, where every 3x3 kernel sees only its centre.
ViT is built for 2x2 patches (image_size = twice its patch size), MaxViT
for its smallest input_size.

hfta's runtime picks its forms by a fixed rule here (HFTA_AUTOTUNE=0 unless
set): timing every convolution shape's forms on first use takes minutes on
DenseNet, and the forms are compared with one another elsewhere. PyTorch
runs on one thread (--threads): at these sizes the per-op overhead
dominates, and on a machine shared with other work threads that wait on
one another cost more than they give (regnet_x_400mf: 14 s on one thread,
71 s on two, with two compilers running beside it).

Models above --max-params million parameters are scripted but not run: a
member, the fused module and their gradients in float64 peak at about 35
bytes per parameter (10.5 GB for vit_l_16's 303M, measured), so the two
above 600M would need 22 GB of a 23 GB machine. The table names them; their
families' smaller members run the same ops.

  python tests/python/zoo_census.py --fuse build/tools/hfta-fuse \\
      --split build/tools/hfta-split --runtime build/runtime/libhfta_runtime.so \\
      [--models resnet18,swin_t] [--strict] [--json census.json]

--export writes the members with hfta.export (torch.export, both modes,
.pt2) instead of scripting them, and compares with each member run eagerly.

--strict exits 1 unless every model run fuses with 0 fallback nodes and
matches within TOLERANCE (what the ctest tests of single models assert).
The Markdown table goes to stdout, progress to stderr.
"""
import argparse
import collections
import gc
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore", message=r".*TorchScript.*")
warnings.filterwarnings("ignore", message=r".*torch\.jit.*")
warnings.filterwarnings("ignore", message=r".*Scripted (Inception3|GoogleNet) always returns.*")
warnings.filterwarnings("ignore", category=FutureWarning)

import torch  # noqa: E402
import torchvision  # noqa: E402
from torchvision import models  # noqa: E402

from make_exported_models import hfta_export  # noqa: E402  (hfta.export, without the built package)

MEMBERS = 2
BATCH = 4
MIN_SIDE = 32
# float64 sums of the same terms in another order (one grouped convolution
# or batched GEMM for both members) differ by ~1e-16 relative per op; tens
# of layers and batch norm over a few values grow that to ~1e-11 in this
# census. 1e-9 leaves room and still catches a real difference (a wrong
# slice, a missed update), which shows at 1e-3 or more.
TOLERANCE = 1e-9
# An ill-conditioned model's differences are its own rounding, amplified:
# within this factor of what one rounding step of its input does to it.
SENSITIVITY_FACTOR = 100
DEFAULT_MAX_PARAMS = 320  # millions: vit_l_* (305M) fit in 23 GB; the 630M giants do not
CHECKS = ("forward train", "forward eval", "gradients", "statistics")

# The smallest square side each model takes in training mode with a batch
# of 4 (--find-sizes prints them again); models not listed take 1x1.
SMALLEST_INPUT = {
    "alexnet": 63,
    "convnext": 32,
    "densenet": 29,
    "googlenet": 15,
    "inception_v3": 299,  # its auxiliary classifier, which runs in training mode
    "maxvit_t": 221,  # built for it: every block's grid a multiple of the 7x7 partitions
    "squeezenet1_0": 21,
    "squeezenet1_1": 17,
    "swin": 4,
    "vgg": 32,
}


def smallest_side(name):
    for prefix in sorted(SMALLEST_INPUT, key=len, reverse=True):
        if name.startswith(prefix):
            return SMALLEST_INPUT[prefix]
    return 1


def input_side(name):
    if name.startswith("vit_"):
        return 2 * int(name.split("_")[-1])  # vit_b_16: patches of 16
    return max(MIN_SIDE, smallest_side(name))


def constructor_kwargs(name, side=None):
    side = side or input_side(name)
    kwargs = {"weights": None, "num_classes": 10}
    if name.startswith("vit_"):
        kwargs["image_size"] = side
    if name.startswith("maxvit_"):
        kwargs["input_size"] = (side, side)
    return kwargs


def switch_random_off(model):
    """p = 0 in every dropout and stochastic depth; returns the kinds that were on."""
    found = set()
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            kind = "dropout"
        elif isinstance(module, torchvision.ops.StochasticDepth):
            kind = "stochastic depth"
        else:
            continue
        if module.p > 0:
            found.add(kind)
        module.p = 0.0
    return sorted(found)


def build(name, seed):
    torch.manual_seed(seed)
    model = models.get_model(name, **constructor_kwargs(name))
    random_ops = switch_random_off(model)
    return model.double(), random_ops


# Exported members (.pt2) are compared with the model they were exported
# from, run eagerly: path -> (name, seed) to build it again.
EAGER_MEMBERS = {}


def load_member(path):
    """Member alone: the scripted module, or the eager model of an exported one."""
    if path in EAGER_MEMBERS:
        return build(*EAGER_MEMBERS[path])[0]
    return torch.jit.load(path)


def flatten(out):
    """A model's outputs as a flat list (None where an optional output is None)."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    return [out]


def error(got, want):
    """max |got - want| / (1 + max |want|): relative to the tensor's largest
    magnitude, since an element that is a sum of large terms cancelling (a
    weight gradient) carries their rounding."""
    if got is None or want is None:
        return 0.0 if got is None and want is None else math.inf
    if got.shape != want.shape:
        return math.inf
    if not want.is_floating_point():
        return math.inf if (got != want).any() else 0.0
    if not want.numel():
        return 0.0
    return ((got - want).abs().max() / (1 + want.abs().max())).item()


def worst(got, want):
    if len(got) != len(want):
        return math.inf
    return max((error(g, w) for g, w in zip(got, want)), default=0.0)


def member_slice(outputs, b):
    return [None if o is None else o[b] for o in outputs]


def loss_weights(outputs, seed):
    gen = torch.Generator().manual_seed(seed)
    return [None if o is None else torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outputs]


def weighted_sum(outputs, weights):
    return sum((o * w).sum() for o, w in zip(outputs, weights) if o is not None)


class Row:
    def __init__(self, name):
        self.name = name
        self.params = 0
        self.side = input_side(name)
        self.scripts = None  # None: not tried
        self.random_ops = []
        self.fuse_error = None
        self.fallbacks = None
        self.fallback_kinds = {}
        self.fallback_reasons = {}
        self.errors = {}
        self.sensitivity = {}
        self.split_error = None
        self.note = ""
        self.seconds = 0.0

    def within_tolerance(self):
        return len(self.errors) == len(CHECKS) and all(e <= TOLERANCE for e in self.errors.values())

    def within_sensitivity(self):
        return bool(self.sensitivity) and all(
            e <= max(TOLERANCE, SENSITIVITY_FACTOR * self.sensitivity.get(k, 0.0)) for k, e in self.errors.items())

    def split_ok(self):
        return self.split_error is not None and self.split_error <= TOLERANCE

    def verdict(self):
        if self.note:
            return self.note
        if self.fuse_error:
            return self.fuse_error
        if not self.split_ok():
            return "MISMATCH (hfta-split)"
        fallbacks = "" if self.fallbacks == 0 else f", {self.fallbacks} nodes run per member"
        if self.within_tolerance():
            return "OK" + fallbacks
        if self.within_sensitivity():
            worst_sensitivity = max(self.sensitivity.values())
            return f"OK{fallbacks}; ill-conditioned (1e-16 on its input moves it by {worst_sensitivity:.0e})"
        return "MISMATCH"

    def passed(self):
        return self.verdict() == "OK"

    def as_dict(self):
        return dict(vars(self), verdict=self.verdict())


def run_fuse(args, paths, fused_path, report_path):
    proc = subprocess.run([args.fuse, *paths, "-o", fused_path, "--report-json", report_path], capture_output=True,
                          text=True)
    if proc.returncode == 0:
        return None
    message = " ".join(line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip())
    kind = "REFUSED" if proc.returncode == 2 else "CRASH"  # 2: a user error; 1: internal error; else a signal
    return f"{kind} (exit {proc.returncode}): {message}"


def train_step(module, x, weights):
    """Forward in train mode and backward of the weighted sum: outputs,
    gradients (zeros where unused) and buffers after the step."""
    module.train()
    out = flatten(module(x))
    weighted_sum(out, weights).backward()
    grads = {n: p.grad if p.grad is not None else torch.zeros_like(p) for n, p in module.named_parameters()}
    return out, grads, dict(module.named_buffers())


def compare(row, fused_path, paths, x):
    """Runs the fused module, keeps its outputs, gradients and buffers and
    drops it, then runs one member at a time: at most the fused gradients
    and one member with its gradients are held at once (4 copies of a
    member's parameters, not 6)."""
    fused = torch.jit.load(fused_path)
    fused.train()
    out = flatten(fused(x))
    weights = [loss_weights(member_slice(out, b), 100 + b) for b in range(MEMBERS)]
    sum(weighted_sum(member_slice(out, b), weights[b]) for b in range(MEMBERS)).backward()
    out = [None if o is None else o.detach() for o in out]
    fused_grads = {n: p.grad for n, p in fused.named_parameters()}
    fused_buffers = {n: t.clone() for n, t in fused.named_buffers()}
    fused.eval()
    with torch.no_grad():
        out_eval = flatten(fused(x))
    del fused
    gc.collect()
    errors = dict.fromkeys(CHECKS, 0.0)
    for b, path in enumerate(paths):
        member = load_member(path)
        alone, grads, buffers = train_step(member, x[b], weights[b])
        errors["forward train"] = max(errors["forward train"], worst(member_slice(out, b), alone))
        for name, want in grads.items():
            got = fused_grads[name]
            errors["gradients"] = max(errors["gradients"], error(None if got is None else got[b], want))
        for name, want in buffers.items():
            errors["statistics"] = max(errors["statistics"], error(fused_buffers[name][b], want))
        member.eval()
        with torch.no_grad():
            errors["forward eval"] = max(errors["forward eval"], worst(member_slice(out_eval, b), flatten(member(x[b]))))
        del member, alone, grads, buffers
        gc.collect()
    row.errors = errors
    del fused_grads
    if not row.within_tolerance():
        row.sensitivity = sensitivity(paths[0], x[0], weights[0])


def sensitivity(path, x, weights):
    """How far one rounding step of the input moves member 0 alone."""
    gen = torch.Generator().manual_seed(3)
    nudged = x * (1 + 1e-16 * torch.randn(x.shape, generator=gen, dtype=x.dtype))
    out, grads, buffers = train_step(load_member(path), x, weights)
    out2, grads2, buffers2 = train_step(load_member(path), nudged, weights)
    member = load_member(path).eval()
    with torch.no_grad():
        eval_out, eval_out2 = flatten(member(x)), flatten(member(nudged))
    return {
        "forward train": worst(out2, out),
        "forward eval": worst(eval_out2, eval_out),
        "gradients": max(error(grads2[n], g) for n, g in grads.items()),
        "statistics": max((error(buffers2[n], t) for n, t in buffers.items()), default=0.0),
    }


def compare_split(row, split_path, member_path, x):
    split, member = torch.jit.load(split_path), load_member(member_path)
    split_state, member_state = split.state_dict(), member.state_dict()
    if sorted(split_state) != sorted(member_state):
        row.split_error = math.inf
        return
    errors = [error(split_state[name], t) for name, t in member_state.items()]
    for mode in (True, False):
        split.train(mode)
        member.train(mode)
        with torch.no_grad():
            errors.append(worst(flatten(split(x)), flatten(member(x))))
    row.split_error = max(errors)


def too_large(row, args):
    """Above --max-params: noted, not run."""
    if not args.max_params or row.params <= args.max_params * 1e6:
        return False
    row.note = f"not run: {row.params / 1e6:.0f}M parameters > --max-params {args.max_params:g}M"
    return True


def census_model(args, name, tmp):
    row = Row(name)
    start = time.time()
    try:
        model, row.random_ops = build(name, 0)
        row.params = sum(p.numel() for p in model.parameters())
        if args.export:
            if too_large(row, args):  # before exporting: four exports of a giant exhaust the memory
                return row
            paths = [os.path.join(tmp, f"{name}_{b}.pt2") for b in range(MEMBERS)]
            example = torch.randn(BATCH, 3, row.side, row.side, dtype=torch.float64)
            try:
                for b, path in enumerate(paths):
                    hfta_export.export(build(name, b)[0] if b else model, (example,), path)
                    EAGER_MEMBERS[path] = (name, b)
                row.scripts = True
            except Exception as e:  # PyTorch's own limits: the census names them
                row.scripts = False
                row.note = f"does not export: {str(e).strip().splitlines()[0]}"
                return row
            del model
        else:
            try:
                scripted = torch.jit.script(model)
                row.scripts = True
            except Exception as e:  # PyTorch's own limits: the census names them
                row.scripts = False
                row.note = f"does not script: {str(e).strip().splitlines()[0]}"
                return row
            if too_large(row, args):
                return row
            paths = [os.path.join(tmp, f"{name}_{b}.pt") for b in range(MEMBERS)]
            scripted.save(paths[0])
            for b in range(1, MEMBERS):
                # The same code with another seed's weights.
                scripted.load_state_dict(build(name, b)[0].state_dict())
                scripted.save(paths[b])
            del model, scripted
        fused_path = os.path.join(tmp, f"{name}_fused.pt")
        report_path = os.path.join(tmp, f"{name}_report.json")
        row.fuse_error = run_fuse(args, paths, fused_path, report_path)
        if row.fuse_error:
            return row
        with open(report_path) as f:
            fallbacks = json.load(f)["fallbacks"]
        row.fallbacks = len(fallbacks)
        row.fallback_kinds = dict(collections.Counter(e["node"] for e in fallbacks))
        row.fallback_reasons = dict(collections.Counter(e["reason"] for e in fallbacks))
        gen = torch.Generator().manual_seed(7)
        x = torch.randn(MEMBERS, BATCH, 3, row.side, row.side, generator=gen, dtype=torch.float64)
        compare(row, fused_path, paths, x)
        split_path = os.path.join(tmp, f"{name}_split0.pt")
        proc = subprocess.run([args.split, fused_path, "--index", "0", "-o", split_path], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            row.split_error = math.inf
            row.note = f"hfta-split failed (exit {proc.returncode}): {' '.join(proc.stderr.split())}"
        else:
            compare_split(row, split_path, paths[0], x[0])
        return row
    finally:
        row.seconds = time.time() - start
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        gc.collect()


def fmt_error(e):
    if e is None:
        return "-"
    if math.isinf(e):
        return "differs"
    return "0" if e == 0 else f"{e:.0e}"


def short_verdict(row):
    """The verdict without the tool's prefix, the source location and advice."""
    verdict = re.sub(r"hfta-fuse: (error|internal error \(please report it\)): ", "", row.verdict())
    verdict = re.sub(r" at \S+:\d+: `[^`]*`", "", verdict)
    return verdict.split(". ")[0].replace("|", "/")


def markdown(rows, made_by="scripts"):
    lines = [
        f"| model | params | input | {made_by}? | random ops (p = 0) | fallback nodes | fallback kinds | "
        "forward train | forward eval | gradients | stats | split 0 | s | verdict |",
        "| --- | ---: | --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(r.fallback_kinds.items())) or "-"
        scripts = {None: "-", True: "yes", False: "**no**"}[r.scripts]
        errors = " | ".join(fmt_error(r.errors.get(k)) for k in CHECKS)
        lines.append(f"| {r.name} | {r.params / 1e6:.1f}M | {BATCH}x3x{r.side}x{r.side} | {scripts} | "
                     f"{', '.join(r.random_ops) or '-'} | {'-' if r.fallbacks is None else r.fallbacks} | {kinds} | "
                     f"{errors} | {fmt_error(r.split_error)} | {r.seconds:.0f} | {short_verdict(r)} |")
    return "\n".join(lines)


def accepts(name, side):
    """Whether the model (built for `side` where it is built for one) runs on it in training mode."""
    try:
        model = models.get_model(name, **constructor_kwargs(name, side)).train()
        with torch.no_grad():
            model(torch.randn(BATCH, 3, side, side))
        return True
    except Exception:
        return False


def find_sizes(names):
    for name in names:
        if name.startswith("vit_"):
            print(f"{name}: built for its input (image_size)")
            continue
        side = next((s for s in range(1, 400) if accepts(name, s)), None)
        print(f"{name}: {side}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fuse")
    parser.add_argument("--split")
    parser.add_argument("--runtime")
    parser.add_argument("--models", help="comma-separated names (default: every classification model)")
    parser.add_argument("--max-params", type=float, default=DEFAULT_MAX_PARAMS,
                        help=f"skip models above this many million parameters (default {DEFAULT_MAX_PARAMS}; "
                        "0: no limit)")
    parser.add_argument("--export", action="store_true",
                        help="members exported with hfta.export (.pt2) instead of scripted")
    parser.add_argument("--strict", action="store_true", help="exit 1 unless every model run is OK")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's threads (default 1)")
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--find-sizes", action="store_true",
                        help="print the smallest input side each model takes in training mode, and exit")
    args = parser.parse_args()
    zoo = models.list_models(module=models)
    names = args.models.split(",") if args.models else zoo
    unknown = sorted(set(names) - set(zoo))
    if unknown:
        parser.error(f"not torchvision classification models: {', '.join(unknown)}")
    if args.find_sizes:
        find_sizes(names)
        return
    for flag in ("fuse", "split", "runtime"):
        if not getattr(args, flag):
            parser.error(f"--{flag} is required")
    os.environ.setdefault("HFTA_AUTOTUNE", "0")
    torch.set_num_threads(args.threads)
    torch.ops.load_library(args.runtime)
    rows = []
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            row = census_model(args, name, tmp)
            rows.append(row)
            errors = ", ".join(f"{k} {fmt_error(v)}" for k, v in row.errors.items())
            print(f"zoo_census: {name}: {row.verdict()} ({row.seconds:.0f} s; fallbacks {row.fallbacks}"
                  f"{'; ' + errors if errors else ''}; split {fmt_error(row.split_error)})", file=sys.stderr,
                  flush=True)
    print(markdown(rows, "exports" if args.export else "scripts"))
    print(f"\n{sum(r.passed() for r in rows)} of {len(rows)} models OK (0 fallback nodes, equivalent within "
          f"{TOLERANCE:g}); batch {BATCH} per member, float64, {args.threads} thread(s); torch {torch.__version__}, torchvision "
          f"{torchvision.__version__}; {time.time() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.as_dict() for r in rows], f, indent=1, default=str)
    if args.strict and not all(r.passed() for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
