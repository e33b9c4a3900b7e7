#!/usr/bin/env bash
# Configures and builds the project in build/ (Ninja, RelWithDebInfo). CUDA code is compiled when
# a toolkit is found (/usr/local/cuda); extra arguments go to cmake's configure step.
#
# Usage: scripts/build.sh [-DOPTION=VALUE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DFLASH_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja "$@"
cmake --build "$build_dir" -j "$(nproc)"
