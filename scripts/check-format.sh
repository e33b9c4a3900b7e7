#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file differs from clang-format's output (.clang-format at the root).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
if [[ ${#files[@]} -eq 0 ]]; then
  echo "check-format: no C++ files tracked"
  exit 0
fi
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
