"""Mixed precision with one loss scale per member: torch.amp.GradScaler's
rule applied to each member alone. One member's overflow skips that
member's step and backs off its scale only (a single GradScaler over the
summed loss would skip every member's step and shrink every member's scale).

    scaler = hfta.amp.GradScaler()
    with torch.autocast("cuda", dtype=torch.float16):
        losses = hfta.losses(fused(x), y)          # [B]
    scaler.scale(losses).sum().backward()
    scaler.step(opt)                               # skips the members that overflowed
    scaler.update()

The C++ FusedGradScaler (runtime/optim) does the work, on the CPU and CUDA.
"""
from . import _C
from .optim import _FusedOptimizer, _per_member

__all__ = ["GradScaler"]


class GradScaler:
    """torch.amp.GradScaler's interface; each setting one value or one per
    member; scale() takes the members' losses stacked, [B]."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, *, array_size=None):
        self.device = device
        self._enabled = enabled
        self._settings = dict(init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                              growth_interval=growth_interval)
        self._scaler = None
        if array_size is not None:
            self._start(array_size)

    def _start(self, members):
        s = {k: _per_member(k, v, members) for k, v in self._settings.items()}
        self._scaler = _C.optim.FusedGradScaler(members, s["init_scale"], s["growth_factor"], s["backoff_factor"],
                                                s["growth_interval"])

    def _started(self, what):
        if self._scaler is None:
            raise RuntimeError(f"GradScaler.{what}() before scale(): the scaler learns the members from the losses")
        return self._scaler

    def is_enabled(self):
        return self._enabled

    def scale(self, losses):
        """The members' losses [B, ...] times their scales; backpropagate their sum."""
        if not self._enabled:
            return losses
        if self._scaler is None:
            self._start(losses.shape[0])
        return self._scaler.scale(losses)

    @staticmethod
    def _fused(optimizer):
        if not isinstance(optimizer, _FusedOptimizer):
            raise TypeError(f"hfta.amp.GradScaler steps hfta.optim's optimizers, not a {type(optimizer).__name__}")
        optimizer._sync()
        return optimizer._fused

    def unscale_(self, optimizer):
        """Divides each member's gradients by its scale (before per-member clipping)."""
        if self._enabled:
            self._started("unscale_").unscale_(self._fused(optimizer))

    def step(self, optimizer):
        """The optimizer's step for the members whose gradients were finite."""
        if not self._enabled:
            return optimizer.step()
        self._started("step").step(self._fused(optimizer))
        return None

    def update(self):
        """Each member's scale: backed off after its overflow, grown after
        growth_interval finite steps in a row."""
        if self._enabled:
            self._started("update").update()

    def get_scale(self):
        """The members' scales, [B] floats (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        if self._scaler is None:
            return self._settings["init_scale"]  # as given, until scale() shows the members
        return list(self._scaler.scales())

    def found_inf(self):
        """Per member: did the last unscaled gradients hold an inf or NaN."""
        return [bool(f) for f in self._started("found_inf").found_inf()]

    def state_dict(self):
        return {} if self._scaler is None else {"hfta": self._scaler.state_dict(),
                                                "array_size": self._scaler.array_size}

    def load_state_dict(self, state_dict):
        if not state_dict:
            return
        if self._scaler is None:
            self._start(state_dict["array_size"])
        self._scaler.load_state_dict(state_dict["hfta"])
