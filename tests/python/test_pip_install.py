"""`pip install --no-build-isolation .` into a fresh virtual environment
builds the package (scikit-build-core over this CMake project, against the
torch 2.11.0 it finds) and the installed package imports and works on its
own: its runtime library is the one in the install, not the build tree's.
The fresh environment sees this one's packages (torch, scikit-build-core)
through a .pth file, as a user's environment that has torch would; pip
checks the package's requirement on torch against it.

    test_pip_install.py --source DIR
"""
import argparse
import os
import subprocess
import sys
import sysconfig
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
    with tempfile.TemporaryDirectory() as work:
        fresh = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", fresh], check=True)
        python = os.path.join(fresh, "bin", "python")
        target = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                check=True, capture_output=True, text=True).stdout.strip()
        ours = sysconfig.get_paths()["purelib"]
        with open(os.path.join(target, "project-packages.pth"), "w") as pth:
            pth.write(ours + "\n")
        # This environment's pip, installing into the fresh one.
        subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--disable-pip-version-check",
                        "--no-build-isolation", args.source], check=True)
        installed = os.listdir(os.path.join(target, "hfta"))
        for name in ("__init__.py", "libhfta_runtime.so", "libhfta_support.so", "optim"):
            assert name in installed, f"{name} is not in the installed package: {installed}"
        assert any(n.startswith("_C.") and n.endswith(".so") for n in installed), installed
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([python, "-c", CHECK, target], check=True, env=env, cwd=work)

if __name__ == "__main__":
    main()
