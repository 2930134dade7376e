"""Test setup (called by make_test_models.py): members of some families as
torch.export archives, <kind>_<b>.pt2, besides the scripted <kind>_<b>.pt.
Each member is the same model (seed, dtype, width) as the scripted one and
is exported with hfta.export (its training and evaluation programs in one
archive), so the tests fuse them and check them against the same
<kind>_reference.pt, PyTorch's answers for each member trained alone.

Also writes, for the tests of one-mode archives and of the translation:
  <kind>_train_only_<b>.pt2   torch.export.save of the training program
  <kind>_eval_only_<b>.pt2    ... of the evaluation program
"""
import importlib.util
import os
import warnings

import torch

# hfta.export without importing hfta (whose package needs the built
# extension): the file imports only torch.
_spec = importlib.util.spec_from_file_location(
    "hfta_export", os.path.join(os.path.dirname(__file__), "..", "..", "python", "hfta", "export.py"))
hfta_export = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hfta_export)

MEMBERS = 3
BATCH = 4


def write(out_dir, kind, make_model, example, one_mode=False):
    """make_model(b) -> member b (an nn.Module); example: one member's batch."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        for b in range(MEMBERS):
            model = make_model(b)
            programs = hfta_export.export_programs(model, (example,))  # what hfta.export saves
            hfta_export.save_programs(programs, os.path.join(out_dir, f"{kind}_{b}.pt2"))
            if one_mode:
                torch.export.save(programs["train"], os.path.join(out_dir, f"{kind}_train_only_{b}.pt2"))
                torch.export.save(programs["eval"], os.path.join(out_dir, f"{kind}_eval_only_{b}.pt2"))
