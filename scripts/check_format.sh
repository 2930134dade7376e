#!/usr/bin/env bash
# Fails, listing what differs, unless every C++ file follows .clang-format.
#   scripts/check_format.sh [clang-format]     (default: clang-format)
set -euo pipefail
cd "$(dirname "$0")/.."
format="${1:-clang-format}"
git ls-files '*.cpp' '*.h' '*.cu' | xargs "$format" --dry-run --Werror
echo "check_format: every C++ file follows .clang-format"
