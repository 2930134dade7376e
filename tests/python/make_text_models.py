"""Test setup for the Transformer families (called by make_test_models.py):
scripts the members and computes PyTorch's answers per member alone.

Families: the word language model and BERT of examples/text.py at tiny
sizes, nn.MultiheadAttention and nn.TransformerEncoder in the forms the
issue names (masks shared and per member, need_weights, batch_first,
norm_first, relu and gelu, causal), and a zoo of the remaining activations
and embedding options. Each in float64 (tight tolerances) and the LM and
BERT also in float32.

Writes, besides the members (<family>_<b>.pt), <family>_reference.pt with
what make_test_models.reference() writes (forward, gradients, 5 SGD steps,
eval outputs) and, per member alone: 5 steps of Adadelta with StepLR
stepped after each step (HFTA's examples) and 5 of AdamW, with per-member
settings ("adadelta_trained", "adamw_trained" and their settings).
"""
import os
import sys
from typing import Optional

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import text  # noqa: E402

MEMBERS = 3
BATCH = 4
STEPS = 5
VOCAB = 40
LENGTH = 8
EMBED = 16

ADADELTA = [dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, step_size=2, gamma=0.5),
            dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=1e-2, step_size=1, gamma=0.9),
            dict(lr=2.0, rho=0.95, eps=1e-4, weight_decay=1e-3, step_size=3, gamma=0.1)]
ADAMW = [dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2),
         dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.0),
         dict(lr=5e-4, betas=(0.95, 0.9), eps=1e-7, weight_decay=0.1)]


def padding_of(x):
    """A key padding mask [N, L] read off sequences [N, L, E]: different in
    every member and sequence, never the first position (a fully masked
    sequence has no attention to normalize)."""
    return (x[:, :, 0] > 1.2) & (torch.arange(x.size(1)) > 0)


def suffix_padding_of(x):
    """A key padding mask [N, L] that pads the last 0 to 3 positions of each
    sequence (read off the input, so different per member and sequence):
    left-aligned, the form nn.TransformerEncoder packs into nested tensors."""
    padded = (x[:, 0, 0] > 0).long() * 2 + (x[:, 0, 1] > 0).long()
    return torch.arange(x.size(1)).unsqueeze(0) >= (x.size(1) - padded).unsqueeze(1)


class Attention(nn.Module):
    """nn.MultiheadAttention on float inputs ([N, L, E] batch first, else
    [L, N, E]), with a key padding mask read off the input (per member),
    an attn_mask (a causal one: "float", "bool", or "none"), and need_weights.
    Returns the attention output and its weights (or the output twice)."""

    def __init__(self, batch_first, need_weights, padding, mask, average=True, dropout=0.0):
        super().__init__()
        self.attention = nn.MultiheadAttention(EMBED, 2, dropout=dropout, batch_first=batch_first)
        self.batch_first = batch_first
        self.need_weights = need_weights
        self.padding = padding
        self.mask = mask
        self.average = average

    def forward(self, x):
        length = x.size(1) if self.batch_first else x.size(0)
        padding: Optional[torch.Tensor] = None
        if self.padding:
            padding = padding_of(x if self.batch_first else x.transpose(0, 1))
        mask: Optional[torch.Tensor] = None
        if self.mask == "float":
            mask = torch.triu(torch.full((length, length), float("-inf"), dtype=x.dtype), diagonal=1)
            if padding is not None:  # of the mask's type, as PyTorch asks
                padding = torch.zeros(padding.shape, dtype=x.dtype).masked_fill(padding, float("-inf"))
        elif self.mask == "bool":
            mask = torch.ones(length, length, dtype=torch.bool).triu(1)
        out, weights = self.attention(x, x, x, key_padding_mask=padding, need_weights=self.need_weights,
                                      attn_mask=mask, average_attn_weights=self.average)
        if weights is None:
            return out, out
        return out, weights


class Encoder(nn.Module):
    """nn.TransformerEncoder (2 layers) on float inputs [N, L, E]; with a key
    padding mask read off the input the padded positions' outputs are zeroed
    (PyTorch's nested-tensor path in eval writes zeros there, its padded path
    the layers' values). `nested`: the padding is a suffix and the encoder
    may pack sequences into nested tensors (in eval, alone)."""

    def __init__(self, norm_first, activation, causal, padding, nested=False, mask_check=True):
        super().__init__()
        layer = nn.TransformerEncoderLayer(EMBED, 2, 24, dropout=0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested, mask_check=mask_check)
        self.causal = causal
        self.padding = padding
        self.nested = nested

    def forward(self, x):
        length = x.size(1)
        mask: Optional[torch.Tensor] = None
        if self.causal:
            mask = torch.triu(torch.full((length, length), float("-inf"), dtype=x.dtype), diagonal=1)
        padding: Optional[torch.Tensor] = None
        if self.padding:
            padding = suffix_padding_of(x) if self.nested else padding_of(x)
        out = self.encoder(x, mask=mask, src_key_padding_mask=padding, is_causal=self.causal)
        if padding is not None:
            out = out.masked_fill(padding.unsqueeze(-1), 0.0)
        return out


class ActivationZoo(nn.Module):
    """Token ids through embeddings with padding_idx and scale_grad_by_freq,
    and with max_norm (renormalized in place as it is read), then every
    activation HFTA fuses that the CNNs do not use, and std/sqrt/erf/abs."""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, EMBED, padding_idx=0, scale_grad_by_freq=True)
        self.renormed = nn.Embedding(VOCAB, EMBED, max_norm=1.0)
        self.proj = nn.Linear(EMBED, EMBED)
        self.acts = nn.ModuleList([nn.Hardshrink(0.3), nn.LogSigmoid(), nn.SELU(), nn.CELU(0.7), nn.Mish(),
                                   nn.Softshrink(0.2), nn.Softsign(), nn.Threshold(0.1, -0.5)])

    def forward(self, tokens):
        h = self.proj(self.tokens(tokens) + self.renormed(tokens))
        total = torch.zeros_like(h)
        for act in self.acts:
            total = total + act(h)
        total = total + F.rrelu(h, training=False)
        spread = h.std(dim=-1, keepdim=True)
        return total * torch.erf(h) + torch.sqrt(h.abs() + 1.0) / spread


class RandomMasks(nn.Module):
    """rrelu in training (a random slope per element) and attention dropout:
    identical members must still draw their own."""

    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(EMBED, 2, dropout=0.5, batch_first=True)

    def forward(self, x):
        h = F.rrelu(x, training=self.training)
        return self.attention(h, h, h, need_weights=False)[0]


FAMILIES = {
    # name: (builder, dtype, input kind)
    "lm_tiny": (lambda: text.MODELS["lm_tiny"](), torch.float64, "tokens"),
    "lm_tiny_f32": (lambda: text.MODELS["lm_tiny"](), torch.float32, "tokens"),
    "lm_tiny_tied": (lambda: text.MODELS["lm_tiny_tied"](), torch.float64, "tokens"),
    "bert_tiny": (lambda: text.MODELS["bert_tiny"](), torch.float64, "padded_tokens"),
    "bert_tiny_f32": (lambda: text.MODELS["bert_tiny"](), torch.float32, "padded_tokens"),
    "mha_weights_padding_causal": (lambda: Attention(True, True, True, "float"), torch.float64, "floats"),
    "mha_seq_first_padding": (lambda: Attention(False, False, True, "none"), torch.float64, "seq_first_floats"),
    "mha_bool_mask": (lambda: Attention(True, False, False, "bool"), torch.float64, "floats"),
    "mha_seq_first_head_weights": (lambda: Attention(False, True, False, "none", average=False), torch.float64,
                                   "seq_first_floats"),
    "encoder_post_relu_causal": (lambda: Encoder(False, "relu", True, False), torch.float64, "floats"),
    "encoder_pre_gelu_padding": (lambda: Encoder(True, "gelu", False, True), torch.float64, "floats"),
    "encoder_post_gelu_nested": (lambda: Encoder(False, "gelu", False, True, nested=True), torch.float64, "floats"),
    "activation_zoo": (lambda: ActivationZoo(), torch.float64, "tokens"),
}


def make_inputs(kind, shape, gen, dtype):
    """Inputs for `shape` = (..., N) members' batches: token ids [..., N, L]
    (padded_tokens: the last tokens of some sequences are padding, id 0) or
    floats [..., N, L, E]."""
    if kind == "floats":
        return torch.randn(shape + (LENGTH, EMBED), generator=gen, dtype=dtype)
    if kind == "seq_first_floats":  # [..., L, N, E]
        return torch.randn(shape[:-1] + (LENGTH, shape[-1], EMBED), generator=gen, dtype=dtype)
    tokens = torch.randint(1, VOCAB, shape + (LENGTH,), generator=gen)
    if kind == "padded_tokens":
        lengths = torch.randint(LENGTH // 2, LENGTH + 1, shape, generator=gen)
        tokens[torch.arange(LENGTH) >= lengths.unsqueeze(-1)] = 0
    return tokens


def save_members(out_dir, family):
    builder, dtype, _ = FAMILIES[family]
    paths = []
    for b in range(MEMBERS):
        torch.manual_seed(b)
        path = os.path.join(out_dir, f"{family}_{b}.pt")
        torch.jit.save(torch.jit.script(builder().to(dtype)), path)
        paths.append(path)
    return paths


def train_with(path, xs, ys, loss_of, make_optimizer, make_scheduler=None):
    """Member trained alone: optimizer (and scheduler, stepped after each
    step) from the given factories; returns its parameters."""
    model = torch.jit.load(path)
    model.train()
    opt = make_optimizer(model.parameters())
    sched = make_scheduler(opt) if make_scheduler else None
    for step in range(xs.shape[0]):
        opt.zero_grad()
        loss_of(model(xs[step]), ys[step]).backward()
        opt.step()
        if sched:
            sched.step()
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def optimizer_references(paths, xs, ys, loss_of):
    """Adadelta + StepLR and AdamW per member alone, with per-member settings."""
    ref = {}
    runs = {
        "adadelta": [train_with(p, xs[:, b], ys[:, b], loss_of,
                                lambda params, s=ADADELTA[b]: torch.optim.Adadelta(
                                    params, lr=s["lr"], rho=s["rho"], eps=s["eps"], weight_decay=s["weight_decay"],
                                    foreach=False),
                                lambda opt, s=ADADELTA[b]: torch.optim.lr_scheduler.StepLR(opt, s["step_size"],
                                                                                           s["gamma"]))
                     for b, p in enumerate(paths)],
        "adamw": [train_with(p, xs[:, b], ys[:, b], loss_of,
                             lambda params, s=ADAMW[b]: torch.optim.AdamW(params, foreach=False, **s))
                  for b, p in enumerate(paths)],
    }
    for name, trained in runs.items():
        ref[f"{name}_trained"] = {k: torch.stack([t[k] for t in trained]) for k in trained[0]}
    for key in ("lr", "rho", "eps", "weight_decay", "step_size", "gamma"):
        ref[f"adadelta_{key}"] = torch.tensor([s[key] for s in ADADELTA], dtype=torch.float64)
    for key in ("lr", "eps", "weight_decay"):
        ref[f"adamw_{key}"] = torch.tensor([s[key] for s in ADAMW], dtype=torch.float64)
    ref["adamw_beta1"] = torch.tensor([s["betas"][0] for s in ADAMW], dtype=torch.float64)
    ref["adamw_beta2"] = torch.tensor([s["betas"][1] for s in ADAMW], dtype=torch.float64)
    return ref


def save_without_reference(out_dir):
    """Members for the tests that need no reference: identical members with
    random masks, and an encoder whose nested-tensor path the fused module
    cannot take (mask_check=False)."""
    for b in range(MEMBERS):
        torch.manual_seed(7)
        torch.jit.save(torch.jit.script(RandomMasks()), os.path.join(out_dir, f"random_masks_{b}.pt"))
        torch.manual_seed(b)
        unchecked = Encoder(False, "relu", False, True, nested=True, mask_check=False)
        torch.jit.save(torch.jit.script(unchecked), os.path.join(out_dir, f"encoder_nested_unchecked_{b}.pt"))


def main(out_dir, reference, loss_of, sgd_settings):
    """reference(kind, paths, ...) is make_test_models.reference; it reads
    inputs through make_test_models.INPUTS, which this fills."""
    for family, (_, dtype, input_kind) in FAMILIES.items():
        paths = save_members(out_dir, family)
        ref = reference(family, paths, seed=1, settings=sgd_settings, steps=STEPS, batch=BATCH)
        ref.update(optimizer_references(paths, ref["x"], ref["y"], loss_of))
        torch.save(ref, os.path.join(out_dir, f"{family}_reference.pt"))
    save_without_reference(out_dir)
