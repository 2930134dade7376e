"""hfta.optim's fused optimizers against torch.optim's, each member trained
alone with its own settings, in float64."""
import io

import pytest
import torch
import torch.nn.functional as F

import hfta
from conftest import Cnn, Mlp, assert_member_matches, members

B = 3
# Each optimizer with settings that differ per member (lists) and some
# shared (numbers), and the torch.optim settings member b gets alone.
CASES = {
    "SGD": (dict(lr=[0.01, 0.05, 0.1], momentum=[0.0, 0.9, 0.5], weight_decay=[0.0, 1e-3, 1e-2],
                 dampening=0.1, nesterov=False), torch.optim.SGD),
    "SGD-nesterov": (dict(lr=0.05, momentum=[0.9, 0.8, 0.7], nesterov=True), torch.optim.SGD),
    "Adam": (dict(lr=[1e-3, 5e-3, 2e-2], betas=[(0.9, 0.999), (0.8, 0.99), (0.95, 0.9)], eps=1e-8,
                  weight_decay=[0.0, 1e-2, 0.1], amsgrad=[False, True, False]), torch.optim.Adam),
    "AdamW": (dict(lr=[1e-3, 5e-3, 2e-2], weight_decay=[0.0, 1e-2, 0.1]), torch.optim.AdamW),
    "Adagrad": (dict(lr=[0.01, 0.05, 0.1], lr_decay=[0.0, 0.01, 0.1], initial_accumulator_value=[0.0, 0.1, 0.5],
                     weight_decay=1e-3), torch.optim.Adagrad),
    "RMSprop": (dict(lr=[1e-3, 5e-3, 1e-2], alpha=[0.99, 0.9, 0.8], momentum=[0.0, 0.5, 0.9],
                     centered=[False, True, True], weight_decay=[0.0, 1e-3, 1e-2]), torch.optim.RMSprop),
    "Adadelta": (dict(lr=[1.0, 0.5, 0.1], rho=[0.9, 0.8, 0.95], weight_decay=[0.0, 1e-3, 1e-2]),
                 torch.optim.Adadelta),
}


def member_settings(settings, b):
    """Member b's settings of `settings` (a list's element b, a number as it is)."""
    return {k: (v[b] if isinstance(v, list) else v) for k, v in settings.items()}


def hfta_class(case):
    return getattr(hfta.optim, case.split("-")[0])


def train_both(make, case, steps, fused=None, models=None, optimizer=None, alone=None):
    settings, torch_class = CASES[case]
    if models is None:
        models = members(make, B)
        fused = hfta.fuse(models, shared_input=True)
        optimizer = hfta_class(case)(fused.parameters(), **settings)
        alone = [torch_class(m.parameters(), **member_settings(settings, b)) for b, m in enumerate(models)]
    generator = torch.Generator().manual_seed(steps)
    for _ in range(steps):
        x = torch.randn(8, *((3, 8, 8) if make is Cnn else (24,)), generator=generator)
        y = torch.randint(0, 10, (8,), generator=generator)
        optimizer.zero_grad()
        hfta.losses(fused(x), y).sum().backward()
        optimizer.step()
        for model, opt in zip(models, alone):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    return fused, models, optimizer, alone


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_member_steps_as_it_would_alone(case):
    fused, models, _, _ = train_both(Mlp, case, steps=6)
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)


@pytest.mark.parametrize("case", ["SGD", "Adam"])
def test_a_cnn_with_batch_norm(case):
    fused, models, _, _ = train_both(Cnn, case, steps=4)
    for b, model in enumerate(models):  # parameters and running statistics
        assert_member_matches(fused, b, model)


@pytest.mark.parametrize("case", ["SGD", "Adam", "Adagrad", "RMSprop", "Adadelta"])
def test_state_dict_round_trip_mid_run(case):
    settings, _ = CASES[case]
    fused, models, optimizer, alone = train_both(Mlp, case, steps=3)
    saved = io.BytesIO()
    torch.save(optimizer.state_dict(), saved)
    # A fresh optimizer over a copy of the fused module goes on from the state.
    module = io.BytesIO()
    torch.jit.save(fused, module)
    module.seek(0)
    resumed_module = torch.jit.load(module)
    resumed = hfta_class(case)(resumed_module.parameters(), **{k: 0.5 if k == "lr" else v
                                                                 for k, v in settings.items()})
    saved.seek(0)
    resumed.load_state_dict(torch.load(saved, weights_only=True))
    assert resumed.param_groups[0]["lr"] == settings["lr"]
    train_both(Mlp, case, 3, resumed_module, models, resumed, alone)
    for b, model in enumerate(models):
        assert_member_matches(resumed_module, b, model)


def test_a_learning_rate_changed_between_steps_is_used():
    fused, models, optimizer, alone = train_both(Mlp, "SGD", steps=2)
    optimizer.param_groups[0]["lr"] = [0.2, 0.02, 0.002]
    for b, opt in enumerate(alone):
        opt.param_groups[0]["lr"] = [0.2, 0.02, 0.002][b]
    train_both(Mlp, "SGD", 2, fused, models, optimizer, alone)
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)


def test_parameter_groups_each_with_their_settings():
    models = members(Mlp, B)
    fused = hfta.fuse(models, shared_input=True)
    first, second = fused.fc1, fused.fc2
    optimizer = hfta.optim.Adam([{"params": first.parameters(), "lr": [1e-3, 2e-3, 3e-3]},
                                 {"params": second.parameters()}], lr=1e-2)
    alone = [torch.optim.Adam([{"params": m.fc1.parameters(), "lr": [1e-3, 2e-3, 3e-3][b]},
                               {"params": m.fc2.parameters()}], lr=1e-2) for b, m in enumerate(models)]
    train_both(Mlp, "Adam", 3, fused, models, optimizer, alone)
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)


def test_clipping_per_member():
    models = members(Mlp, B)
    fused = hfta.fuse(models, shared_input=True)
    x, y = torch.randn(8, 24), torch.randint(0, 10, (8,))
    hfta.losses(fused(x), y).sum().backward()
    norms = hfta.optim.clip_grad_norm_(fused.parameters(), [0.1, 1.0, 100.0])
    for b, model in enumerate(models):
        F.cross_entropy(model(x), y).backward()
        torch.testing.assert_close(norms[b], torch.nn.utils.clip_grad_norm_(model.parameters(), [0.1, 1.0, 100.0][b]),
                                   rtol=1e-10, atol=1e-10)
        member_grads = [p.grad[b] for p in fused.parameters()]
        for got, p in zip(member_grads, model.parameters()):
            torch.testing.assert_close(got, p.grad, rtol=1e-10, atol=1e-10)


def test_bad_settings_are_value_errors_naming_the_setting():
    fused = hfta.fuse(members(Mlp, B))
    with pytest.raises(ValueError, match=r"lr takes one number or a list of 3"):
        hfta.optim.SGD(fused.parameters(), lr=[0.1, 0.2])
    with pytest.raises(ValueError, match=r"betas takes one pair or a list of 3"):
        hfta.optim.Adam(fused.parameters(), betas=[(0.9, 0.99)] * 2)
    with pytest.raises(ValueError, match=r"lr"):
        hfta.optim.SGD(fused.parameters(), lr=[0.1, -0.2, 0.3])
    with pytest.raises(ValueError, match="leading"):
        hfta.optim.SGD([torch.zeros(3, 2, requires_grad=True), torch.zeros(4, requires_grad=True)])


@pytest.mark.parametrize("case", ["SGD", "Adam", "RMSprop"])
def test_taking_members_keeps_their_weights_settings_and_state(case):
    """hfta.take: an array that sheds member 1 (and reorders the rest) goes
    on as those members would alone."""
    fused, models, optimizer, alone = train_both(Mlp, case, steps=3)
    kept = [2, 0]
    taken, taken_optimizer = hfta.take(fused, kept, optimizer)
    assert hfta.array_size(taken) == 2 and taken_optimizer.array_size == 2
    settings, _ = CASES[case]
    assert taken_optimizer.param_groups[0]["lr"] == [settings["lr"][b] for b in kept]
    models, alone = [models[b] for b in kept], [alone[b] for b in kept]
    train_both(Mlp, case, 3, taken, models, taken_optimizer, alone)
    for b, model in enumerate(models):
        assert_member_matches(taken, b, model)
