#!/usr/bin/env bash
# CPU-engine throughput on this machine against transformers' eager float32 model, in one run on
# the same random-weight deberta-v3-xsmall-shaped checkpoint (H 384, 12 layers, 6 heads, I 1536,
# vocab 128100), 128 tokens per sequence, batch 8, all cores for both.
#
# Usage: bench/cpu_engine.sh [PYTHON]   PYTHON must have torch + transformers (default python3).
# Writes bench/results/cpu-engine.json.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
model=$(mktemp -d)
trap 'rm -rf "$model"' EXIT
threads=$(nproc)
build/bin/dflash-make-demo-model --out_dir="$model" --spm_model=build/demo-model/spm.model \
  --vocab_size=128100 --hidden_size=384 --layers=12 --heads=6 --intermediate_size=1536 >&2
ours=$(build/bin/dflash-bench-cpu --model="$model" --seq_len=128 --batch=8 --iterations=7 \
  --threads="$threads")
peer=$("$python" bench/transformers_cpu_bench.py --model "$model" --seq_len 128 --batch 8 \
  --iterations 7 --threads "$threads")
out="bench/results/cpu-engine.json"
"$python" - "$out" <<PY
import json, sys, datetime, platform
ours = json.loads('''$ours''')
peer = json.loads('''$peer''')
result = {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
          "cores": $threads, "command": "bench/cpu_engine.sh", "model": "deberta-v3-xsmall-shaped, random weights",
          "ours": ours, "transformers": peer,
          "speedup_vs_transformers": ours["tokens_per_s"] / peer["tokens_per_s"]}
json.dump(result, open(sys.argv[1], "w"), indent=2)
print(json.dumps(result, indent=2))
PY
