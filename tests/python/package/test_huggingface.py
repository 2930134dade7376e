"""Hugging Face Transformers, which do not script, fused through
torch.export: tiny GPT-2 and BERT built from their config classes (no
download), trained as each member alone."""
import torch
import torch.nn as nn
from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel

import hfta
from conftest import members
from test_export import assert_trains_as_each_member

VOCAB = 100


class Logits(nn.Module):
    """The model's logits: hfta fuses forwards that return tensors (and
    tuples of them), not Hugging Face's output dataclasses."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids).logits


def tiny_gpt2():
    # Dropout off: a fused member draws other masks than the member alone.
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=16, use_cache=False,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return Logits(GPT2LMHeadModel(config))


def tiny_bert():
    config = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                        vocab_size=VOCAB, max_position_embeddings=16, num_labels=3, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    return Logits(BertForSequenceClassification(config))


def check(make):
    models = members(make, 3)
    ids = torch.randint(0, VOCAB, (3, 4, 8), generator=torch.Generator().manual_seed(3))
    fused, report = hfta.fuse(models, example_inputs=(ids[0],), report=True)
    assert report.fallbacks == [], report.text
    assert_trains_as_each_member(fused, models, ids)


def test_tiny_gpt2_trains_as_each_member():
    check(tiny_gpt2)


def test_tiny_bert_trains_as_each_member():
    check(tiny_bert)
