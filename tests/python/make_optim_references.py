"""PyTorch's answers for what LibTorch cannot check: Adadelta (LibTorch has
no Adadelta) and the learning-rate schedulers, each member run alone with
torch.optim, written to OUT_DIR/optim_reference.pt:

  adadelta_{init,grads,trained}: per parameter ("p0", "p1"); adadelta_hyper
  <scheduler>: lr [epochs + 1, B] (after construction, then after each
      step); onecycle also momentum; plateau also the metrics it was given
"""
import os
import sys

import torch

MEMBERS = 3
BASE_LR = [0.1, 0.05, 0.2]
EPOCHS = 25


def adadelta(steps=50):
    gen = torch.Generator().manual_seed(7)
    shapes = [(7, 5), (5,)]
    init = [torch.randn((MEMBERS,) + s, generator=gen) for s in shapes]
    grads = [[torch.randn((MEMBERS,) + s, generator=gen) for s in shapes] for _ in range(steps)]
    hyper = dict(lr=[1.0, 0.5, 2.0], rho=[0.9, 0.8, 0.95], eps=[1e-6, 1e-5, 1e-4], weight_decay=[0.0, 1e-2, 1e-3])
    trained = [[] for _ in shapes]
    for b in range(MEMBERS):
        params = [p[b].clone().requires_grad_() for p in init]
        opt = torch.optim.Adadelta(params, foreach=False, **{k: v[b] for k, v in hyper.items()})
        for step in range(steps):
            for p, g in zip(params, grads[step]):
                p.grad = g[b].clone()
            opt.step()
        for i, p in enumerate(params):
            trained[i].append(p.detach().clone())
    return {
        "adadelta_init": {f"p{i}": p for i, p in enumerate(init)},
        "adadelta_grads": {f"p{i}": torch.stack([g[i] for g in grads]) for i in range(len(shapes))},
        "adadelta_trained": {f"p{i}": torch.stack(t) for i, t in enumerate(trained)},
        "adadelta_hyper": {k: torch.tensor(v, dtype=torch.float64) for k, v in hyper.items()},
    }


def run_schedule(make, epochs=EPOCHS, momentum=0.0, metrics=None):
    """lr (and momentum) of each member alone over the epochs."""
    lrs, momenta = [], []
    for b in range(MEMBERS):
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=BASE_LR[b], momentum=momentum)
        sched = make(opt, b)
        lr, mom = [opt.param_groups[0]["lr"]], [opt.param_groups[0]["momentum"]]
        for epoch in range(epochs):
            opt.step()
            sched.step(metrics[b][epoch]) if metrics is not None else sched.step()
            lr.append(opt.param_groups[0]["lr"])
            mom.append(opt.param_groups[0]["momentum"])
        lrs.append(lr)
        momenta.append(mom)
    return (torch.tensor(lrs, dtype=torch.float64).t().contiguous(),
            torch.tensor(momenta, dtype=torch.float64).t().contiguous())


def schedulers():
    S = torch.optim.lr_scheduler
    out = {}
    out["step"] = {"lr": run_schedule(lambda o, b: S.StepLR(o, [3, 5, 2][b], [0.5, 0.1, 0.9][b]))[0]}
    out["multistep"] = {"lr": run_schedule(lambda o, b: S.MultiStepLR(o, [3, 7, 12], [0.5, 0.1, 0.9][b]))[0]}
    out["exponential"] = {"lr": run_schedule(lambda o, b: S.ExponentialLR(o, [0.9, 0.95, 0.5][b]))[0]}
    out["cosine"] = {"lr": run_schedule(lambda o, b: S.CosineAnnealingLR(o, [10, 7, 20][b], [0.0, 1e-3, 1e-2][b]))[0]}
    out["linear"] = {"lr": run_schedule(
        lambda o, b: S.LinearLR(o, [0.1, 0.5, 1 / 3][b], [1.0, 0.8, 1.0][b], [5, 10, 4][b]))[0]}
    for strategy in ("cos", "linear"):
        lr, mom = run_schedule(lambda o, b: S.OneCycleLR(
            o, max_lr=[1.0, 0.5, 2.0][b], total_steps=20, pct_start=[0.3, 0.25, 0.5][b], anneal_strategy=strategy,
            base_momentum=[0.85, 0.8, 0.85][b], max_momentum=[0.95, 0.9, 0.99][b], div_factor=[25.0, 10.0, 25.0][b],
            final_div_factor=[1e4, 100.0, 1e4][b]), epochs=20, momentum=0.9)
        out[f"onecycle_{strategy}"] = {"lr": lr, "momentum": mom}
    gen = torch.Generator().manual_seed(11)
    # Noisy metrics that improve, stall and improve again, one series per member.
    metrics = (torch.linspace(1.0, 0.2, EPOCHS).repeat(MEMBERS, 1)
               + 0.05 * torch.randn(MEMBERS, EPOCHS, generator=gen)).double()
    metrics[:, 8:16] = metrics[:, 8:9]
    lr, _ = run_schedule(lambda o, b: S.ReduceLROnPlateau(
        o, mode="min", factor=[0.5, 0.1, 0.2][b], patience=[2, 0, 3][b], threshold=[1e-4, 1e-2, 0.0][b],
        cooldown=[0, 1, 2][b], min_lr=[0.0, 1e-3, 0.05][b]), metrics=metrics.tolist())
    out["plateau"] = {"lr": lr, "metrics": metrics.t().contiguous()}
    return out


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    torch.save({**adadelta(), **schedulers()}, os.path.join(out_dir, "optim_reference.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
