"""Fused optimizers: torch.optim's algorithms over a fused module's
parameters ([B, ...] each), every hyper-parameter one value for all members
or a list with one value per member. Member b's update is exactly the one
torch.optim's optimizer makes for member b alone, with its values; the C++
fused optimizers (runtime/optim) do the work, on the CPU and on CUDA.

    opt = hfta.optim.Adam(fused.parameters(), lr=[1e-3, 1e-2], betas=[(0.9, 0.999), (0.8, 0.99)])

param_groups hold the values as given (a number or a list); change them
between steps (as a scheduler does) and the next step uses them.
"""
import numbers

import torch

from .. import _C

__all__ = ["lr_scheduler", "SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta", "clip_grad_norm_",
           "clip_grad_value_"]


def _per_member(name, value, members):
    """A number or one per member -> B floats; ValueError naming `name` otherwise."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if isinstance(value, (numbers.Real, bool)):
        return [float(value)] * members
    values = list(value)
    if len(values) != members or not all(isinstance(v, (numbers.Real, bool)) for v in values):
        raise ValueError(f"{name} takes one number or a list of {members} (one per member), got {value!r}")
    return [float(v) for v in values]


def _array_size(params, array_size):
    sizes = {p.shape[0] if p.dim() > 0 else None for p in params}
    if array_size is None:
        if len(sizes) != 1 or None in sizes:
            raise ValueError("the parameters do not share one leading (member) dimension: pass array_size=B "
                             "and the fused module's parameters")
        return sizes.pop()
    if sizes - {array_size}:
        raise ValueError(f"array_size={array_size}, but the parameters' leading dimensions are {sorted(sizes)}")
    return array_size


class _FusedOptimizer(torch.optim.Optimizer):
    """One C++ fused optimizer per parameter group, its hyper-parameters
    read from the group before every step."""
    _kind = None  # the C++ optimizer's name (train/optimizers.h)

    def __init__(self, params, defaults, array_size=None):
        super().__init__(params, defaults)
        all_params = [p for group in self.param_groups for p in group["params"]]
        self.array_size = _array_size(all_params, array_size)
        self._fused = []
        self._applied = []  # what each C++ optimizer holds, to set only what changed
        for group in self.param_groups:
            hyper = self._hyper(group)
            self._fused.append(_C.optim.FusedOptimizer(self._kind, list(group["params"]), self.array_size, hyper))
            self._applied.append(hyper)

    def _hyper(self, group):
        """The group's values by the C++ optimizer's names, B each."""
        raise NotImplementedError

    def _sync(self):
        for group, fused, applied in zip(self.param_groups, self._fused, self._applied):
            for key, values in self._hyper(group).items():
                if applied[key] != values:
                    # A learning rate a schedule computed may leave the range a
                    # user's may have (as in torch.optim); the others are checked.
                    (fused.set_scheduled_hyper if key == "lr" else fused.set_hyper)(key, values)
                    applied[key] = values

    def _adopt(self):
        """Takes into param_groups what the C++ optimizers hold after a
        schedule moved it (a learning rate, OneCycleLR's momentum)."""
        for group, fused, applied in zip(self.param_groups, self._fused, self._applied):
            held = fused.hyper()
            changed = {k: v for k, v in held.items() if applied.get(k) != v}
            self._to_group(group, changed)
            applied.update(changed)

    def _to_group(self, group, hyper):
        """Writes C++ values (B each) into the group as its own settings."""
        for key, values in hyper.items():
            group[key] = values

    @torch.no_grad()
    def step(self, closure=None):
        """One step of every member (as torch.optim's step; hfta.amp.GradScaler
        steps the members whose gradients were finite)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._sync()
        for fused in self._fused:
            fused.step()
        return loss

    def state_dict(self):
        groups = []
        for group in self.param_groups:
            groups.append({k: v for k, v in group.items() if k != "params"})
        # The C++ optimizers' own state dicts, as torch::pickle_save wrote
        # them (their lists keep TorchScript's element types, which a trip
        # through Python objects would lose); torch.save stores them as bytes.
        states = [f.state_dict() for f in self._fused]
        return {"state": {}, "param_groups": groups, "hfta": {"array_size": self.array_size, "fused": states}}

    def load_state_dict(self, state_dict):
        saved = state_dict.get("hfta")
        if saved is None or len(saved["fused"]) != len(self._fused):
            raise ValueError("this state dict is not one of this hfta optimizer (or has another number of "
                             "parameter groups)")
        if saved["array_size"] != self.array_size:
            raise ValueError(f"the state dict is of {saved['array_size']} members, this optimizer has "
                             f"{self.array_size}")
        for group, values in zip(self.param_groups, state_dict["param_groups"]):
            group.update(values)
        for fused, state in zip(self._fused, saved["fused"]):
            fused.load_state_dict(state)
        self._applied = [f.hyper() for f in self._fused]
        self._sync()

    def freeze(self, member: int):
        """Stops member `member`'s updates for good (a diverged member)."""
        for fused in self._fused:
            fused.freeze(member)


def _taken(optimizer, fused, taken, members):
    """hfta.take's optimizer: `optimizer`'s groups over `taken`'s parameters
    (found by name in `fused`), each setting and each state of the members
    taken."""
    names = {id(p): name for name, p in fused.named_parameters()}
    new_params = dict(taken.named_parameters())
    groups = []
    for group in optimizer.param_groups:
        settings = {}
        for key, value in group.items():
            if key == "params":
                continue
            is_per_member = isinstance(value, (list, tuple)) and len(value) == optimizer.array_size and not (
                key == "betas" and len(value) == 2 and isinstance(value[0], numbers.Real))
            settings[key] = [value[b] for b in members] if is_per_member else value
        groups.append(dict(settings, params=[new_params[names[id(p)]] for p in group["params"]]))
    made = type(optimizer)(groups, array_size=len(members))
    for old, new in zip(optimizer._fused, made._fused):
        state = old.state_dict()
        new.load_state_dict(_C.optim.gather_state_dicts([(state, b) for b in members]))
    made._applied = [f.hyper() for f in made._fused]
    made._adopt()
    return made


def _betas(group, members):
    betas = group["betas"]
    pairs = [betas] * members if len(betas) == 2 and isinstance(betas[0], numbers.Real) else list(betas)
    if len(pairs) != members or any(len(p) != 2 for p in pairs):
        raise ValueError(f"betas takes one pair or a list of {members} pairs (one per member), got {betas!r}")
    return [float(p[0]) for p in pairs], [float(p[1]) for p in pairs]


def _simple(group, members, names):
    return {name: _per_member(name, group[name], members) for name in names}


class SGD(_FusedOptimizer):
    _kind = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 array_size=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov), array_size)

    def _hyper(self, group):
        return _simple(group, self.array_size, ["lr", "momentum", "dampening", "weight_decay", "nesterov"])


class Adam(_FusedOptimizer):
    _kind = "adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 array_size=None):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad),
                         array_size)

    def _hyper(self, group):
        hyper = _simple(group, self.array_size, ["lr", "eps", "weight_decay", "amsgrad"])
        hyper["beta1"], hyper["beta2"] = _betas(group, self.array_size)
        return hyper

    def _to_group(self, group, hyper):
        betas = {k: hyper.pop(k) for k in ("beta1", "beta2") if k in hyper}
        if betas:
            first, second = _betas(group, self.array_size)
            group["betas"] = list(zip(betas.get("beta1", first), betas.get("beta2", second)))
        super()._to_group(group, hyper)


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW; weight_decay 1e-2 by default)."""
    _kind = "adamw"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 array_size=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, array_size=array_size)


class Adagrad(_FusedOptimizer):
    _kind = "adagrad"

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 *, array_size=None):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps), array_size)

    def _hyper(self, group):
        return _simple(group, self.array_size,
                       ["lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"])


class RMSprop(_FusedOptimizer):
    _kind = "rmsprop"

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, *,
                 array_size=None):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered), array_size)

    def _hyper(self, group):
        return _simple(group, self.array_size, ["lr", "alpha", "eps", "weight_decay", "momentum", "centered"])


class Adadelta(_FusedOptimizer):
    _kind = "adadelta"

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, *, array_size=None):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay), array_size)

    def _hyper(self, group):
        return _simple(group, self.array_size, ["lr", "rho", "eps", "weight_decay"])


def _params_and_size(parameters, array_size):
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    params = [p for p in params if p.grad is not None]
    return params, (_array_size(params, array_size) if params else array_size or 0)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, *, array_size=None):
    """torch.nn.utils.clip_grad_norm_ for each member on its own: member b's
    gradients scaled so that their norm is at most max_norm (one value or
    one per member). Returns the members' norms before clipping, [B]."""
    params, members = _params_and_size(parameters, array_size)
    if not params:
        return torch.zeros(members)
    return _C.optim.clip_grad_norm(params, members, _per_member("max_norm", max_norm, members), float(norm_type))


def clip_grad_value_(parameters, clip_value, *, array_size=None):
    """torch.nn.utils.clip_grad_value_ for each member, clip_value one value or one per member."""
    params, members = _params_and_size(parameters, array_size)
    if params:
        _C.optim.clip_grad_value(params, members, _per_member("clip_value", clip_value, members))


from . import lr_scheduler  # noqa: E402 (it builds on the classes above)
