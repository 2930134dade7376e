"""Writes two .pt2 files hfta-fuse does not read as TorchScript: a
torch.export program of a small MLP (torch.export.save), and an archive laid
out as an AOTInductor package (compiled code under data/aotinductor/, no
graph; written with PyTorch's own archive writer, as torch's packager does,
without running the compiler).

    pt2_archives.py EXPORTED.pt2 AOTI.pt2
"""
import sys

import torch
import torch.nn as nn

exported_path, aoti_path = sys.argv[1:3]
model = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 10))
torch.export.save(torch.export.export(model, (torch.randn(4, 24),)), exported_path)
writer = torch._C.PyTorchFileWriter(aoti_path)
for name, data in [("archive_format", b"pt2"), ("archive_version", b"0"),
                   ("data/aotinductor/model/model.wrapper.so", b"\x7fELF"),
                   ("data/aotinductor/model/model.wrapper.cpp", b"// compiled")]:
    writer.write_record(name, data, len(data))
writer.write_end_of_file()
