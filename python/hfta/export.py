"""A member for hfta as a torch.export archive (.pt2) holding both modes.

torch.export records one mode: the operators' flags (dropout's `train`,
batch norm's `training`) are constants in the exported graph. `export`
records the model after model.train() and after model.eval() and saves
both programs, named "train" and "eval", in one archive (PyTorch's own
package_pt2 layout); hfta's fused module runs the first in train() and the
second in eval(). An archive of one program (torch.export.save) is fused
too: it serves the mode it records, and the fused module raises in the
other.

This file imports only torch, so that test setup can load it alone.
"""
import collections
import io
import os
from typing import Any, Dict, Optional, Tuple, Union

import torch
import torch.utils._pytree as pytree
from torch.export.pt2_archive._package import package_pt2

__all__ = ["export", "export_programs", "save_programs", "batch_dynamic_shapes"]


def batch_dynamic_shapes(args: Tuple[Any, ...]):
    """Dim 0 of every tensor argument dynamic (one symbol for all), so the
    fused module takes any batch size, the last short batch of an epoch
    included. Dim.AUTO: where the model fixes the batch, export keeps it."""
    return tuple({0: torch.export.Dim.AUTO} if isinstance(a, torch.Tensor) and a.dim() > 0 else None for a in args)


def _register_namedtuples(spec):
    """torch.export.save serializes an output namedtuple (torchvision's
    GoogLeNetOutputs) only once its class has a registered name: register
    each that is not, under its qualified name."""
    if spec.type is collections.namedtuple:  # pytree's node of a namedtuple: its class is the context
        cls = spec.context
        if cls not in pytree.SUPPORTED_SERIALIZED_TYPES:
            pytree._register_namedtuple(cls, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")
    for child in spec.children_specs:
        _register_namedtuples(child)


def export_programs(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None,
                    dynamic_shapes=None, strict: bool = False) -> Dict[str, "torch.export.ExportedProgram"]:
    """{"train": ..., "eval": ...}: `model` exported in each mode (its mode
    is restored afterwards)."""
    if not isinstance(args, tuple):
        args = (args,)
    if dynamic_shapes is None and not kwargs:
        dynamic_shapes = batch_dynamic_shapes(args)
    was_training = model.training
    programs = {}
    try:
        for mode in ("train", "eval"):
            model.train(mode == "train")
            programs[mode] = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
            _register_namedtuples(programs[mode].call_spec.out_spec)
    finally:
        model.train(was_training)
    return programs


def export(model: torch.nn.Module, args: Tuple[Any, ...], path: Union[str, os.PathLike, None] = None, *,
           kwargs: Optional[Dict[str, Any]] = None, dynamic_shapes=None, strict: bool = False):
    """Exports `model` (called as model(*args, **kwargs)) in training and in
    evaluation mode into one .pt2 at `path`, or into bytes if path is None.

    dynamic_shapes as torch.export.export takes it; by default the batch
    (dim 0 of each tensor argument) is dynamic."""
    return save_programs(export_programs(model, args, kwargs, dynamic_shapes, strict), path)


def save_programs(programs: Dict[str, "torch.export.ExportedProgram"], path: Union[str, os.PathLike, None] = None):
    """Programs by name ("model", or "train" and "eval") in one .pt2 at
    `path`, or into bytes if path is None."""
    if path is None:
        buffer = io.BytesIO()
        package_pt2(buffer, exported_programs=programs)
        return buffer.getvalue()
    package_pt2(os.fspath(path), exported_programs=programs)
    return path
