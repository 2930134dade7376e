"""hfta.optim.lr_scheduler against torch.optim.lr_scheduler on each member
alone, with the member's own settings: the learning rates of every epoch
and the parameters they trained."""
import pytest
import torch
import torch.nn.functional as F

import hfta
from conftest import Mlp, assert_member_matches, members

B = 3
EPOCHS = 12
LRS = [0.1, 0.05, 0.02]
# name: (settings, with lists per member; steps per epoch)
CASES = {
    "StepLR": dict(step_size=[2, 3, 5], gamma=[0.5, 0.1, 0.9]),
    "MultiStepLR": dict(milestones=[2, 5, 9], gamma=[0.5, 0.1, 0.9]),
    "ExponentialLR": dict(gamma=[0.9, 0.8, 0.95]),
    "CosineAnnealingLR": dict(T_max=[4, 8, 12], eta_min=[0.0, 1e-3, 1e-2]),
    "LinearLR": dict(start_factor=[0.25, 0.5, 0.1], end_factor=[1.0, 0.8, 0.5], total_iters=[3, 5, 10]),
    "OneCycleLR": dict(max_lr=[0.5, 0.2, 0.1], total_steps=EPOCHS + 1, pct_start=[0.3, 0.25, 0.5],
                       div_factor=[25.0, 10.0, 5.0], final_div_factor=[1e4, 1e3, 1e2]),
}


def member_settings(settings, b):
    return {k: (v[b] if isinstance(v, list) and k != "milestones" else v) for k, v in settings.items()}


def batch(step):
    generator = torch.Generator().manual_seed(step)
    return torch.randn(8, 24, generator=generator), torch.randint(0, 10, (8,), generator=generator)


def train_epoch(epoch, fused, opt, scheduler, models, alone_opts, alone):
    """One step of the fused array and of each member alone, then each one's schedule."""
    x, y = batch(epoch)
    opt.zero_grad()
    hfta.losses(fused(x), y).sum().backward()
    opt.step()
    scheduler.step()
    for model, o, s in zip(models, alone_opts, alone):
        o.zero_grad()
        F.cross_entropy(model(x), y).backward()
        o.step()
        s.step()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_each_member_follows_its_own_schedule(case, optimizer):
    settings = CASES[case]
    models = members(Mlp, B)
    fused = hfta.fuse(models, shared_input=True)
    extra = dict(momentum=[0.9, 0.8, 0.7]) if optimizer == "SGD" else {}
    opt = getattr(hfta.optim, optimizer)(fused.parameters(), lr=LRS, **extra)
    scheduler = getattr(hfta.optim.lr_scheduler, case)(opt, **settings)
    alone_opts = [getattr(torch.optim, optimizer)(m.parameters(), lr=LRS[b], **member_settings(extra, b))
                  for b, m in enumerate(models)]
    alone = [getattr(torch.optim.lr_scheduler, case)(o, **member_settings(settings, b))
             for b, o in enumerate(alone_opts)]
    for epoch in range(EPOCHS):
        train_epoch(epoch, fused, opt, scheduler, models, alone_opts, alone)
        want = [s.get_last_lr()[0] for s in alone]
        # Closed forms (C++) against torch's chained products: a few roundings apart.
        assert scheduler.get_last_lr()[0] == pytest.approx(want, rel=1e-12), f"epoch {epoch}"
        assert opt.param_groups[0]["lr"] == pytest.approx(want, rel=1e-12)
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)


def test_plateau_takes_one_metric_per_member():
    models = members(Mlp, B)
    fused = hfta.fuse(models, shared_input=True)
    opt = hfta.optim.SGD(fused.parameters(), lr=LRS)
    settings = dict(factor=[0.5, 0.1, 0.2], patience=[0, 1, 2], threshold=1e-3, cooldown=[0, 1, 0])
    plateau = hfta.optim.lr_scheduler.ReduceLROnPlateau(opt, **settings)
    alone = [torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD(m.parameters(), lr=LRS[b]),
                                                        **member_settings(settings, b))
             for b, m in enumerate(models)]
    metrics = [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.9, 2.5, 3.0], [0.95, 2.4, 2.0], [0.95, 2.4, 2.0],
               [0.5, 2.4, 2.0], [0.5, 2.4, 2.0]]
    for values in metrics:
        plateau.step(torch.tensor(values))
        for s, v in zip(alone, values):
            s.step(v)
        assert opt.param_groups[0]["lr"] == pytest.approx([s.optimizer.param_groups[0]["lr"] for s in alone],
                                                          rel=1e-12)


def test_state_dict_resumes_the_schedule():
    fused = hfta.fuse(members(Mlp, B), shared_input=True)
    opt = hfta.optim.SGD(fused.parameters(), lr=LRS)
    scheduler = hfta.optim.lr_scheduler.StepLR(opt, step_size=[1, 2, 3], gamma=0.5)
    for _ in range(4):
        scheduler.step()
    saved = scheduler.state_dict()
    other = hfta.optim.SGD(hfta.fuse(members(Mlp, B)).parameters(), lr=LRS)
    resumed = hfta.optim.lr_scheduler.StepLR(other, step_size=[1, 2, 3], gamma=0.5)
    resumed.load_state_dict(saved)
    for _ in range(3):
        scheduler.step()
        resumed.step()
        assert resumed.get_last_lr() == scheduler.get_last_lr()
    assert resumed.last_epoch == scheduler.last_epoch == 7


def test_a_setting_of_the_wrong_length_is_a_value_error():
    opt = hfta.optim.SGD(hfta.fuse(members(Mlp, B)).parameters(), lr=LRS)
    with pytest.raises(ValueError, match=r"gamma takes one number or a list of 3"):
        hfta.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=[0.1, 0.2])
    with pytest.raises(TypeError, match="hfta.optim"):
        hfta.optim.lr_scheduler.StepLR(torch.optim.SGD([torch.zeros(1, requires_grad=True)]), step_size=2)


@pytest.mark.parametrize("case", ["StepLR", "CosineAnnealingLR", "OneCycleLR"])
def test_taking_members_keeps_their_schedules(case):
    """hfta.take with a scheduler: the members kept go on with their own
    schedule where it was, as they would alone."""
    settings = CASES[case]
    models = members(Mlp, B)
    fused = hfta.fuse(models, shared_input=True)
    opt = hfta.optim.SGD(fused.parameters(), lr=LRS, momentum=0.9)
    scheduler = getattr(hfta.optim.lr_scheduler, case)(opt, **settings)
    alone_opts = [torch.optim.SGD(m.parameters(), lr=LRS[b], momentum=0.9) for b, m in enumerate(models)]
    alone = [getattr(torch.optim.lr_scheduler, case)(o, **member_settings(settings, b))
             for b, o in enumerate(alone_opts)]
    kept = [2, 0]
    for epoch in range(EPOCHS):
        if epoch == 4:
            fused, opt, scheduler = hfta.take(fused, kept, opt, scheduler)
            models, alone_opts, alone = ([seq[b] for b in kept] for seq in (models, alone_opts, alone))
        train_epoch(epoch, fused, opt, scheduler, models, alone_opts, alone)
        assert scheduler.get_last_lr()[0] == pytest.approx([s.get_last_lr()[0] for s in alone], rel=1e-12)
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)
