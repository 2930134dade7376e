"""hfta.amp.GradScaler against torch.amp.GradScaler on each member alone:
each member's scale, its skipped steps and its parameters, with overflows
made in one member at a time."""
import pytest
import torch

import hfta
from conftest import Mlp, assert_member_matches, members

B = 3
SETTINGS = dict(init_scale=[2.0**8, 2.0**4, 2.0**10], growth_factor=[2.0, 4.0, 2.0], backoff_factor=[0.5, 0.25, 0.5],
                growth_interval=[2, 3, 1])
# step -> the member whose loss overflows (times 1e308: its scaled gradients are inf).
OVERFLOWS = {2: 1, 3: 1, 5: 0, 6: 2}


def member_settings(b):
    return {k: v[b] for k, v in SETTINGS.items()}


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_each_member_scales_and_skips_as_it_would_alone(optimizer):
    models = members(Mlp, B)
    fused = hfta.fuse(models, shared_input=True)
    opt = getattr(hfta.optim, optimizer)(fused.parameters(), lr=[0.05, 0.02, 0.01])
    scaler = hfta.amp.GradScaler("cpu", **SETTINGS)
    alone_opts = [getattr(torch.optim, optimizer)(m.parameters(), lr=[0.05, 0.02, 0.01][b])
                  for b, m in enumerate(models)]
    alone = [torch.amp.GradScaler("cpu", **member_settings(b)) for b in range(B)]
    for step in range(8):
        generator = torch.Generator().manual_seed(step)
        x, y = torch.randn(8, 24, generator=generator), torch.randint(0, 10, (8,), generator=generator)
        blow_up = torch.ones(B)
        if step in OVERFLOWS:
            blow_up[OVERFLOWS[step]] = 1e308
        opt.zero_grad()
        scaler.scale(hfta.losses(fused(x), y) * blow_up).sum().backward()
        scaler.unscale_(opt)
        hfta.optim.clip_grad_norm_(fused.parameters(), 1.0)  # on the unscaled gradients
        scaler.step(opt)
        found = scaler.found_inf()
        scaler.update()
        for b, (model, o, s) in enumerate(zip(models, alone_opts, alone)):
            o.zero_grad()
            s.scale(torch.nn.functional.cross_entropy(model(x), y) * blow_up[b]).backward()
            s.unscale_(o)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            s.step(o)
            s.update()
            assert found[b] == (step in OVERFLOWS and OVERFLOWS[step] == b)
        assert scaler.get_scale() == [s.get_scale() for s in alone], f"step {step}"
    for b, model in enumerate(models):
        assert_member_matches(fused, b, model)


def test_state_dict_and_disabled():
    fused = hfta.fuse(members(Mlp, B), shared_input=True)
    opt = hfta.optim.SGD(fused.parameters(), lr=0.1)
    scaler = hfta.amp.GradScaler("cpu", init_scale=16.0, growth_interval=1)
    for _ in range(2):
        opt.zero_grad()
        scaler.scale(hfta.losses(fused(torch.randn(4, 24)), torch.randint(0, 10, (4,)))).sum().backward()
        scaler.step(opt)
        scaler.update()
    again = hfta.amp.GradScaler("cpu")
    again.load_state_dict(scaler.state_dict())
    assert again.get_scale() == scaler.get_scale() == [64.0] * B
    off = hfta.amp.GradScaler("cpu", enabled=False)
    losses = torch.ones(B)
    assert off.scale(losses) is losses and off.get_scale() == 1.0
    with pytest.raises(ValueError, match="init_scale takes one number or a list of 3"):
        hfta.amp.GradScaler("cpu", init_scale=[1.0, 2.0]).scale(losses)
