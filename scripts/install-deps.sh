#!/usr/bin/env bash
# Installs everything DisentangledFlash Serve needs to build and test, from the distribution's
# packages only (Debian 12 and Ubuntu 24.04). The CUDA toolkit is not installed here: the build uses
# /usr/local/cuda when it exists and builds the CPU-only service otherwise.
#
# Usage: scripts/install-deps.sh            (runs apt-get; uses sudo when not root)
set -euo pipefail

packages=(
  # Toolchain.
  build-essential cmake ninja-build pkg-config git clang clang-format libclang-rt-dev
  # Libraries the service links.
  libabsl-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libyaml-cpp-dev libsentencepiece-dev nlohmann-json3-dev libopenblas-dev libutf8proc-dev
  libgtest-dev libgmock-dev libspdlog-dev
  # TLS for gRPC, SHA-256 and constant-time comparison of API keys.
  libssl-dev
  # The README's Python client example (grpcio; stubs from protoc + grpc_python_plugin) and
  # the end-to-end tests' certificate script (openssl CLI).
  python3-grpcio openssl
  # Metrics endpoint (HTTP server) and the official exposition parser its test uses.
  libcivetweb-dev python3-prometheus-client
  # spm_train, used to build the demo model's tokenizer.
  sentencepiece
  # Python used by test helpers (Debian's interpreter and its packages).
  python3
)

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: run as root or install sudo" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
