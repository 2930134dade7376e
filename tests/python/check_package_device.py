"""The Python package on a device (scripts/gpu_check.sh runs it on CUDA):
members fused on the device, stepped by hfta.optim (the C++ optimizers'
CUDA path) with a per-member schedule and loss scaler, against each member
alone with torch.optim, torch.optim.lr_scheduler and torch.amp.GradScaler
on the same device, in float64 (so the comparison is to rounding: 1e-9).
Then members exported on the CPU (hfta.export: an LSTM, whose initial
state export records as zeros on the CPU, and batch norm), fused, moved to
the device and run in both modes against each member there.

    PYTHONPATH=build/python python tests/python/check_package_device.py --device cuda
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import hfta


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(24, 32, batch_first=True)
        self.bn = nn.BatchNorm1d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(self.bn(out[:, -1]))


def check_exported(device, members):
    """1 if a member of the fused exported module differs from it alone on `device`."""
    models = []
    for b in range(members):
        torch.manual_seed(b)
        models.append(Recurrent())
    fused = hfta.fuse(models, example_inputs=(torch.randn(8, 5, 24),)).to(device)
    alone = [m.to(device) for m in models]
    x = torch.randn(members, 8, 5, 24, device=device)
    worst = 0.0
    for training in (True, False):
        fused.train(training)
        out = fused(x)
        for b, m in enumerate(alone):
            worst = max(worst, (out[b] - m.train(training)(x[b])).abs().max().item())
    ok = worst < 1e-9
    print(f"exported  on {device}: max |fused - alone| {worst:.1e} (train and eval): {'OK' if ok else 'FAILED'}")
    return int(not ok)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--members", type=int, default=4)
    args = parser.parse_args()
    device, members = torch.device(args.device), args.members
    torch.set_default_dtype(torch.float64)
    failures = 0
    for name in ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta"]:
        torch.manual_seed(0)
        models = [nn.Sequential(nn.Linear(24, 40), nn.ReLU(), nn.Linear(40, 10)).to(device) for _ in range(members)]
        alone = copy.deepcopy(models)
        fused = hfta.fuse(models, shared_input=True).to(device)
        lrs = [0.01 * (b + 1) for b in range(members)]
        opt = getattr(hfta.optim, name)(fused.parameters(), lr=lrs)
        sched = hfta.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=[0.5 + 0.1 * b for b in range(members)])
        scaler = hfta.amp.GradScaler(device.type, init_scale=2.0**10, growth_interval=2)
        opts = [getattr(torch.optim, name)(m.parameters(), lr=lrs[b]) for b, m in enumerate(alone)]
        scheds = [torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5 + 0.1 * b) for b, o in enumerate(opts)]
        scalers = [torch.amp.GradScaler(device.type, init_scale=2.0**10, growth_interval=2) for _ in alone]
        for step in range(6):
            x = torch.randn(16, 24, device=device)
            y = torch.randint(0, 10, (16,), device=device)
            blow_up = torch.ones(members, device=device)
            if step == 3:
                blow_up[1] = 1e308  # member 1 overflows: its step alone is skipped
            opt.zero_grad()
            scaler.scale(hfta.losses(fused(x), y) * blow_up).sum().backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            for b, (m, o, s, sc) in enumerate(zip(alone, opts, scheds, scalers)):
                o.zero_grad()
                sc.scale(F.cross_entropy(m(x), y) * blow_up[b]).backward()
                sc.step(o)
                sc.update()
                s.step()
        worst = 0.0
        for b, m in enumerate(alone):
            member = hfta.split(fused, b)
            for got, want in zip(member.parameters(), m.parameters()):
                worst = max(worst, (got - want).abs().max().item())
        ok = worst < 1e-9 and scaler.get_scale() == [s.get_scale() for s in scalers]
        failures += not ok
        print(f"{name:9} on {device}: max |fused - alone| {worst:.1e}, scales {scaler.get_scale()}: "
              f"{'OK' if ok else 'FAILED'}")
    failures += check_exported(device, members)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
