#!/usr/bin/env bash
# Downloads the two pinned Triton peers' wheels into .whl/ of the repository root, for
# bench/attention/run_on_gpu.sh (which installs them and runs peers_bench.py when .whl/ is carried).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bash bench/attention/fetch_peer_wheels.sh [-h]

Downloads flashdeberta==0.0.8 and disentangled-flash==1.1.1 (pure-Python wheels, no dependencies:
torch, triton, transformers and einops are on the GPU host) into .whl/ of the repository root,
and makes sure .whl/ is git-ignored through .git/info/exclude. Copy it to the GPU host beside
.carry/ for `bash bench/attention/run_on_gpu.sh`.
EOF
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
if ! grep -qxE '/?\.whl/?' "$exclude" 2> /dev/null; then
  echo "/.whl/" >> "$exclude"
  echo "added /.whl/ to $exclude"
fi

# Another version of either peer beside the pinned one would stop the whole install there.
mkdir -p .whl
for stale in .whl/flashdeberta-*.whl .whl/disentangled_flash-*.whl; do
  case "$stale" in
    .whl/flashdeberta-0.0.8-py3-none-any.whl | .whl/disentangled_flash-1.1.1-py3-none-any.whl) ;;
    *'*'*) ;;  # no such wheel
    *) echo "removing $stale (not the pinned version)"; rm -f -- "$stale" ;;
  esac
done

python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform any -d .whl flashdeberta==0.0.8 disentangled-flash==1.1.1
ls -l .whl/flashdeberta-0.0.8-py3-none-any.whl .whl/disentangled_flash-1.1.1-py3-none-any.whl
