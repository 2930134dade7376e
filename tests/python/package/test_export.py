"""hfta.fuse of torch.export programs (and of nn.Modules exported through
example_inputs) against each member trained alone in eager PyTorch:
forward in both modes, gradients, SGD steps, buffers."""
import copy
from typing import NamedTuple

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import hfta
from conftest import Cnn, Mlp, TOLERANCE, assert_member_matches, members

LRS = [0.05, 0.02, 0.1]


def assert_trains_as_each_member(fused, models, inputs, steps=3):
    """`steps` SGD steps of the fused module (member b at LRS[b]) and of each
    model alone with torch.optim.SGD on its own batches: outputs at every
    step, then parameters, buffers (split) and eval outputs."""
    models = [copy.deepcopy(m) for m in models]
    array = len(models)
    opt = hfta.optim.SGD(fused.parameters(), lr=LRS[:array])
    alone = [torch.optim.SGD(m.parameters(), lr=lr) for m, lr in zip(models, LRS)]
    gen = torch.Generator().manual_seed(7)
    for _ in range(steps):
        fused.train()
        out = fused(inputs)
        targets = torch.randn(out.shape, generator=gen)
        opt.zero_grad()
        ((out - targets) ** 2).flatten(1).mean(1).sum().backward()
        opt.step()
        for b, model in enumerate(models):
            model.train()
            own = model(inputs[b])
            torch.testing.assert_close(out[b].detach(), own.detach(), rtol=TOLERANCE, atol=TOLERANCE)
            alone[b].zero_grad()
            ((own - targets[b]) ** 2).mean().backward()
            alone[b].step()
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)
    fused.eval()
    with torch.no_grad():
        out = fused(inputs)
        for b, model in enumerate(models):
            model.eval()
            torch.testing.assert_close(out[b], model(inputs[b]), rtol=TOLERANCE, atol=TOLERANCE)


def exported(model, x):
    """(train, eval) programs of `model`, as hfta.export records them."""
    programs = hfta.export_programs(model, (x,))
    return programs["train"], programs["eval"]


def test_pairs_of_exported_programs_train_as_each_member():
    models = members(Cnn, 3)
    x = torch.randn(3, 6, 3, 8, 8)
    fused, report = hfta.fuse([exported(m, x[0]) for m in models], report=True)
    assert report.fallbacks == []
    assert_trains_as_each_member(fused, models, x)


def test_modules_with_example_inputs_are_exported_and_trained():
    models = members(Cnn, 3)
    x = torch.randn(3, 5, 3, 8, 8)  # another batch size than the example's: the batch is dynamic
    fused = hfta.fuse(models, example_inputs=(torch.randn(4, 3, 8, 8),))
    assert_trains_as_each_member(fused, models, x)


def test_pt2_paths_fuse_like_their_scripted_members(tmp_path):
    models = members(Cnn, 2)
    paths = [hfta.export(m, (torch.randn(4, 3, 8, 8),), tmp_path / f"m{b}.pt2") for b, m in enumerate(models)]
    from_export = hfta.fuse(paths)
    from_script = hfta.fuse([torch.jit.script(m) for m in models])
    x = torch.randn(2, 4, 3, 8, 8)
    for mode in (True, False):
        from_export.train(mode)
        from_script.train(mode)
        torch.testing.assert_close(from_export(x), from_script(x), rtol=TOLERANCE, atol=TOLERANCE)
    assert dict(from_export.state_dict()).keys() == dict(from_script.state_dict()).keys()


def test_one_program_serves_its_mode_and_the_other_raises():
    models = members(Cnn, 2)
    x = torch.randn(2, 4, 3, 8, 8)
    train_only = [torch.export.export(m.train(), (x[0],)) for m in models]
    fused = hfta.fuse(train_only)
    fused.train()
    for b, model in enumerate(copy.deepcopy(models)):
        torch.testing.assert_close(fused(x)[b], model.train()(x[b]), rtol=TOLERANCE, atol=TOLERANCE)
    fused.eval()
    with pytest.raises(Exception, match="exported in training mode only"):
        fused(x)
    # No operator of the MLP depends on the mode: its one program serves both.
    mlps = members(Mlp, 2)
    fused = hfta.fuse([torch.export.export(m.eval(), (torch.randn(4, 24),)) for m in mlps]).train()
    y = torch.randn(2, 4, 24)
    for b, model in enumerate(mlps):
        torch.testing.assert_close(fused(y)[b], model(y[b]), rtol=TOLERANCE, atol=TOLERANCE)


class Branchy(nn.Module):
    """torch.cond on a value of the member's own data, a while_loop, and a
    block under torch.no_grad(): the higher-order operators export emits."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 20)
        self.head = nn.Linear(20, 20)

    def forward(self, x):
        h = self.fc(x)
        with torch.no_grad():
            scale = h.abs().mean() + 1.0
        h = torch.cond(h.sum() > 0, lambda t: t * 2.0, lambda t: t - 1.0, (h,))
        count, h = torch._higher_order_ops.while_loop(
            lambda i, t: i < 3, lambda i, t: (i + 1, torch.tanh(self.head(t))), (torch.tensor(0), h))
        return h / scale + count


def test_higher_order_operators_run_per_member_or_fuse_and_match():
    models = members(Branchy, 3)
    x = torch.randn(3, 4, 24)
    fused, report = hfta.fuse([torch.export.export(m, (x[0],)) for m in models], report=True)
    # The condition is each member's own: the branch runs per member.
    assert any(f["node"] == "prim::If" for f in report.fallbacks)
    out = fused(x)
    out.sum().backward()
    for b, model in enumerate(models):
        own = model(x[b])
        torch.testing.assert_close(out[b], own, rtol=TOLERANCE, atol=TOLERANCE)
        own.sum().backward()
        grads = dict(hfta.split(fused, b).named_parameters())  # values only; gradients from the fused tensors
        for name, p in model.named_parameters():
            torch.testing.assert_close(dict(fused.named_parameters())[name].grad[b], p.grad, rtol=TOLERANCE,
                                       atol=TOLERANCE, msg=lambda m: f"member {b}, {name}: {m}")
        assert grads.keys() == dict(model.named_parameters()).keys()


@torch.library.custom_op("hfta_test::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, factor: float) -> None:
    x.mul_(factor)


class Mutating(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 20)

    def forward(self, x):
        y = self.fc(x).clone()
        scale_(y, 2.0)
        return y


def test_a_functionalized_program_is_refused_by_name():
    model = Mutating()
    program = torch.export.export(model, (torch.randn(4, 24),)).run_decompositions()
    with pytest.raises(hfta.FusionError, match="auto_functionalized"):
        hfta.fuse([program, program])


class Heads(NamedTuple):
    logits: torch.Tensor
    features: torch.Tensor


class TwoHeads(nn.Module):
    """Returns a namedtuple (torchvision's GoogLeNet does in training); with
    `eval_logits_only`, only the logits in eval mode, as GoogLeNet does."""

    def __init__(self, eval_logits_only=False):
        super().__init__()
        self.fc = nn.Linear(24, 20)
        self.head = nn.Linear(20, 10)
        self.eval_logits_only = eval_logits_only

    def forward(self, x):
        features = F.relu(self.fc(x))
        if self.eval_logits_only and not self.training:
            return self.head(features)
        return Heads(self.head(features), features)


def test_a_namedtuple_output_is_a_tuple_of_the_fused_members():
    models = members(TwoHeads, 2)
    x = torch.randn(2, 4, 24)
    fused = hfta.fuse(models, example_inputs=(x[0],))
    logits, features = fused(x)
    for b, model in enumerate(models):
        own = model(x[b])
        torch.testing.assert_close(logits[b], own.logits, rtol=TOLERANCE, atol=TOLERANCE)
        torch.testing.assert_close(features[b], own.features, rtol=TOLERANCE, atol=TOLERANCE)


def test_modes_that_return_different_structures_are_refused():
    models = members(lambda: TwoHeads(eval_logits_only=True), 2)
    with pytest.raises(hfta.FusionError, match=r"differently structured results \(a collections.namedtuple of 2 "
                                               r"in training, a tensor in evaluation\)"):
        hfta.fuse(models, example_inputs=(torch.randn(4, 24),))
