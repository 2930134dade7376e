#!/usr/bin/env bash
# Installs what hfta needs and skips what is already there:
#   Debian packages (compilers, Python's headers (hfta's Python extension), fmt,
#   CLI11, nlohmann-json, GoogleTest, FileCheck,
#   clang-format, gloo's headers (libgloo-dev: the torch wheel has c10d's Gloo
#   backend but not the gloo headers its header includes), fortunes
#   (English text that becomes .data/fortunes, hfta-train's default text
#   corpus in WikiText-2's format) and ccache (the build compiles through
#   it, so a fresh clone takes what another clone compiled))
#   and a project-local virtual environment (.venv) with the pinned torch,
#   from whose wheel LibTorch is taken, plus cmake, ninja, lit,
#   scikit-learn (whose 8x8 digits become .data/digits.pt, hfta-train's
#   default data set), matplotlib (the demo's plot), pytest and optuna (the
#   Python package's tests), scikit-build-core (pip install . of it),
#   transformers (Hugging Face models fused through torch.export) and
#   torchvision, the release made for that torch (its classification
#   models are the zoo of scripts/zoo_census.sh; no weights are downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly TORCH_VERSION=2.11.0
readonly TORCHVISION_VERSION=0.26.0  # the release for torch 2.11.0
readonly TRANSFORMERS_VERSION=5.25.0  # tiny GPT-2 and BERT in the torch.export tests
readonly APT_PACKAGES=(g++ make git python3 python3-venv python3-dev ninja-build libfmt-dev
  libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev llvm-14-tools clang-format fortunes libgloo-dev
  ccache)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# Debian's python3 is used on purpose: its venv module is a Debian package
# above, so a fresh machine needs nothing else.
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "
import sys, torch, torchvision, sklearn, matplotlib, pytest, optuna, scikit_build_core, transformers
version = lambda m: m.__version__.split('+')[0]
sys.exit(version(torch) != '$TORCH_VERSION' or version(torchvision) != '$TORCHVISION_VERSION'
         or transformers.__version__ != '$TRANSFORMERS_VERSION')" 2>/dev/null \
   || [ ! -x .venv/bin/cmake ] || [ ! -x .venv/bin/lit ]; then
  echo "setup: installing torch==$TORCH_VERSION, torchvision==$TORCHVISION_VERSION, cmake, lit, numpy, scikit-learn," \
    "matplotlib, pytest, optuna, scikit-build-core, transformers==$TRANSFORMERS_VERSION into .venv"
  # --no-cache-dir: torch's CUDA wheels are 3 GB, and nothing installs them
  # twice; a copy in ~/.cache only takes disk (a CI run stopped here once on
  # a full disk).
  .venv/bin/pip install -q --disable-pip-version-check --no-cache-dir "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION" \
    numpy "cmake>=3.28" lit scikit-learn matplotlib pytest optuna "scikit-build-core>=0.10" \
    "transformers==$TRANSFORMERS_VERSION"
fi
# hfta-train's default data set: scikit-learn's digits, converted once.
[ -f .data/digits.pt ] || .venv/bin/python scripts/make_digits.py .data/digits.pt
# Its default text: the fortunes collection in WikiText-2's format, once.
[ -f .data/fortunes/wiki.valid.tokens ] || .venv/bin/python scripts/make_corpus.py .data/fortunes
echo "setup: ready (torch $(.venv/bin/python -c 'import torch; print(torch.__version__)'))"
