#!/usr/bin/env bash
# Gathers what bench/torch/run_on_gpu.sh installs on the GPU host, which has no network, into
# .whl/ of the repository root (git-ignored through .git/info/exclude):
#   .whl/flashdeberta-0.0.8, disentangled_flash-1.1.1   the peers (bench/attention/fetch_peer_wheels.sh)
#   .whl/torch-build/    with --build-deps: scikit-build-core, cmake, ninja and their dependencies,
#                        for a host whose Python lacks them (`pip install` of python/ builds the
#                        kernels from source there; needs nvcc on the host)
#   .whl/torch-hub/      kernels 0.17.2 and tomlkit (the host has kernels' other needs), for the
#                        Hub layout check on the GPU
#   .whl/torch-prebuilt/ with --prebuilt: the dflash_torch wheel built here (sm_90a), installed
#                        where the GPU host has no nvcc
# Wheels are for CPython 3.12 on manylinux x86_64, as fetch_peer_wheels.sh assumes for the host.
# Usage: bash bench/torch/fetch_wheels.sh [--build-deps] [--prebuilt]
set -euo pipefail
prebuilt=0; build_deps=0
for arg in "$@"; do
  case "$arg" in
    --prebuilt) prebuilt=1 ;;
    --build-deps) build_deps=1 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
bash bench/attention/fetch_peer_wheels.sh
platform=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
          --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 --platform any)
if (( build_deps )); then
  python3 -m pip download "${platform[@]}" -d .whl/torch-build \
    "scikit-build-core>=0.10" "cmake>=3.25" ninja
fi
python3 -m pip download "${platform[@]}" --no-deps -d .whl/torch-hub kernels==0.17.2 tomlkit
if (( prebuilt )); then
  # Needs scikit-build-core, cmake >= 3.25 and ninja in the running Python, and nvcc.
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} python3 -m pip wheel ./python \
    --no-deps --no-build-isolation -w .whl/torch-prebuilt \
    --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES="90a-real;90-virtual"
fi
du -sh .whl/*
