#!/usr/bin/env bash
# float32 on the GPU (docs/gpu.md): strict float32 (no TF32) of the CUDA engine against
# transformers float32 eager with TF32 off, on a random deberta-v3-large-shaped model: one
# sequence each of 128 ... 16384 tokens (and the odd lengths 4097 and 10000), both timed alone, and
# the relative L2 error of our logits against transformers'; then the server's start-up (seconds
# from launch to health SERVING, and from the uploaded weights to ready) for float16, bfloat16 and
# float32 at max_input_length 1024 / 16384 / 32768. Environment: LENGTHS (comma-separated) and
# STARTUP_DTYPES (space-separated) narrow a run to some rows. Writes $OUT/<gpu>-fp32.json (<gpu>:
# h200, h100 or gpu after the GPU's name; bench/results/<gpu>-fp32.json once committed) and the
# logs.
#
# Build and pack on the build machine, then copy .carrypack/ beside a checkout on the GPU host:
#   scripts/collect-runtime.sh .carry build/bin/{disentangled_attention_test,cuda_engine_test,\
#     dflash-bench-engine,dflash-server,dflash-cli} build/lib/libdflash_sentencepiece_shim.so
#   strip --strip-debug .carry/bin/* .carry/lib/*; cp build/demo-model/spm.model .carry/
#   mkdir -p .carrypack; tar -cf - .carry | xz -T2 -6 > .carrypack/carry.tar.xz
# Usage (on the GPU host): bash bench/engine/fp32_on_gpu.sh [--skip-tests] [--skip-startup]
# About 6 minutes on an H200 (tests 2, comparison 2, start-ups 2).
set -uo pipefail
if [[ "${1:-}" == "--help" ]]; then sed -n 2,18p "$0"; exit 0; fi
skip_tests=0; skip_startup=0
for arg in "$@"; do
  case "$arg" in
    --skip-tests) skip_tests=1 ;;
    --skip-startup) skip_startup=1 ;;
    *) echo "unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
[[ -d .carry ]] || tar -xJf .carrypack/carry.tar.xz
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export DFLASH_SOURCE_DIR="$PWD" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
work=/tmp/dfp32
mkdir -p "$out" "$work"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
lengths=${LENGTHS:-128,256,512,1024,2048,4096,4097,8192,10000,16384}

if (( ! skip_tests )); then
  echo "== float32 attention tests"
  timeout 240 .carry/bin/disentangled_attention_test \
    --gtest_filter='*Float32*:*Tf32*:*fp32*:*PaddedLayout*:AttentionArgumentsTest.*:AttentionConfigTest.*' \
    > "$out/disentangled_attention_test_fp32.log" 2>&1
  echo "exit $?"
  grep -E "3xtf32|simt|FAILED|Failure|PASSED|SKIPPED \]" "$out/disentangled_attention_test_fp32.log" |
    head -60
  echo "== CUDA engine tests (float32 goldens, TF32 engine, long sequences)"
  timeout 180 .carry/bin/cuda_engine_test --gtest_filter='-*TwoDevices*' \
    > "$out/cuda_engine_test.log" 2>&1
  echo "exit $?"
  grep -E "cuda-golden|Failure|FAILED|PASSED|SKIPPED \]" "$out/cuda_engine_test.log" | head -40
fi

echo "== model and inputs"
python3 bench/engine/make_random_models.py --out "$work/models" --shapes v3-large \
  --num-labels 3 --seed 0 --device cuda 2>&1 | tail -3
model="$work/models/v3-large"
cp .carry/spm.model "$model/"  # The server loads a tokenizer; the ids below bypass it.
python3 - "$work/sequences.jsonl" "$lengths" <<'PY'
import sys
sys.path.insert(0, "bench/engine")
import numpy as np
import engine_common as common
rng = np.random.default_rng(40)
rows = []
for length in (int(v) for v in sys.argv[2].split(",")):
    ids = rng.integers(common.FIRST_PIECE_ID, common.LAST_PIECE_ID + 1, length).tolist()
    ids[0], ids[-1] = common.CLS_ID, common.SEP_ID
    rows.append(ids)
common.write_pairs(sys.argv[1], rows)
PY

echo "== ours, strict float32"
.carry/bin/dflash-bench-engine --model="$model" --sequences="$work/sequences.jsonl" --dtype=fp32 \
  --sequence_runs=5 --sequence_logits="$work/ours_fp32.f32" --json="$work/ours_fp32.json" \
  2>&1 | grep -E "sequence|rror" | tail -12
echo "== transformers float32 eager, TF32 off"
python3 bench/engine/hf_baseline.py --model "$model" --sequences "$work/sequences.jsonl" \
  --out "$work/hf_fp32.json" --device cuda --dtype fp32 --sequence-runs 3 \
  --sequence-logits "$work/hf_fp32.f32" --ours-sequence-logits "$work/ours_fp32.f32" \
  2>&1 | grep -E "sequence of|rror" | tail -12
cp "$work/ours_fp32.json" "$work/hf_fp32.json" "$out/"

# Seconds from launch to health SERVING of dflash-server serving $model in `dtype` at
# `max_length` (max_batch_tokens: the larger of 16384 and max_length); the log beside.
startup() {
  local dtype=$1 max_length=$2
  local tokens=$(( max_length > 16384 ? max_length : 16384 ))
  local tag="$dtype-$max_length"
  cat > "$work/server-$tag.yaml" <<YAML
server:
  listen: 127.0.0.1:50161
  metrics_listen: ""
models:
  - name: large
    path: $model
    backend: cuda
    dtype: $dtype
    max_input_length: $max_length
    batching:
      max_batch_tokens: $tokens
YAML
  local start=$EPOCHREALTIME
  DFLASH_SENTENCEPIECE_SHIM="$PWD/.carry/lib/libdflash_sentencepiece_shim.so" \
    .carry/bin/dflash-server --config="$work/server-$tag.yaml" > "$out/server-$tag.log" 2>&1 &
  local server=$! serving=null elapsed
  while kill -0 "$server" 2> /dev/null; do
    elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    if .carry/bin/dflash-cli health --target=127.0.0.1:50161 --timeout=2s > /dev/null 2>&1; then
      serving=$elapsed  # (When the successful check was sent.)
      break
    fi
    if awk -v e="$elapsed" 'BEGIN { exit !(e > 150) }'; then break; fi
    sleep 0.2
  done
  kill -TERM "$server" 2> /dev/null; wait "$server" 2> /dev/null
  echo "{\"dtype\": \"$dtype\", \"max_input_length\": $max_length, \"max_batch_tokens\": $tokens," \
    "\"seconds_to_serving\": $serving}" >> "$work/startup.jsonl"
  echo "$tag: SERVING after $serving s"
  grep -E "weights|ready in|rror" "$out/server-$tag.log" | tail -3
}

rm -f "$work/startup.jsonl"
if (( ! skip_startup )); then
  echo "== server start-up"
  for dtype in ${STARTUP_DTYPES:-float16 bfloat16 float32}; do
    for max_length in 1024 16384 32768; do startup "$dtype" "$max_length"; done
  done
fi

python3 - "$work" "$out" "$gpu" <<'PY'
import datetime, json, os, re, sys
work, out, gpu = sys.argv[1:]
ours = json.load(open(f"{work}/ours_fp32.json"))
hf = json.load(open(f"{work}/hf_fp32.json"))
rows = []
for mine, theirs in zip(ours["sequences"], hf["sequences"]):
    assert mine["tokens"] == theirs["tokens"]
    rows.append({"L": mine["tokens"], "ours_ms": round(mine["ms"], 3),
                 "transformers_fp32_ms": None if theirs["ms"] is None else round(theirs["ms"], 3),
                 "speedup": None if theirs["ms"] is None else round(theirs["ms"] / mine["ms"], 2),
                 "rel_l2_err": theirs.get("rel_l2_err"), "max_abs_err": theirs.get("max_abs_err"),
                 "transformers_peak_gib": theirs.get("peak_gib")})


def stamp(line):
    return datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")


startup = []
if os.path.exists(f"{work}/startup.jsonl"):
    for line in open(f"{work}/startup.jsonl"):
        row = json.loads(line)
        log = open(f"{out}/server-{row['dtype']}-{row['max_input_length']}.log").read().splitlines()
        # From the engine's line after its weights are on the device to the model's ready line.
        weights = [l for l in log if re.search(r"weights [0-9.]+ MiB", l)]
        ready = [l for l in log if "' ready in " in l]
        if weights and ready:
            row["seconds_after_weights"] = round(
                (stamp(ready[-1]) - stamp(weights[0])).total_seconds(), 2)
            row["ready_in_s"] = float(re.search(r"ready in ([0-9.]+) s", ready[-1]).group(1))
        startup.append(row)
result = {
    "description": "Strict float32 (no TF32) CUDA engine against transformers float32 eager with "
                   "TF32 off (torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False), "
                   "one sequence of L tokens each, random deberta-v3-large-shaped classifier "
                   "(bench/engine/make_random_models.py, seed 0); rel_l2_err: ||ours - hf|| / ||hf|| "
                   "of the logits. Start-up: dflash-server from launch to grpc health SERVING, "
                   "and from the engine's weights upload to the model's ready line.",
    "gpu": gpu,
    "command": "bash bench/engine/fp32_on_gpu.sh",
    "environment": hf.get("environment"),
    "rows": rows,
    "startup": startup,
}
prefix = next((name.lower() for name in ("H200", "H100") if name in gpu), "gpu")
json.dump(result, open(f"{out}/{prefix}-fp32.json", "w"), indent=2)
print(json.dumps(result, indent=2))
PY
