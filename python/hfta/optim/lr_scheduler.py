"""Learning-rate schedules with per-member settings: member b's learning
rate follows the schedule torch.optim.lr_scheduler would give it alone,
with its own values (each setting a number or one per member). The C++
schedulers of runtime/optim do the arithmetic, one per parameter group;
they write the rates into the optimizer's param_groups.

    opt = hfta.optim.SGD(fused.parameters(), lr=[0.1, 0.05])
    sched = hfta.optim.lr_scheduler.StepLR(opt, step_size=[10, 5], gamma=0.5)
    for epoch in range(epochs):
        train(...)                      # opt.step() per batch
        sched.step()
"""
from .. import _C
from . import _FusedOptimizer, _per_member

__all__ = ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "OneCycleLR",
           "ReduceLROnPlateau"]


def _check_optimizer(optimizer):
    if not isinstance(optimizer, _FusedOptimizer):
        raise TypeError(f"hfta's schedulers drive hfta.optim's optimizers, not a {type(optimizer).__name__}")
    optimizer._sync()  # the rates the user set are where the schedule starts


class _Scheduler:
    """One C++ scheduler per parameter group; made by `make(fused_optimizer)`."""

    def __init__(self, optimizer, make):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        self._schedulers = [make(fused) for fused in optimizer._fused]
        optimizer._adopt()

    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self.optimizer._adopt()

    def get_last_lr(self):
        """Each group's B learning rates set by the last step."""
        return [list(s.last_lr()) for s in self._schedulers]

    @property
    def last_epoch(self):
        return self._schedulers[0].last_epoch

    def state_dict(self):
        return {"hfta": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict):
        states = state_dict.get("hfta", [])
        if len(states) != len(self._schedulers):
            raise ValueError("this state dict is not one of this scheduler (or has another number of groups)")
        for scheduler, state in zip(self._schedulers, states):
            scheduler.load_state_dict(state)
        self.optimizer._adopt()


def _members(optimizer, **settings):
    """Each setting as B values (the optimizer's members)."""
    _check_optimizer(optimizer)
    return {name: _per_member(name, value, optimizer.array_size) for name, value in settings.items()}


class StepLR(_Scheduler):
    def __init__(self, optimizer, step_size, gamma=0.1):
        s = _members(optimizer, step_size=step_size, gamma=gamma)
        super().__init__(optimizer, lambda o: _C.optim.step_lr(o, s["step_size"], s["gamma"]))


class MultiStepLR(_Scheduler):
    """`milestones` (epochs) are shared by all members; gamma is per member."""

    def __init__(self, optimizer, milestones, gamma=0.1):
        s = _members(optimizer, gamma=gamma)
        milestones = sorted(int(m) for m in milestones)
        super().__init__(optimizer, lambda o: _C.optim.multi_step_lr(o, milestones, s["gamma"]))


class ExponentialLR(_Scheduler):
    def __init__(self, optimizer, gamma):
        s = _members(optimizer, gamma=gamma)
        super().__init__(optimizer, lambda o: _C.optim.exponential_lr(o, s["gamma"]))


class CosineAnnealingLR(_Scheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0):
        s = _members(optimizer, T_max=T_max, eta_min=eta_min)
        super().__init__(optimizer, lambda o: _C.optim.cosine_annealing_lr(o, s["T_max"], s["eta_min"]))


class LinearLR(_Scheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5):
        s = _members(optimizer, start_factor=start_factor, end_factor=end_factor, total_iters=total_iters)
        super().__init__(optimizer, lambda o: _C.optim.linear_lr(o, s["start_factor"], s["end_factor"],
                                                                  s["total_iters"]))


class OneCycleLR(_Scheduler):
    """Stepped after every batch. total_steps, or epochs and steps_per_epoch,
    as torch's; momentum cycles SGD's and RMSprop's momentum, Adam's beta1."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR needs total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        s = _members(optimizer, max_lr=max_lr, pct_start=pct_start, base_momentum=base_momentum,
                     max_momentum=max_momentum, div_factor=div_factor, final_div_factor=final_div_factor)
        super().__init__(optimizer, lambda o: _C.optim.one_cycle_lr(
            o, s["max_lr"], int(total_steps), s["pct_start"], anneal_strategy, bool(cycle_momentum),
            s["base_momentum"], s["max_momentum"], s["div_factor"], s["final_div_factor"]))


class ReduceLROnPlateau:
    """Each member's rate drops by its factor when its own metric has not
    improved for `patience` epochs: step(metrics) takes one metric per
    member (a list or a [B] tensor, e.g. hfta.losses on held-out data)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0.0, eps=1e-8):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        s = _members(optimizer, factor=factor, patience=patience, threshold=threshold, cooldown=cooldown,
                     min_lr=min_lr)
        self._schedulers = [_C.optim.ReduceLROnPlateau(o, mode, s["factor"], s["patience"], s["threshold"],
                                                       threshold_mode, s["cooldown"], s["min_lr"], float(eps))
                            for o in optimizer._fused]

    def step(self, metrics):
        values = _per_member("metrics", metrics, self.optimizer.array_size)
        for scheduler in self._schedulers:
            scheduler.step(values)
        self.optimizer._adopt()

    def state_dict(self):
        return {"hfta": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict):
        for scheduler, state in zip(self._schedulers, state_dict["hfta"]):
            scheduler.load_state_dict(state)
