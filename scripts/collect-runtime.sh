#!/usr/bin/env bash
# Copies executables and the shared libraries they need that a machine with only the CUDA toolkit
# and a base OS lacks (Abseil, spdlog, fmt, ...) into one folder, to run them elsewhere (the GPU
# machine: shared/GPU.md). glibc, libgcc, libstdc++ and CUDA libraries are left out.
#
# Usage: scripts/collect-runtime.sh OUT_DIR BINARY...   then run with
#        LD_LIBRARY_PATH=OUT_DIR/lib:/usr/local/cuda/lib64 OUT_DIR/bin/BINARY
set -euo pipefail
out=$1
shift
mkdir -p "$out/bin" "$out/lib"
for binary in "$@"; do
  cp -f "$binary" "$out/bin/"
  ldd "$binary" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*.so*|libnvidia*) ;;
      *) cp -fL "$lib" "$out/lib/" ;;
    esac
  done
done
du -sh "$out"
