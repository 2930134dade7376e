"""HFTA's two Transformer workloads as plain PyTorch models, scripted from
Python: the word-level Transformer language model (PyTorch's
word_language_model example, which HFTA fuses on WikiText-2) and BERT with a
masked-language-model head; and the same example's LSTM language model.

Both take token ids [N, L] (int64, batch first) and return [N, L, V]: the
language model log-probabilities of the next token, BERT the logits of the
masked tokens. Configurations: `*_small` for tests and quick sweeps, the
published sizes otherwise (the LM as HFTA's example runs it; BERT-Base).

`python examples/text.py OUT_DIR --kind lm_small --members 4 --vocab-from
.data/fortunes` writes OUT_DIR/lm_small_{b}.pt, one TorchScript file per
member, with the vocabulary of that corpus (hfta-train --dataset wikitext
--data .data/fortunes).

Written from the papers and PyTorch's modules, not from HFTA's copies: its
encoder layer adds the wrong residual and its attention ignores
`key_padding_mask`; here both come from `nn.TransformerEncoderLayer`.
"""
import argparse
import inspect
import math
import os
import warnings

import torch
from torch import nn
import torch.nn.functional as F

import mlp

# Scripting nn.TransformerEncoder(norm=None) warns that its `norm` constant is
# a submodule; harmless, and it would drown real warnings.
warnings.filterwarnings("ignore", message=r".*non-constant submodule.*")


class PositionalEncoding(nn.Module):
    """The sinusoids of Vaswani et al., a buffer [1, max_len, d], then dropout."""

    def __init__(self, d_model, dropout, max_len):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class TransformerLM(nn.Module):
    """Embedding * sqrt(d) + positions -> encoder with a causal mask -> linear
    decoder -> log-softmax over the vocabulary. Defaults: HFTA's run of the
    example on WikiText-2 (emsize 200, 2 heads, nhid 200, 2 layers, dropout
    0.2; the vocabulary is the corpus's). tied: the decoder's weight is the
    embedding's (Press & Wolf 2017; GPT-2 and PyTorch's word_language_model
    --tied)."""

    def __init__(self, vocab=33278, d_model=200, nhead=2, d_hid=200, layers=2, dropout=0.2, max_len=512,
                 activation="relu", norm_first=False, tied=False):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.positions = PositionalEncoding(d_model, dropout, max_len)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout, activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=not norm_first)
        self.decoder = nn.Linear(d_model, vocab)
        self.scale = math.sqrt(d_model)
        # The example's initialization.
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        if tied:
            self.decoder.weight = self.embedding.weight

    def forward(self, tokens):
        length = tokens.size(1)
        causal = torch.triu(torch.full((length, length), float("-inf"), device=tokens.device), diagonal=1)
        x = self.positions(self.embedding(tokens) * self.scale)
        x = self.encoder(x, mask=causal, is_causal=True)
        return F.log_softmax(self.decoder(x), dim=-1)


class RNNLM(nn.Module):
    """PyTorch's word_language_model RNNModel (the LSTM variant HFTA's users
    swept beside the Transformer): embedding, dropout, a multi-layer LSTM
    (or GRU, RNN_TANH, RNN_RELU) with dropout between layers, dropout, a
    linear decoder, log-softmax. Each batch starts from a zero state (the
    example carries the state across batches of one stream; hfta-train's
    batches are independent windows). Defaults: the example's (emsize 200,
    nhid 200, 2 layers, dropout 0.2; tied: --tied)."""

    def __init__(self, vocab=33278, emsize=200, nhid=200, layers=2, dropout=0.2, cell="LSTM", tied=False):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab, emsize)
        if cell in ("LSTM", "GRU"):
            self.rnn = getattr(nn, cell)(emsize, nhid, layers, dropout=dropout, batch_first=True)
        else:
            self.rnn = nn.RNN(emsize, nhid, layers, nonlinearity=cell[4:].lower(), dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, vocab)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        if tied:
            assert nhid == emsize, "tied weights need nhid == emsize"
            self.decoder.weight = self.encoder.weight

    def forward(self, tokens):
        output, _ = self.rnn(self.drop(self.encoder(tokens)))
        return F.log_softmax(self.decoder(self.drop(output)), dim=-1)


class BERT(nn.Module):
    """BERT (Devlin et al. 2019) for masked-LM pre-training: token, learned
    position and segment embeddings, layer norm, pre-norm encoder layers with
    a GELU feed-forward, key padding masks from the padding tokens, and the
    MLM head (dense, GELU, layer norm, decoder). A sequence of L tokens is
    read as BERT's sentence pair: the first L // 2 tokens are segment A, the
    rest segment B. Defaults: BERT-Base."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, intermediate=3072, dropout=0.1, max_len=512,
                 pad_id=0):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, hidden, padding_idx=pad_id)
        self.position_embedding = nn.Embedding(max_len, hidden)
        self.segment_embedding = nn.Embedding(2, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(hidden, heads, intermediate, dropout, activation="gelu", batch_first=True,
                                           norm_first=True, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(hidden, eps=1e-12),
                                             enable_nested_tensor=False)
        self.mlm = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden, eps=1e-12),
                                 nn.Linear(hidden, vocab))
        self.pad_id = pad_id

    def forward(self, tokens):
        length = tokens.size(1)
        positions = torch.arange(length, device=tokens.device)
        segments = (positions >= length // 2).long()
        x = self.token_embedding(tokens) + self.position_embedding(positions) + self.segment_embedding(segments)
        x = self.dropout(self.embedding_norm(x))
        x = self.encoder(x, src_key_padding_mask=tokens == self.pad_id)
        return self.mlm(x)


# Configurations: the tests' (tiny, fast), a small one for sweeps and
# benchmarks on a CPU, and the published sizes.
CONFIGS = {
    "lm_tiny": (TransformerLM, dict(vocab=40, d_model=16, nhead=2, d_hid=24, layers=2, dropout=0.0, max_len=32)),
    "lm_tiny_tied": (TransformerLM, dict(vocab=40, d_model=16, nhead=2, d_hid=24, layers=2, dropout=0.0, max_len=32,
                                         tied=True)),
    "lm_small": (TransformerLM, dict(vocab=2000, d_model=64, nhead=2, d_hid=64, layers=2, dropout=0.2, max_len=128)),
    "lm": (TransformerLM, dict()),
    "lstm_lm_tiny": (RNNLM, dict(vocab=40, emsize=17, nhid=20, layers=2, dropout=0.0)),
    "lstm_lm_small": (RNNLM, dict(vocab=2000, emsize=64, nhid=64, layers=2, dropout=0.2)),
    "lstm_lm": (RNNLM, dict()),
    "bert_tiny": (BERT, dict(vocab=40, hidden=16, layers=2, heads=2, intermediate=32, dropout=0.0, max_len=32)),
    "bert_small": (BERT, dict(vocab=2000, hidden=128, layers=2, heads=2, intermediate=512, max_len=128)),
    "bert": (BERT, dict()),
}


def model_factory(name):
    cls, defaults = CONFIGS[name]
    return lambda **kwargs: cls(**{**defaults, **kwargs})


MODELS = {name: model_factory(name) for name in CONFIGS}
# One member's sequence length for the tests and benchmarks (token ids [N, L]).
SEQUENCE_LENGTHS = {"lm_tiny": 8, "lm_tiny_tied": 8, "lm_small": 35, "lm": 35, "lstm_lm_tiny": 8, "lstm_lm_small": 35,
                    "lstm_lm": 35, "bert_tiny": 8, "bert_small": 64, "bert": 128}
# Each configuration's vocabulary (the published ones: their class's default).
VOCABULARIES = {name: settings.get("vocab", inspect.signature(cls).parameters["vocab"].default)
                for name, (cls, settings) in CONFIGS.items()}
mlp.MODELS.update(MODELS)


def vocabulary_size(data_dir):
    """The size of the vocabulary hfta-train builds from DATA_DIR's
    wiki.train.tokens (train/text_data.h): <pad>, <mask>, <unk>, <eos> and
    every word of the file."""
    words = {"<pad>", "<mask>", "<unk>", "<eos>"}
    with open(os.path.join(data_dir, "wiki.train.tokens"), encoding="utf-8") as f:
        for line in f:
            words.update(line.split())
    return len(words)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--kind", choices=sorted(MODELS), default="lm_small")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--vocab-from", metavar="DATA_DIR",
                        help="size the vocabulary for hfta-train --data DATA_DIR (WikiText-2 format)")
    args = parser.parse_args()
    kwargs = {"vocab": vocabulary_size(args.vocab_from)} if args.vocab_from else {}
    for p in mlp.save_members(args.out_dir, args.kind, args.members, args.first_seed, **kwargs):
        print(p)


if __name__ == "__main__":
    main()
