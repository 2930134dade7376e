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


class _Scheduler:
    """One C++ scheduler per parameter group, each made by _make() from the
    settings: those in `per_member` hold B values, the others are shared."""

    def __init__(self, optimizer, per_member, shared=None):
        if not isinstance(optimizer, _FusedOptimizer):
            raise TypeError(f"hfta's schedulers drive hfta.optim's optimizers, not a {type(optimizer).__name__}")
        optimizer._sync()  # the rates the user set are where the schedule starts
        self.optimizer = optimizer
        members = optimizer.array_size
        self._per_member = {name: _per_member(name, value, members) for name, value in per_member.items()}
        self._shared = dict(shared or {})
        self._schedulers = [self._make(fused) for fused in optimizer._fused]
        optimizer._adopt()

    def _make(self, fused):
        raise NotImplementedError

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

    def _taken(self, optimizer, members):
        """hfta.take's scheduler: this one's settings and state of the members
        taken, over their new optimizer."""
        made = object.__new__(type(self))
        made.optimizer = optimizer
        made._per_member = {k: [v[b] for b in members] for k, v in self._per_member.items()}
        made._shared = self._shared
        made._schedulers = [made._make(fused) for fused in optimizer._fused]
        for old, new in zip(self._schedulers, made._schedulers):
            new.load_state_dict(_C.optim.gather_scheduler_states([(old.state_dict(), b) for b in members]))
        optimizer._adopt()
        return made


class StepLR(_Scheduler):
    def __init__(self, optimizer, step_size, gamma=0.1):
        super().__init__(optimizer, dict(step_size=step_size, gamma=gamma))

    def _make(self, o):
        return _C.optim.step_lr(o, self._per_member["step_size"], self._per_member["gamma"])


class MultiStepLR(_Scheduler):
    """`milestones` (epochs) are shared by all members; gamma is per member."""

    def __init__(self, optimizer, milestones, gamma=0.1):
        super().__init__(optimizer, dict(gamma=gamma), dict(milestones=sorted(int(m) for m in milestones)))

    def _make(self, o):
        return _C.optim.multi_step_lr(o, self._shared["milestones"], self._per_member["gamma"])


class ExponentialLR(_Scheduler):
    def __init__(self, optimizer, gamma):
        super().__init__(optimizer, dict(gamma=gamma))

    def _make(self, o):
        return _C.optim.exponential_lr(o, self._per_member["gamma"])


class CosineAnnealingLR(_Scheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0):
        super().__init__(optimizer, dict(T_max=T_max, eta_min=eta_min))

    def _make(self, o):
        return _C.optim.cosine_annealing_lr(o, self._per_member["T_max"], self._per_member["eta_min"])


class LinearLR(_Scheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5):
        super().__init__(optimizer, dict(start_factor=start_factor, end_factor=end_factor, total_iters=total_iters))

    def _make(self, o):
        s = self._per_member
        return _C.optim.linear_lr(o, s["start_factor"], s["end_factor"], s["total_iters"])


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
        super().__init__(optimizer, dict(max_lr=max_lr, pct_start=pct_start, base_momentum=base_momentum,
                                         max_momentum=max_momentum, div_factor=div_factor,
                                         final_div_factor=final_div_factor),
                         dict(total_steps=int(total_steps), anneal_strategy=anneal_strategy,
                              cycle_momentum=bool(cycle_momentum)))

    def _make(self, o):
        s, shared = self._per_member, self._shared
        return _C.optim.one_cycle_lr(o, s["max_lr"], shared["total_steps"], s["pct_start"], shared["anneal_strategy"],
                                     shared["cycle_momentum"], s["base_momentum"], s["max_momentum"],
                                     s["div_factor"], s["final_div_factor"])


class ReduceLROnPlateau(_Scheduler):
    """Each member's rate drops by its factor when its own metric has not
    improved for `patience` epochs: step(metrics) takes one metric per
    member (a list or a [B] tensor, e.g. hfta.losses on held-out data)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0.0, eps=1e-8):
        super().__init__(optimizer, dict(factor=factor, patience=patience, threshold=threshold, cooldown=cooldown,
                                         min_lr=min_lr),
                         dict(mode=mode, threshold_mode=threshold_mode, eps=float(eps)))

    def _make(self, o):
        s, shared = self._per_member, self._shared
        return _C.optim.ReduceLROnPlateau(o, shared["mode"], s["factor"], s["patience"], s["threshold"],
                                          shared["threshold_mode"], s["cooldown"], s["min_lr"], shared["eps"])

    def step(self, metrics):
        values = _per_member("metrics", metrics, self.optimizer.array_size)
        for scheduler in self._schedulers:
            scheduler.step(values)
        self.optimizer._adopt()

    def get_last_lr(self):
        return [list(group["lr"]) if isinstance(group["lr"], list) else [group["lr"]] * self.optimizer.array_size
                for group in self.optimizer.param_groups]

    @property
    def last_epoch(self):
        raise AttributeError("ReduceLROnPlateau counts no epochs")
