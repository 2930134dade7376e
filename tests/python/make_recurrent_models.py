"""Test setup for the recurrent families (called by make_test_models.py):
scripts the members and computes PyTorch's answers per member alone.

Families, each in float64 with 3 members of different seeds: an LSTM tagger
(2 layers, batch first; examples/text.py's LSTM language model, tiny), a
bidirectional LSTM with proj_size and without biases given its initial
state and returning (output, (h_n, c_n)), a bidirectional GRU given its
initial state, RNNs with tanh and relu, and the four cells stepped in a
loop; and a module with a List[Tensor] attribute. Sizes past 16 lanes (17 inputs, 20 hidden) so that AVX2 and AVX-512
builds take the same ATen paths.

Writes, besides the members (<family>_<b>.pt), <family>_reference.pt with
what make_test_models.reference() writes (forward, gradients, SGD steps,
eval outputs). Members for tests without a reference: an LSTM with dropout
between layers (identical members must draw their own masks) and an LSTM
over packed sequences (run per member).
"""
import os
import sys
from typing import List, Tuple

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import text  # noqa: E402

MEMBERS = 3
FEATURES = 17
HIDDEN = 20
LENGTH = 6


class StatefulLSTM(nn.Module):
    """A bidirectional 2-layer LSTM with proj_size and no biases, its
    initial state computed from the input (so each member's own), returning
    the layer's (output, (h_n, c_n)). Sequence-first."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, HIDDEN, 2, bias=False, bidirectional=True, proj_size=7)
        self.h0 = nn.Linear(FEATURES, 4 * 7)
        self.c0 = nn.Linear(FEATURES, 4 * HIDDEN)
        self.hidden = HIDDEN

    def forward(self, x) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        first = x[0]  # [N, F]
        h0 = self.h0(first).view(first.size(0), 4, 7).transpose(0, 1).contiguous()
        c0 = self.c0(first).view(first.size(0), 4, self.hidden).transpose(0, 1).contiguous()
        return self.lstm(x, (h0, c0))


class StatefulGRU(nn.Module):
    """A bidirectional 2-layer GRU given a learned initial state; returns
    the output and h_n."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(FEATURES, HIDDEN, 2, bidirectional=True, batch_first=True)
        self.h0 = nn.Parameter(torch.randn(4, 1, HIDDEN) * 0.1)

    def forward(self, x) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.gru(x, self.h0.expand(4, x.size(0), self.h0.size(2)).contiguous())


class Elman(nn.Module):
    """nn.RNN: 3 layers with tanh, then one with relu (batch first)."""

    def __init__(self):
        super().__init__()
        self.tanh = nn.RNN(FEATURES, HIDDEN, 3)
        self.relu = nn.RNN(HIDDEN, HIDDEN, nonlinearity="relu", batch_first=True)

    def forward(self, x):
        h, _ = self.tanh(x.transpose(0, 1))
        out, _ = self.relu(h.transpose(0, 1))
        return out


class Cells(nn.Module):
    """LSTMCell, GRUCell and RNNCell (tanh and relu) stepped over time."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(FEATURES, HIDDEN)
        self.gru = nn.GRUCell(HIDDEN, HIDDEN)
        self.tanh = nn.RNNCell(HIDDEN, HIDDEN)
        self.relu = nn.RNNCell(HIDDEN, HIDDEN, bias=False, nonlinearity="relu")

    def forward(self, x):  # [N, T, F]
        hidden = self.gru.hidden_size
        h = torch.zeros(x.size(0), hidden, dtype=x.dtype)
        c = torch.zeros(x.size(0), hidden, dtype=x.dtype)
        g = torch.zeros(x.size(0), hidden, dtype=x.dtype)
        outputs: List[torch.Tensor] = []
        for t in range(x.size(1)):
            h, c = self.lstm(x[:, t], (h, c))
            g = self.gru(h, g)
            outputs.append(self.relu(self.tanh(g), g))
        return torch.stack(outputs, 1)


class PackedLSTM(nn.Module):
    """An LSTM over packed sequences whose lengths come from the input (so
    they differ per member): aten::lstm.data runs per member."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, HIDDEN, batch_first=True)

    def forward(self, x):
        lengths = (x[:, :, 0] > -1.0).sum(1).clamp(min=1)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.size(1))[0]


class ListAttribute(nn.Module):
    """A user's List[Tensor] attribute, as nn.LSTM's _flat_weights is: each
    layer's output scaled by a tensor of the list (each member its own)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(FEATURES, FEATURES) for _ in range(3)])
        self.scales: List[torch.Tensor] = [torch.rand(FEATURES) + 0.5 for _ in range(3)]

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = torch.tanh(layer(x)) * self.scales[i]
        return x


FAMILIES = {
    # name: (builder, input kind)
    "lstm_lm_tiny": (lambda: text.MODELS["lstm_lm_tiny"](), "tokens"),
    "lstm_stateful": (StatefulLSTM, "seq_first"),
    "gru_stateful": (StatefulGRU, "batch_first"),
    "rnn_elman": (Elman, "batch_first"),
    "rnn_cells": (Cells, "batch_first"),
    "list_attribute": (ListAttribute, "batch_first"),
}


def make_inputs(kind, shape, gen, dtype):
    """Inputs for `shape` = (..., N) members' batches: token ids [..., N, L],
    or sequences [..., N, L, F] (seq_first: [..., L, N, F])."""
    if kind == "tokens":
        return torch.randint(0, text.VOCABULARIES["lstm_lm_tiny"], shape + (LENGTH,), generator=gen)
    if kind == "seq_first":
        return torch.randn(shape[:-1] + (LENGTH, shape[-1], FEATURES), generator=gen, dtype=dtype)
    return torch.randn(shape + (LENGTH, FEATURES), generator=gen, dtype=dtype)


def save_members(out_dir, name, builder, dtype=torch.float64):
    paths = []
    for b in range(MEMBERS):
        torch.manual_seed(b)
        paths.append(os.path.join(out_dir, f"{name}_{b}.pt"))
        torch.jit.save(torch.jit.script(builder().to(dtype)), paths[-1])
    return paths


def main(out_dir, reference, sgd_settings):
    """reference(kind, paths, ...) is make_test_models.reference, which reads
    inputs through make_test_models.make_inputs."""
    for family, (builder, _) in FAMILIES.items():
        paths = save_members(out_dir, family, builder)
        torch.save(reference(family, paths, seed=1, settings=sgd_settings), os.path.join(out_dir, f"{family}_reference.pt"))
    for b in range(MEMBERS):
        torch.manual_seed(7)  # identical members: only their dropout masks differ
        dropout = text.MODELS["lstm_lm_tiny"](dropout=0.5)
        torch.jit.save(torch.jit.script(dropout.double()), os.path.join(out_dir, f"lstm_dropout_{b}.pt"))
    save_members(out_dir, "lstm_packed", PackedLSTM)
