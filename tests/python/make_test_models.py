"""Test setup: scripts the members from Python and computes PyTorch's own
answers (the oracle) for the C++ and lit tests.

Writes into OUT_DIR:
  <kind>_<b>.pt             members of each model family in examples/mlp.py
  <kind>_reference.pt       per member: inputs, outputs, gradients, and the
                            parameters and buffers after 20 SGD steps (5 for
                            the examples/vision.py networks), each member
                            trained alone with torch.optim.SGD
  <rule kind>_<b>.pt        the rule families of rule_models.py (group and
  <rule kind>_reference.pt  instance norm, upsampling, 3-D conv and pooling,
                            expand_as, stochastic depth), float64
  stochastic_depth_p25_<b>.pt, random_draws_<b>.pt  random ops drawing, for
                            the statistics tests (no reference: each member
                            draws its own numbers)
  mismatch/*.pt             members that must not fuse, one file per defect
  not_a_model.pt            a text file with a .pt name
  optim_reference.pt        Adadelta and the LR schedulers, per member alone
                            (make_optim_references.py)
  lstm_*, gru_*, rnn_*      the recurrent families (make_recurrent_models.py)
  lm_tiny_*, bert_tiny_*,    the Transformer families (make_text_models.py), with
  mha_*, encoder_*, ...     Adadelta + StepLR and AdamW trajectories besides SGD
  <kind>_<b>.pt2            the families of EXPORTED as torch.export archives
                            (make_exported_models.py), the same models
  ensemble_<case>.pt        ensembles of examples/ensemble.py in one module,
  ensemble_<case>_reference.pt  with the input, outputs and every member's
                            gradients of the sum of squared outputs
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import mlp  # noqa: E402
import cnn  # noqa: E402  (registers the CNN families with mlp.MODELS)
import vision  # noqa: E402  (and the published CNNs)
import make_optim_references  # noqa: E402
import make_recurrent_models  # noqa: E402
import rule_models  # noqa: E402  (registers the rule families with mlp.MODELS)
import make_text_models  # noqa: E402
import make_exported_models  # noqa: E402
import ensemble  # noqa: E402

MEMBERS = 3
BATCH = 8
STEPS = 20
# Per member: learning rate, momentum, dampening, weight decay, nesterov.
SGD_SETTINGS = [
    dict(lr=0.05, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False),
    dict(lr=0.02, momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=True),
    dict(lr=0.10, momentum=0.5, dampening=0.1, weight_decay=0.0, nesterov=False),
]
# PointNetLike's third member diverges alone at learning rate 0.1 within 20
# steps; a tenth of every rate keeps each member's trajectory finite and
# well-conditioned (reference() checks both).
GENTLE = {"pointnet"}
GENTLE_SETTINGS = [dict(s, lr=s["lr"] / 10) for s in SGD_SETTINGS]
IN_SHAPES = {"mlp": (4, 4), "wide": (16,), "fallback": (16,), **cnn.INPUT_SHAPES, **vision.INPUT_SHAPES,
             **rule_models.INPUT_SHAPES}
# The published CNNs at small widths (the architecture is what the tests
# check), 5 steps, batch 4; PointNet's dropout off (a mask differs from
# PyTorch's draw), as for the other families. In float64: these deep
# networks, with batch norm over batches of 4, amplify a relative change of
# their weights up to 1e10-fold in 5 steps (PointNet; MobileNet-V2 5e6, see
# sensitivity()), so the rounding of another summation order (a grouped
# convolution sums in another order than B separate ones) grows to ~1e-4
# relative in float32, which would hide a real error of that size.
VISION = {"resnet18": dict(width=0.125), "mobilenet_v2": dict(width=0.125),
          "pointnet_cls": dict(width=0.0625, dropout=0.0), "pointnet_seg": dict(width=0.0625),
          "dcgan_g": dict(width=0.0625), "dcgan_d": dict(width=0.0625)}
# Steps of SGD each network trains for: as many as keep its sensitivity near
# 1e4 or below (in 5 steps PointNet reaches 1e10, MobileNet-V2 5e6), so that
# the tolerance that follows from it stays near 1e-9 (tests/test_support.h).
VISION_STEPS = {"resnet18": 5, "mobilenet_v2": 3, "pointnet_cls": 2, "pointnet_seg": 2, "dcgan_g": 5, "dcgan_d": 5}
VISION_BATCH = 4
# The rule families (rule_models.py), in float64 for the same reason, with
# the steps of SGD each trains for (batch 4). stochastic_depth is the p = 0
# network: its forward in training mode is deterministic, so it can match
# PyTorch's; with p > 0 the statistics tests check it.
RULE_STEPS = {"encdec": 5, "resample1d": 5, "conv3d": 3, "expand_as": 10, "stochastic_depth": 5}
# Families also fused from torch.export archives (the tests' "+exported"
# kinds): MLP, CNNs with batch norm and dropout, Transformers (a tied
# embedding among them), an LSTM, the rule families' upsampling and
# stochastic depth; the MLP (no mode-dependent op) and LeNet (batch norm,
# dropout) also as one-mode archives.
EXPORTED = ["mlp", "lenet", "pointnet", "resnet18", "mobilenet_v2", "dcgan_d", "encdec", "stochastic_depth",
            "lm_tiny", "lm_tiny_tied", "bert_tiny", "encoder_pre_gelu_padding", "lstm_lm_tiny"]


def member_model(kind, b):
    """Member b of `kind` as an nn.Module: the model its scripted member_<b>.pt holds."""
    if kind in make_text_models.FAMILIES:
        builder, dtype, _ = make_text_models.FAMILIES[kind]
        torch.manual_seed(b)
        return builder().to(dtype)
    if kind in make_recurrent_models.FAMILIES:
        torch.manual_seed(b)
        return make_recurrent_models.FAMILIES[kind][0]().to(torch.float64)
    first_seed, dtype = (40, torch.float64) if kind in RULE_STEPS else (0, torch.float32)
    if kind in VISION:
        dtype = torch.float64
    torch.manual_seed(first_seed + b)
    return mlp.MODELS[kind](**VISION.get(kind, {})).to(dtype)


def write_exported(out_dir):
    for kind in EXPORTED:
        model = member_model(kind, 0)
        dtype = next(model.parameters()).dtype
        example = make_inputs(kind, (BATCH,), torch.Generator().manual_seed(0), dtype)
        make_exported_models.write(out_dir, kind, lambda b: member_model(kind, b), example,
                                   one_mode=kind in ("mlp", "lenet"))


def first(output):
    return output[0] if isinstance(output, tuple) else output


def loss_of(output, target):
    """Mean squared error of the first output: what each member minimizes."""
    if isinstance(output, tuple):
        output = output[0]
    return ((output - target) ** 2).mean()


def make_inputs(kind, shape, gen, dtype):
    """Members' batches [*shape, ...]: the Transformer families' own (token
    ids or sequences), random normal samples for the others."""
    if kind in make_recurrent_models.FAMILIES:
        return make_recurrent_models.make_inputs(make_recurrent_models.FAMILIES[kind][1], shape, gen, dtype)
    if kind in make_text_models.FAMILIES:
        return make_text_models.make_inputs(make_text_models.FAMILIES[kind][2], shape, gen, dtype)
    return torch.randn(shape + IN_SHAPES[kind], generator=gen, dtype=dtype)


def train_alone(model, xs, ys, settings):
    """Trains `model` in place with torch.optim.SGD on its own batches."""
    model.train()
    opt = torch.optim.SGD(model.parameters(), **settings)
    for step in range(xs.shape[0]):
        opt.zero_grad()
        loss_of(model(xs[step]), ys[step]).backward()
        opt.step()
    return {**{n: p.detach() for n, p in model.named_parameters()}, **dict(model.named_buffers())}


# How much a trajectory amplifies a relative change of the weights: a float64
# copy with its weights perturbed by this relative amount is trained too.
PERTURBATION = 1e-13


def sensitivity(path, xs, ys, settings):
    """max over tensors of |trained(perturbed) - trained| / (1 + |trained|),
    divided by PERTURBATION: the factor by which these steps amplify a
    relative difference (such as another summation order's rounding) into
    the trained values. Computed in float64 whatever the member's dtype, as
    a property of the arithmetic, not of one processor's kernels."""
    trained = []
    for perturbation in (0.0, PERTURBATION):
        model = torch.jit.load(path).double()
        gen = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + perturbation * torch.randn(p.shape, generator=gen, dtype=torch.float64))
        inputs = xs.double() if xs.is_floating_point() else xs  # token ids stay ids
        trained.append(train_alone(model, inputs, ys.double(), settings))
    worst = 0.0
    for name, value in trained[0].items():
        if value.is_floating_point():
            worst = max(worst, ((trained[1][name] - value).abs() / (1 + value.abs())).max().item())
    return worst / PERTURBATION


def reference(kind, paths, seed, settings, steps=STEPS, batch=BATCH, diverges=False):
    """PyTorch's answers for each member trained alone."""
    gen = torch.Generator().manual_seed(seed)
    members = [torch.jit.load(p) for p in paths]
    dtype = next(members[0].parameters()).dtype
    members[0].eval()
    xs = make_inputs(kind, (steps, MEMBERS, batch), gen, dtype)
    with torch.no_grad():
        out_shape = first(members[0](xs[0, 0])).shape
    ys = torch.randn((steps, MEMBERS) + tuple(out_shape), generator=gen, dtype=dtype)
    ref = {"x": xs, "y": ys, "outputs": [], "grads": {}, "trained": {}, "buffers": {},
           "eval_outputs": []}
    worst_sensitivity = 0.0
    for b, model in enumerate(members):
        model.train()
        out = model(xs[0, b])
        out = out if isinstance(out, tuple) else (out,)
        ref["outputs"].append(out[0].detach())
        loss_of(out, ys[0, b]).backward()
        for name, p in model.named_parameters():
            ref["grads"].setdefault(name, []).append(p.grad.detach().clone())
        # Train a fresh copy: that forward moved batch-norm statistics.
        model = torch.jit.load(paths[b])
        trained = train_alone(model, xs[:, b], ys[:, b], settings[b])
        for name, p in model.named_parameters():
            ref["trained"].setdefault(name, []).append(trained[name].clone())
        for name, buf in model.named_buffers():
            ref["buffers"].setdefault(name, []).append(buf.detach().clone())
        if not diverges:
            finite = all(t.isfinite().all() for t in trained.values() if t.is_floating_point())
            assert finite, f"{kind}: member {b} diverged alone; choose gentler settings for this family"
            worst_sensitivity = max(worst_sensitivity, sensitivity(paths[b], xs[:, b], ys[:, b], settings[b]))
        model.eval()
        with torch.no_grad():
            out = model(xs[0, b])
        ref["eval_outputs"].append((out[0] if isinstance(out, tuple) else out).detach())
    ref["grads"] = {k: torch.stack(v) for k, v in ref["grads"].items()}
    ref["trained"] = {k: torch.stack(v) for k, v in ref["trained"].items()}
    ref["buffers"] = {k: torch.stack(v) for k, v in ref["buffers"].items()}
    ref["eval_outputs"] = torch.stack(ref["eval_outputs"])
    ref["sensitivity"] = torch.tensor(worst_sensitivity, dtype=torch.float64)
    # The first output of each member; WideMLP's second one is checked in
    # the Python test of the fused module.
    ref["outputs"] = torch.stack(ref["outputs"])
    for key in ("lr", "momentum", "dampening", "weight_decay"):
        ref[key] = torch.tensor([s[key] for s in settings], dtype=torch.float64)
    ref["nesterov"] = torch.tensor([float(s["nesterov"]) for s in settings], dtype=torch.float64)
    return ref


class ScaledMLP(nn.Module):
    """A non-tensor attribute that differs between members is a mismatch."""

    def __init__(self, scale):
        super().__init__()
        self.fc = nn.Linear(16, 4)
        self.scale: float = scale

    def forward(self, x):
        return self.fc(x) * self.scale


def write_mismatches(out_dir):
    d = os.path.join(out_dir, "mismatch")
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    save = lambda m, name: torch.jit.save(torch.jit.script(m), os.path.join(d, name))
    save(mlp.MLP(), "base.pt")
    save(mlp.MLP(activation="tanh"), "topology.pt")          # GELU -> Tanh
    save(mlp.MLP(hidden=64), "shape.pt")                     # 32 -> 64 hidden units
    save(mlp.MLP().double(), "dtype.pt")                     # float32 -> float64
    save(mlp.MLP().eval(), "eval_mode.pt")                   # training flag differs
    save(ScaledMLP(0.5), "scaled_a.pt")
    save(ScaledMLP(2.0), "scaled_b.pt")                      # non-tensor attribute differs
    wide = mlp.WideMLP()
    wide.leaky = nn.LeakyReLU(0.3)                           # a constant differs
    save(mlp.WideMLP(), "wide_a.pt")
    save(wide, "wide_b.pt")


def write_conv_mismatches(out_dir):
    """Convolution and batch-norm settings that differ between members."""
    d = os.path.join(out_dir, "mismatch")
    save = lambda m, name: torch.jit.save(torch.jit.script(m), os.path.join(d, name))
    torch.manual_seed(0)
    save(cnn.LeNet(), "lenet.pt")
    variants = {
        "lenet_stride.pt": ("conv2", nn.Conv2d(6, 16, 5, stride=2)),
        "lenet_padding.pt": ("conv2", nn.Conv2d(6, 16, 5, padding=1)),
        "lenet_kernel.pt": ("conv2", nn.Conv2d(6, 16, 3)),
        "lenet_groups.pt": ("conv2", nn.Conv2d(6, 16, 5, groups=2)),
        "lenet_eps.pt": ("bn1", nn.BatchNorm2d(6, eps=1e-3)),
        "lenet_momentum.pt": ("bn1", nn.BatchNorm2d(6, momentum=0.3)),
    }
    for name, (attr, layer) in variants.items():
        model = cnn.LeNet()
        setattr(model, attr, layer)
        save(model, name)


def save_traced(out_dir, kind, prefix):
    """Members recorded by torch.jit.trace instead of scripted: convolutions
    then appear as aten::_convolution."""
    paths = []
    for b in range(MEMBERS):
        torch.manual_seed(b)
        example = torch.randn((BATCH,) + IN_SHAPES[kind])
        traced = torch.jit.trace(mlp.MODELS[kind](), example, check_trace=False)
        paths.append(os.path.join(out_dir, f"{prefix}_{b}.pt"))
        torch.jit.save(traced, paths[-1])
    return paths


def save_ensembles(out_dir):
    """Ensembles in one module (hfta::fuseParallel, hfta::registerPasses) and PyTorch's answers for them, in
    eager mode: outputs, every member's gradients and buffers after one training-mode forward."""
    cases = ensemble.cases()
    for name, own_inputs, kind in (("mlp_averaged_b5", False, "mlp"), ("lenet_stacked_b3", True, "lenet"),
                                   ("mlp_averaged_b8", False, "mlp"), ("lenet_stacked_b8", True, "lenet"),
                                   ("shared_parameter", False, "mlp"), ("uneven", False, "scale"),
                                   ("two_heads_summed_b3", False, "mlp"), ("tied_averaged_b3", False, "tied")):
        module = cases[name]
        torch.jit.save(torch.jit.script(module), os.path.join(out_dir, f"ensemble_{name}.pt"))
        gen = torch.Generator().manual_seed(3)
        members = len(module.members)
        shape = ensemble.INPUT_SHAPES[kind]
        x = torch.randn(members, BATCH, *shape, generator=gen) if own_inputs else torch.randn(BATCH, *shape, generator=gen)
        out = module(x)
        out.pow(2).sum().backward()
        grads = {f"{b}.{n}": p.grad.clone() for b, m in enumerate(module.members) for n, p in m.named_parameters()}
        buffers = {f"{b}.{n}": t.clone() for b, m in enumerate(module.members) for n, t in m.named_buffers()}
        torch.save({"x": x, "outputs": out.detach(), "grads": grads, "buffers": buffers},
                   os.path.join(out_dir, f"ensemble_{name}_reference.pt"))


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    # (file prefix, model family, first member seed, data seed): two seed
    # sets for each fused family.
    for prefix, kind, first_seed, data_seed in [("mlp", "mlp", 0, 1), ("mlp_seed10", "mlp", 10, 11),
                                                ("wide", "wide", 0, 1), ("wide_seed20", "wide", 20, 21),
                                                ("fallback", "fallback", 0, 1), ("lenet", "lenet", 0, 1),
                                                ("resblock", "resblock", 0, 1), ("resblock_seed30", "resblock", 30, 31),
                                                ("pointnet", "pointnet", 0, 1), ("generator", "generator", 0, 1),
                                                ("zoo", "zoo", 0, 1)]:
        paths = mlp.save_members(out_dir, kind, MEMBERS, first_seed=first_seed, prefix=prefix)
        settings = GENTLE_SETTINGS if kind in GENTLE else SGD_SETTINGS
        torch.save(reference(kind, paths, seed=data_seed, settings=settings),
                   os.path.join(out_dir, f"{prefix}_reference.pt"))
    for kind in ("lenet", "generator"):
        paths = save_traced(out_dir, kind, f"{kind}_traced")
        torch.save(reference(kind, paths, seed=1, settings=SGD_SETTINGS),
                   os.path.join(out_dir, f"{kind}_traced_reference.pt"))
    for kind, kwargs in VISION.items():
        paths = mlp.save_members(out_dir, kind, MEMBERS, dtype=torch.float64, **kwargs)
        torch.save(reference(kind, paths, seed=1, settings=SGD_SETTINGS, steps=VISION_STEPS[kind],
                             batch=VISION_BATCH),
                   os.path.join(out_dir, f"{kind}_reference.pt"))
    for kind, steps in RULE_STEPS.items():
        paths = mlp.save_members(out_dir, kind, MEMBERS, first_seed=40, dtype=torch.float64)
        torch.save(reference(kind, paths, seed=41, settings=SGD_SETTINGS, steps=steps, batch=VISION_BATCH),
                   os.path.join(out_dir, f"{kind}_reference.pt"))
    mlp.save_members(out_dir, "stochastic_depth", MEMBERS, first_seed=40, prefix="stochastic_depth_p25",
                     dtype=torch.float64, p=0.25)
    mlp.save_members(out_dir, "random_draws", MEMBERS, first_seed=40, dtype=torch.float64)
    make_text_models.main(out_dir, reference, loss_of, SGD_SETTINGS)
    make_recurrent_models.main(out_dir, reference, SGD_SETTINGS)
    mlp.save_members(out_dir, "digits", 1, prefix="digits")  # a plain model for hfta_train's runs
    save_ensembles(out_dir)
    # One member diverges (a huge learning rate); the others must not notice.
    diverging = [dict(s) for s in SGD_SETTINGS]
    diverging[1] = dict(lr=1e6, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False)
    torch.save(reference("mlp", mlp.save_members(out_dir, "mlp", MEMBERS), seed=2, settings=diverging, diverges=True),
               os.path.join(out_dir, "mlp_diverging_reference.pt"))
    # Three identical members with dropout: their masks must still differ.
    for b in range(MEMBERS):
        torch.jit.save(mlp.make_member("mlp", 7, dropout=0.5), os.path.join(out_dir, f"dropout_{b}.pt"))
        torch.jit.save(mlp.make_member("lenet", 7, dropout=0.5),
                       os.path.join(out_dir, f"lenet_dropout_{b}.pt"))
    write_exported(out_dir)
    write_mismatches(out_dir)
    write_conv_mismatches(out_dir)
    make_optim_references.main(out_dir)
    with open(os.path.join(out_dir, "not_a_model.pt"), "w") as f:
        f.write("this is not a TorchScript archive\n")


if __name__ == "__main__":
    main(sys.argv[1])
