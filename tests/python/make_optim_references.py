"""PyTorch's answers for what LibTorch cannot check: Adadelta (LibTorch has
no Adadelta) and the learning-rate schedulers, each member run alone with
torch.optim, written to OUT_DIR/optim_reference.pt:

  adadelta_{init,grads,trained}: per parameter ("p0", "p1"); adadelta_hyper
  <scheduler>: lr [epochs + 1, B] (after construction, then after each
      step); onecycle also momentum; plateau also the metrics it was given
  scaler_<case>_{init,coefs,params,scales,skipped}: torch.amp.GradScaler
      per member (grad_scaler_case)
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


# Per-member loss scaling (FusedGradScaler) against torch.amp.GradScaler
# with each member alone: member b's "loss" is sum(p * c[step][b]) over its
# parameters, so its gradient is c scaled by its own scale. Member 0's
# scale grows every 3 steps until c's huge entries overflow float32
# (natural overflows); member 1 is forced to overflow (an inf in c) at
# FORCED_INF steps, member 2 gets a NaN at FORCED_NAN.
SCALER = dict(init_scale=[2.0 ** 16, 2.0 ** 10, 3000.0], growth_factor=[2.0, 4.0, 2.0],
              backoff_factor=[0.5, 0.25, 0.5], growth_interval=[3, 5, 2000])
FORCED_INF, FORCED_NAN = (4, 5, 17, 30), (10,)


def grad_scaler_case(optimizer, hyper, steps=50, clip=None):
    gen = torch.Generator().manual_seed(13)
    shapes = [(7, 5), (5,)]
    init = [torch.randn((MEMBERS,) + s, generator=gen) for s in shapes]
    coefs = [[torch.randn((MEMBERS,) + s, generator=gen) for s in shapes] for _ in range(steps)]
    for step in range(steps):
        if step % 7 == 3:
            coefs[step][0][0, 0, 0] = 1e33  # member 0: overflows once its scale reaches 2^19
        if step in FORCED_INF:
            coefs[step][1][1, 2] = float("inf")
        if step in FORCED_NAN:
            coefs[step][0][2, 1, 1] = float("nan")
    scales, skipped, params_per_step = [], [], [[] for _ in shapes]
    for b in range(MEMBERS):
        params = [p[b].clone().requires_grad_() for p in init]
        opt = getattr(torch.optim, optimizer)(params, foreach=False, **{k: v[b] for k, v in hyper.items()})
        scaler = torch.amp.GradScaler("cpu", **{k: v[b] for k, v in SCALER.items()})
        member_scales, member_skipped, member_params = [], [], [[] for _ in shapes]
        for step in range(steps):
            opt.zero_grad()
            loss = sum((p * c[b]).sum() for p, c in zip(params, coefs[step]))
            scaler.scale(loss).backward()
            if clip is not None:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(params, clip[b])
            before = scaler.get_scale()
            scaler.step(opt)
            scaler.update()
            member_scales.append(scaler.get_scale())
            member_skipped.append(scaler.get_scale() < before)  # backoff < 1: the scale falls only after a skip
            for i, p in enumerate(params):
                member_params[i].append(p.detach().clone())
        scales.append(member_scales)
        skipped.append(member_skipped)
        for i in range(len(shapes)):
            params_per_step[i].append(torch.stack(member_params[i]))
    return {
        "init": {f"p{i}": p for i, p in enumerate(init)},
        "coefs": {f"p{i}": torch.stack([c[i] for c in coefs]) for i in range(len(shapes))},
        "params": {f"p{i}": torch.stack(p, dim=1) for i, p in enumerate(params_per_step)},  # [steps, B, ...]
        "scales": torch.tensor(scales, dtype=torch.float64).t().contiguous(),  # [steps, B]
        "skipped": torch.tensor(skipped).t().contiguous(),
    }


def grad_scalers():
    cases = {
        "scaler_sgd": grad_scaler_case("SGD", dict(lr=[0.1, 0.05, 0.2], momentum=[0.9, 0.5, 0.0],
                                                   dampening=[0.1, 0.0, 0.0])),
        "scaler_adam": grad_scaler_case("Adam", dict(lr=[1e-2, 1e-3, 5e-3], betas=[(0.9, 0.999), (0.8, 0.99),
                                                                                  (0.9, 0.9)])),
        "scaler_sgd_clipped": grad_scaler_case("SGD", dict(lr=[0.1, 0.05, 0.2], momentum=[0.9, 0.5, 0.0]),
                                               clip=[1.0, 0.5, 2.0]),
    }
    return {f"{name}_{key}": value for name, case in cases.items() for key, value in case.items()}


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
    torch.save({**adadelta(), **schedulers(), **grad_scalers()}, os.path.join(out_dir, "optim_reference.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
