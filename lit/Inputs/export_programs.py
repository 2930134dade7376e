"""Writes the torch.export archives of lit/export.test into OUT_DIR:

  cnn_<b>.pt2         a CNN (batch norm, dropout, a view by the batch size)
                      in both modes (hfta.export), members 0 and 1
  cnn_train.pt2       its training program alone (torch.export.save)
  branchy.pt2         torch.cond, while_loop and a torch.no_grad() block
  mislabelled.pt2     an evaluation program stored as "train"
  other_names.pt2     programs named neither "train" nor "eval"
  functional.pt2      a program after run_decompositions() (auto_functionalized)
  autocast.pt2        a torch.autocast block (wrap_with_autocast)
  skewed.pt2          cnn_train.pt2 claiming schema version 9.0
  lstm.pt2            nn.LSTM, whose zero initial state export records on the CPU

    export_programs.py OUT_DIR
"""
import json
import os
import sys
import warnings
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
from make_exported_models import hfta_export  # noqa: E402  (hfta.export, without the built package)
warnings.filterwarnings("ignore")
out = sys.argv[1]


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 20, 3, padding=1)
        self.bn = nn.BatchNorm2d(20)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(20 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(self.drop(x.view(x.size(0), -1)))


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 20)

    def forward(self, x):
        h = self.fc(x)
        with torch.no_grad():
            scale = h.abs().mean() + 1.0
        h = torch.cond(h.sum() > 0, lambda t: t * 2.0, lambda t: t - 1.0, (h,))
        _, h = torch._higher_order_ops.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, torch.tanh(t)),
                                                  (torch.tensor(0), h))
        return h / scale


class Autocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 20)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.fc(x).float()


@torch.library.custom_op("hfta_lit::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, factor: float) -> None:
    x.mul_(factor)


class Mutating(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 20)

    def forward(self, x):
        y = self.fc(x).clone()
        scale_(y, 2.0)
        return y


image = torch.randn(4, 3, 8, 8)
features = torch.randn(4, 24)
for b in range(2):
    torch.manual_seed(b)
    cnn = Cnn()
    hfta_export.export(cnn, (image,), os.path.join(out, f"cnn_{b}.pt2"))
programs = hfta_export.export_programs(cnn, (image,))
torch.export.save(programs["train"], os.path.join(out, "cnn_train.pt2"))
hfta_export.save_programs({"train": programs["eval"]}, os.path.join(out, "mislabelled.pt2"))
hfta_export.save_programs({"small": programs["eval"], "large": programs["eval"]},
                          os.path.join(out, "other_names.pt2"))
torch.export.save(torch.export.export(Branchy(), (features,)), os.path.join(out, "branchy.pt2"))
torch.export.save(torch.export.export(Autocast(), (features,)), os.path.join(out, "autocast.pt2"))
torch.export.save(torch.export.export(nn.LSTM(24, 20, batch_first=True), (torch.randn(4, 5, 24),)),
                  os.path.join(out, "lstm.pt2"))
torch.export.save(torch.export.export(Mutating(), (features,)).run_decompositions(), os.path.join(out, "functional.pt2"))

# The same archive with its schema version changed, written record by
# record with PyTorch's own archive writer.
with zipfile.ZipFile(os.path.join(out, "cnn_train.pt2")) as archive:
    writer = torch._C.PyTorchFileWriter(os.path.join(out, "skewed.pt2"))
    for name in archive.namelist():
        record = name.split("/", 1)[1]
        if record in (".data/version", "byteorder", ".data/serialization_id"):
            continue  # the writer adds its own
        data = archive.read(name)
        if record == "models/model.json":
            program = json.loads(data)
            program["schema_version"] = {"major": 9, "minor": 0}
            data = json.dumps(program).encode()
        writer.write_record(record, data, len(data))
    writer.write_end_of_file()
