"""`pip install --no-build-isolation .` builds the package (scikit-build-core
over this CMake project, against the environment's torch) and the installed
package imports and works on its own: its runtime library is the one in the
install, not the build tree's.

    test_pip_install.py --source DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile

CHECK = r"""
import os, sys, torch, torch.nn as nn
import hfta
target = sys.argv[1]
assert hfta.__file__.startswith(target), hfta.__file__
assert hfta.runtime_library().startswith(target), hfta.runtime_library()
fused = hfta.fuse([nn.Linear(20, 30), nn.Linear(20, 30)], shared_input=True)
opt = hfta.optim.Adam(fused.parameters(), lr=[0.1, 0.01])
before = fused.weight.detach().clone()
fused(torch.randn(4, 20)).sum().backward()
opt.step()
moved = (fused.weight - before).abs().flatten(1).max(1).values
assert moved[0] > moved[1] > 0, moved  # Adam's first step moves each member by about its lr
print("installed hfta works:", hfta.__file__)
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as target:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-build-isolation", "--no-deps", args.source, "--target", target], check=True)
        installed = os.listdir(os.path.join(target, "hfta"))
        for name in ("__init__.py", "libhfta_runtime.so", "libhfta_support.so", "optim"):
            assert name in installed, f"{name} is not in the installed package: {installed}"
        assert any(n.startswith("_C.") and n.endswith(".so") for n in installed), installed
        env = dict(os.environ, PYTHONPATH=target)
        subprocess.run([sys.executable, "-c", CHECK, target], check=True, env=env, cwd=target)


if __name__ == "__main__":
    main()
