"""hfta.fuse, hfta.split and the loss helpers, against each member alone."""
import os

import pytest
import torch
import torch.nn.functional as F

import hfta
from conftest import Cnn, Mlp, TOLERANCE, assert_member_matches, members


def test_fused_forward_is_each_members_forward():
    models = members(Cnn, 3)
    fused, report = hfta.fuse(models, shared_input=True, report=True)
    assert hfta.is_fused(fused) and hfta.array_size(fused) == 3
    assert report.array_size == 3 and report.fallbacks == [] and report.fused
    x = torch.randn(6, 3, 8, 8)
    out = fused(x)
    for b, model in enumerate(models):
        torch.testing.assert_close(out[b], model(x), rtol=TOLERANCE, atol=TOLERANCE)


def test_stacked_input_takes_one_batch_per_member():
    models = members(Mlp, 2)
    fused = hfta.fuse([torch.jit.script(m) for m in models])
    x = torch.randn(2, 5, 24)
    out = fused(x)
    for b, model in enumerate(models):
        torch.testing.assert_close(out[b], model(x[b]), rtol=TOLERANCE, atol=TOLERANCE)


def test_paths_fuse_as_hfta_fuse_does(tmp_path):
    models = members(Mlp, 2)
    paths = []
    for b, model in enumerate(models):
        paths.append(str(tmp_path / f"m{b}.pt"))
        torch.jit.save(torch.jit.script(model), paths[-1])
    fused = hfta.fuse(paths)
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)
    # The fused module saves and loads as a plain TorchScript module.
    torch.jit.save(fused, str(tmp_path / "fused.pt"))
    again = torch.jit.load(str(tmp_path / "fused.pt"))
    x = torch.randn(2, 3, 24)
    torch.testing.assert_close(again(x), fused(x))


def test_split_gives_back_a_plain_module_with_the_trained_weights():
    models = members(Mlp, 3)
    fused = hfta.fuse(models)
    with torch.no_grad():
        for p in fused.parameters():
            p.mul_(2)
    for b, model in enumerate(models):
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(2)
        member = hfta.split(fused, b)
        assert not hfta.is_fused(member)
        assert_member_matches(fused, b, model)


def test_members_that_differ_name_the_member_and_the_tensor():
    with pytest.raises(hfta.FusionError, match=r"model 1 .* does not match model 0 .*fc1\.weight"):
        hfta.fuse([Mlp(40), Mlp(41)])
    assert issubclass(hfta.FusionError, ValueError)


def test_a_missing_file_is_named_and_nothing_is_written(tmp_path):
    present = tmp_path / "m0.pt"
    torch.jit.save(torch.jit.script(Mlp()), str(present))
    before = sorted(os.listdir(tmp_path))
    missing = tmp_path / "m1.pt"
    with pytest.raises(ValueError, match=r"model 1 \(.*m1\.pt\): no such file"):
        hfta.fuse([str(present), str(missing)])
    assert sorted(os.listdir(tmp_path)) == before


def test_bad_arguments_are_value_errors():
    with pytest.raises(hfta.FusionError, match="no models"):
        hfta.fuse([])
    with pytest.raises(hfta.FusionError, match="mix"):
        hfta.fuse([Mlp(), "m.pt"])
    with pytest.raises(hfta.FusionError, match="out of range"):
        hfta.split(hfta.fuse(members(Mlp, 2)), 2)


def test_losses_are_each_members_own():
    models = members(Mlp, 3)
    fused = hfta.fuse(models, shared_input=True)
    x, y = torch.randn(7, 24), torch.randint(0, 10, (7,))
    out = fused(x)
    losses = hfta.losses(out, y)
    accuracies = hfta.accuracies(out, y)
    for b, model in enumerate(models):
        torch.testing.assert_close(losses[b], F.cross_entropy(model(x), y), rtol=TOLERANCE, atol=TOLERANCE)
        assert accuracies[b].item() == pytest.approx((model(x).argmax(-1) == y).double().mean().item())
    targets = torch.randn(3, 7, 10)
    mse = hfta.losses(out, targets, F.mse_loss, per_member_targets=True)
    for b, model in enumerate(models):
        torch.testing.assert_close(mse[b], F.mse_loss(model(x), targets[b]), rtol=TOLERANCE, atol=TOLERANCE)
