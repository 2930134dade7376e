"""Rewrites a TorchScript archive with the records whose names end with
SUFFIX changed (FIND replaced by REPLACE; an empty FIND replaces the whole
record). The zip stays whole, its checksums valid, so the damage reaches
TorchScript's own readers.

python damage_record.py IN.pt OUT.pt SUFFIX FIND REPLACE [SUFFIX FIND REPLACE ...]
"""
import sys
import zipfile

source, target, *changes = sys.argv[1:]
changes = [(changes[i], changes[i + 1].encode(), changes[i + 2].encode()) for i in range(0, len(changes), 3)]
with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
    for info in zin.infolist():
        data = zin.read(info)
        for suffix, find, replace in changes:
            if info.filename.endswith(suffix):
                assert not find or find in data, f"{info.filename} holds no {find!r}"
                data = data.replace(find, replace) if find else replace
        zout.writestr(info, data)
