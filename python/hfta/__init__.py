"""hfta in Python: fuse B models of one topology into one module that trains
them all at once, in your own training loop.

    fused = hfta.fuse([Net() for _ in range(4)], shared_input=True)  # or ScriptModules, or .pt paths
    opt = hfta.optim.AdamW(fused.parameters(), lr=[1e-3, 3e-3, 1e-2, 3e-2])
    for x, y in loader:                                     # x: [N, ...], shared by the members
        opt.zero_grad()
        hfta.losses(fused(x), y, F.cross_entropy).sum().backward()
        opt.step()
    torch.jit.save(hfta.split(fused, 2), "best.pt")

Importing hfta loads its runtime library, which registers the hfta::
operators fused modules call (so torch.jit.load of a fused .pt works too).
"""
import json
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple, Union


import torch

from . import _C
from ._C import FusionError
from . import amp, optim
from .export import export, export_programs, save_programs

__all__ = ["fuse", "export", "split", "take", "array_size", "is_fused", "FusionError", "FusionReport", "losses", "accuracies",
           "keep_large_allocations", "runtime_library", "optim", "amp"]

Model = Union[torch.nn.Module, torch.jit.ScriptModule, torch.export.ExportedProgram,
              Tuple[torch.export.ExportedProgram, torch.export.ExportedProgram], str, os.PathLike]


@dataclass
class FusionReport:
    """What the fusion did with each node of the member graph (hfta-fuse --report)."""
    text: str
    array_size: int = 0
    fused: List[dict] = field(default_factory=list)  # {"node", "source", "rule"}
    fallbacks: List[dict] = field(default_factory=list)  # {"node", "source", "reason"}: run per member

    def __str__(self):
        return self.text


def _scripted(model, b):
    with warnings.catch_warnings():  # hfta scripts on the user's behalf; its deprecation is hfta's concern
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated.*")
        try:
            return torch.jit.script(model)
        except Exception as error:  # TorchScript's own errors: several types, all with a message
            raise FusionError(f"model {b} ({type(model).__name__}) cannot be scripted by torch.jit.script: "
                              f"{error}. Give example_inputs to fuse it through torch.export instead") from error


def _exported(programs, source, b):
    """The C++ module of torch.export programs ({"model": ep} or {"train": ..., "eval": ...})."""
    return _C.load_exported(save_programs(programs), source, b)


def _member(model, b, example_inputs):
    """(C++ module, source) of member b."""
    source = f"{type(model).__name__} {b}"
    if isinstance(model, torch.jit.ScriptModule):
        return model._c, source
    if isinstance(model, torch.export.ExportedProgram):
        return _exported({"model": model}, f"ExportedProgram {b}", b), f"ExportedProgram {b}"
    if (isinstance(model, tuple) and len(model) == 2
            and all(isinstance(p, torch.export.ExportedProgram) for p in model)):
        return _exported({"train": model[0], "eval": model[1]}, f"ExportedPrograms {b}", b), f"ExportedPrograms {b}"
    if isinstance(model, torch.nn.Module):
        if example_inputs is None:
            return _scripted(model, b)._c, source
        return _exported(export_programs(model, example_inputs), source, b), source
    raise FusionError(f"model {b} is a {type(model).__name__}; give nn.Modules, ScriptModules, ExportedPrograms "
                      "(or (train, eval) pairs of them), or .pt/.pt2 paths")


def fuse(models: Sequence[Model], *, shared_input: bool = False, report: bool = False,
         allow_single_member: bool = True, example_inputs: Optional[Tuple[Any, ...]] = None,
         segment_plans: bool = True):
    """The fused module of `models`: what hfta-fuse writes, made in this
    process. Members are all paths (TorchScript .pt, torch.export .pt2) or
    all objects: ScriptModules, ExportedPrograms (or (train, eval) pairs of
    them, one per mode), or nn.Modules, which are scripted, or exported in
    both modes (hfta.export) when example_inputs (one member's forward
    arguments) are given.

    Its parameters and buffers are the members' stacked on a new leading
    dim; forward takes [B, N, ...] (or, with shared_input, one [N, ...]
    input every member reads) and returns [B, N, ...]. With report=True,
    returns (module, FusionReport). Raises FusionError (a ValueError) with
    the message hfta-fuse prints when the members do not match. An array of
    one member is allowed (an array that shrank, a baseline); hfta-fuse
    refuses one as a likely mistake, as allow_single_member=False does.
    On its first call the fused module measures, for each segment of its
    graph, whether its fused ops or the members' own ops run faster (on a
    copy of itself) and keeps the faster, the same results either way;
    segment_plans=False runs the fused ops everywhere."""
    models = list(models)
    if not models:
        raise FusionError("no models to fuse")
    paths = [isinstance(m, (str, os.PathLike)) for m in models]
    if any(paths) and not all(paths):
        raise FusionError("give all models as modules or all as paths, not a mix")
    if all(paths):
        module, text, report_json = _C.fuse_files([os.fspath(m) for m in models], shared_input,
                                                  allow_single_member, segment_plans)
    else:
        modules, sources = zip(*[_member(m, b, example_inputs) for b, m in enumerate(models)])
        module, text, report_json = _C.fuse(list(modules), list(sources), shared_input, allow_single_member,
                                            segment_plans)
    fused = torch.jit._recursive.wrap_cpp_module(module)
    if not report:
        return fused
    parsed = json.loads(report_json)
    return fused, FusionReport(text, parsed["array_size"], parsed["fused"], parsed["fallbacks"])


def split(fused: torch.jit.ScriptModule, member: int) -> torch.jit.ScriptModule:
    """Member `member` of a fused module as a plain ScriptModule with its
    current weights; it needs nothing of hfta to load or run."""
    return torch.jit._recursive.wrap_cpp_module(_C.split(fused._c, member))


def take(fused: torch.jit.ScriptModule, members: Sequence[int], optimizer=None, scheduler=None):
    """A new fused module of the given members of `fused`, in that order, each
    as it is now (what an array does when some of its trials stop: the rest
    train on in a smaller array). With an hfta.optim optimizer, returns
    (module, optimizer): the new optimizer over the new module's parameters,
    its parameter groups and settings those of the members taken, its state
    (moments, step counts) theirs; with an hfta.optim.lr_scheduler scheduler
    of that optimizer too, (module, optimizer, scheduler), the schedule going
    on where each member's was."""
    members = [int(b) for b in members]
    taken = fuse([split(fused, b) for b in members], shared_input=_C.shared_input(fused._c))
    taken.train(fused.training)
    if optimizer is None:
        if scheduler is not None:
            raise ValueError("take a scheduler together with its optimizer")
        return taken
    taken_optimizer = optim._taken(optimizer, fused, taken, members)
    if scheduler is None:
        return taken, taken_optimizer
    if scheduler.optimizer is not optimizer:
        raise ValueError("the scheduler given to hfta.take drives another optimizer than the one given")
    return taken, taken_optimizer, scheduler._taken(taken_optimizer, members)


def array_size(fused: torch.jit.ScriptModule) -> int:
    """B, the number of members of a fused module; FusionError if it is not one."""
    return _C.array_size(fused._c)


def is_fused(module: torch.jit.ScriptModule) -> bool:
    return isinstance(module, torch.jit.ScriptModule) and _C.is_fused(module._c)


def runtime_library() -> str:
    """The path of the runtime library (what torch.ops.load_library needs in a
    process that loads fused modules without importing hfta)."""
    return _C.runtime_library_path()


def keep_large_allocations():
    """Keeps freed memory for reuse, process-wide, as hfta-train does first
    thing: PyTorch's CPU tensors of 1 MiB and more come from a cache that
    serves freed blocks again whole by size, and glibc's malloc keeps the
    rest. A fused array's activations are B times a member's, and otherwise
    they are mapped afresh, page by page, in many steps (support/allocator.h;
    the digits CNN at B = 8 steps about 15% faster). Resident memory then
    stays near its peak."""
    _C.keep_large_allocations()


def losses(outputs: torch.Tensor, targets: torch.Tensor, loss_fn=torch.nn.functional.cross_entropy, *,
           per_member_targets: bool = False, **kwargs) -> torch.Tensor:
    """Each member's loss, [B]: member b's is loss_fn(outputs[b], its
    targets) with the mean over all of its elements, as it would be alone.
    `targets` is shared by all members ([N, ...], one data loader) or, with
    per_member_targets, [B, N, ...]. Backpropagate their sum: each member's
    gradient is then its own loss's. `loss_fn` takes reduction="none"
    (torch.nn.functional's losses do); with class weights or ignore_index
    the member alone averages differently."""
    members = outputs.shape[0]
    if not per_member_targets:
        targets = targets.unsqueeze(0).expand(members, *targets.shape)
    per_element = loss_fn(outputs.flatten(0, 1), targets.flatten(0, 1), reduction="none", **kwargs)
    return per_element.reshape(members, -1).mean(1)


def accuracies(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Each member's top-1 accuracy, [B], of class scores [B, N, C] against
    labels [N] or [B, N]."""
    return (outputs.argmax(-1) == targets).to(torch.float64).mean(-1)
