#!/usr/bin/env bash
# The README's first command: installs the dependencies (Debian/Ubuntu packages), builds the
# project, generates the bundled demo model (random weights, no download) and runs it on an
# example text pair with the CPU engine.
#
# Usage: scripts/quickstart.sh [MODEL_DIR]   (default: the bundled demo model in build/demo-model)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
scripts/build.sh
model=${1:-build/demo-model}
echo
echo "== dflash-classify on $model"
build/bin/dflash-classify --model="$model" \
  --text="A man is playing a guitar on stage." \
  --text_pair="A person is performing music."
