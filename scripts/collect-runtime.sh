#!/usr/bin/env bash
# Copies executables, plugin libraries (*.so, loaded with dlopen: the sentencepiece shim) and the
# shared libraries they need that a machine with only the CUDA toolkit and a base OS lacks (Abseil,
# spdlog, fmt, ...) into one folder, to run them elsewhere: a GPU host without the development
# packages (docs/gpu.md) and the Dockerfile's runtime images. glibc, libgcc, libstdc++ and CUDA libraries are left out: every
# base image (ubuntu, nvidia/cuda runtime) has them.
#
# Usage: scripts/collect-runtime.sh OUT_DIR FILE...   executables go to OUT_DIR/bin, *.so files
#        and every library to OUT_DIR/lib (where a binary in bin/ looks for the shim); run with
#        LD_LIBRARY_PATH=OUT_DIR/lib:/usr/local/cuda/lib64 OUT_DIR/bin/BINARY
set -euo pipefail
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
if [[ ${1:-} == -h || ${1:-} == --help ]]; then usage; exit 0; fi
if [[ $# -lt 2 ]]; then usage >&2; exit 2; fi
out=$1
shift
mkdir -p "$out/bin" "$out/lib"
for file in "$@"; do
  case "$file" in
    *.so) cp -f "$file" "$out/lib/" ;;
    *) cp -f "$file" "$out/bin/" ;;
  esac
  ldd "$file" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*.so*|libnvidia*) ;;
      *) cp -fL "$lib" "$out/lib/" ;;
    esac
  done
done
du -sh "$out"
