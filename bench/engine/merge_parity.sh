#!/usr/bin/env bash
# Re-merges the parity runs of run_on_gpu.sh (v3-large, v2-xlarge) from the files it left in
# /tmp/dfe on the GPU host (same machine, still warm), into $OUT. Usage: bash bench/engine/merge_parity.sh
set -uo pipefail
if [[ "${1:-}" == "--help" ]]; then sed -n 2,3p "$0"; exit 0; fi
out=${OUT:-/tmp/out}
work=/tmp/dfe
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
for shape in v3-large v2-xlarge; do
  python3 bench/engine/make_engine_results.py --ours "$work/ours_$shape.json" \
    --hf "$work/hf_$shape.json" --parity-prefix "$work/parity_$shape" --gpu "$gpu" \
    --command "bash bench/engine/run_on_gpu.sh (parity section for $shape)" \
    --out "$out/h200-engine-parity-$shape.json" 2>&1 | tail -3
done
