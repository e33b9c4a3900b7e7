#!/usr/bin/env bash
# The CUDA engine's GPU run (docs/gpu.md): the engine's GPU tests, the benchmark
# against transformers eager on a deberta-v3-base-shaped model (bench/results/h200-engine.json),
# parity on v3-large- and v2-xlarge-shaped models, and the service on the GPU (dflash-server with
# backend cuda, dflash-cli, dflash-loadtest). Everything lands in $OUT.
#
# Build and pack on the build machine, then copy .carrypack/ beside a checkout on the GPU host
# and run there:
#   scripts/collect-runtime.sh .carry build/bin/{cuda_engine_test,dflash-bench-engine,dflash-server,\
#     dflash-cli,dflash-loadtest,dflash-make-demo-model} build/lib/libdflash_sentencepiece_shim.so
#   strip --strip-debug .carry/bin/* .carry/lib/*; cp build/demo-model/spm.model .carry/
#   mkdir -p .carrypack; tar -cf - .carry | xz -T2 -6 > .carrypack/carry.tar.xz
# Usage (on the GPU host): bash bench/engine/run_on_gpu.sh [--skip-tests] [--skip-service]
#        [--skip-parity-shapes]   (no v3-large / v2-xlarge parity: the v3-base parts only)
#        bash bench/engine/run_on_gpu.sh --parity-shapes-only   (the v3-large / v2-xlarge parity
#        section alone: no tests, no v3-base benchmark, no service)
#        bash bench/engine/run_on_gpu.sh --two-gpus   (a two-GPU host: the two-device test and
#        the service on devices [0, 1] under load)
set -uo pipefail
if [[ "${1:-}" == "--help" ]]; then sed -n 2,18p "$0"; exit 0; fi
skip_tests=0; skip_service=0; skip_shapes=0; two_gpus=0; only_shapes=0
for arg in "$@"; do
  case "$arg" in
    --skip-tests) skip_tests=1 ;;
    --skip-service) skip_service=1 ;;
    --skip-parity-shapes) skip_shapes=1 ;;
    --two-gpus) two_gpus=1 ;;
    --parity-shapes-only) only_shapes=1; skip_tests=1; skip_service=1 ;;
    *) echo "unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
[[ -d .carry ]] || tar -xJf .carrypack/carry.tar.xz
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export DFLASH_SOURCE_DIR="$PWD" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
work=/tmp/dfe
mkdir -p "$out" "$work"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
source bench/server_health.sh

# Serves the demo model with backend $BACKEND (default cuda) on `devices` (YAML list) and loads
# it; writes reports named after `tag`.
serve_and_load() {
  local devices=$1 tag=$2
  shift 2
  .carry/bin/dflash-make-demo-model --out_dir="$work/demo" --spm_model=.carry/spm.model > /dev/null
  cat > "$work/server.yaml" <<YAML
server:
  listen: 127.0.0.1:50151
  metrics_listen: 127.0.0.1:9564
models:
  - name: demo
    path: $work/demo
    backend: ${BACKEND:-cuda}
    dtype: float16
    devices: $devices
YAML
  DFLASH_SENTENCEPIECE_SHIM="$PWD/.carry/lib/libdflash_sentencepiece_shim.so" \
    .carry/bin/dflash-server --config="$work/server.yaml" > "$out/server-$tag.log" 2>&1 &
  local server=$!
  wait_until_serving .carry/bin/dflash-cli 50151 "$server" "$out/server-$tag.log" 60 || return 1
  .carry/bin/dflash-cli info --target=127.0.0.1:50151 2>&1 | head -c 1200; echo
  .carry/bin/dflash-cli classify --target=127.0.0.1:50151 --model=demo \
    --text="A man is playing a guitar on stage." --text_pair="Someone makes music." 2>&1 | head -8
  for spec in "$@"; do
    read -r workload mode concurrency <<< "$spec"
    .carry/bin/dflash-loadtest --target=127.0.0.1:50151 \
      --workload="loadtest/workloads/$workload.json" --corpus=config/demo/corpus.txt \
      --mode="$mode" --concurrency="$concurrency" --channels=4 --duration=10s --warmup=2s \
      --report="$out/loadtest-$tag-$workload-c$concurrency.json" 2>/dev/null | tail -12
  done
  curl -s 127.0.0.1:9564/metrics | grep -E "^dflash_(device_memory|model_info|batches_total)" \
    > "$out/metrics-$tag.txt"
  cat "$out/metrics-$tag.txt"
  kill -TERM "$server"; wait "$server"; echo "server exit $?"
  tail -3 "$out/server-$tag.log"
}

if (( two_gpus )); then
  echo "== two GPUs"
  .carry/bin/cuda_engine_test --gtest_filter='CudaEngineTest.TwoDevices*' 2>&1 | tail -4
  serve_and_load "[0, 1]" gpu-x2 "classify_64 closed 64" "classify_64 closed 128" \
    "mnli_mix closed 64"
  exit 0
fi

if (( ! skip_tests )); then
  echo "== CUDA engine tests"
  .carry/bin/cuda_engine_test > "$out/cuda_engine_test.log" 2>&1
  status=$?
  echo "exit $status"
  if (( status != 0 )); then  # cuBLAS's own log names the failing call and why.
    CUBLAS_LOGINFO_DBG=1 CUBLAS_LOGDEST_DBG=stderr .carry/bin/cuda_engine_test \
      --gtest_filter='CudaEngineTest.*' 2>&1 | grep -i -E -B2 "error|fail" | head -40
  fi
  grep -E "cuda-golden|Failure|FAILED|PASSED|SKIPPED \]" "$out/cuda_engine_test.log" | head -60
fi

echo "== models and pairs"
shapes=v3-base,v3-large,v2-xlarge
(( only_shapes )) && shapes=v3-large,v2-xlarge
python3 bench/engine/make_random_models.py --out "$work/models" \
  --shapes "$shapes" --num-labels 3 --seed 0 --device cuda 2>&1 | tail -12
python3 bench/engine/mnli_like_pairs.py --out "$work/mnli_like.jsonl" 2>&1 | tail -2

command="bash bench/engine/run_on_gpu.sh (make_random_models.py, mnli_like_pairs.py, hf_baseline.py, dflash-bench-engine --dtype=fp16, make_engine_results.py)"
if (( ! only_shapes )); then
echo "== transformers eager baseline (v3-base, fp16)"
python3 bench/engine/hf_baseline.py --model "$work/models/v3-base" --pairs "$work/mnli_like.jsonl" \
  --out "$work/hf.json" --device cuda --dtype fp16 --parity-count 512 \
  --parity-out "$work/parity" 2>&1 | tail -15
echo "== ours (v3-base, fp16)"
.carry/bin/dflash-bench-engine --model="$work/models/v3-base" --pairs="$work/mnli_like.jsonl" \
  --dtype=fp16 --parity_count=512 --parity_prefix="$work/parity" --json="$work/ours.json" \
  2>&1 | grep -v "^wrote" | tail -40
python3 bench/engine/make_engine_results.py --ours "$work/ours.json" --hf "$work/hf.json" \
  --parity-prefix "$work/parity" --gpu "$gpu" --command "$command" \
  --out "$out/h200-engine.json" 2>&1 | tail -5
cp "$work/ours.json" "$out/ours_v3-base.json"; cp "$work/hf.json" "$out/hf_v3-base.json"
fi

for shape in v3-large v2-xlarge; do
  (( skip_shapes )) && break
  echo "== parity on $shape"
  python3 bench/engine/hf_baseline.py --model "$work/models/$shape" \
    --pairs "$work/mnli_like.jsonl" --out "$work/hf_$shape.json" --device cuda --dtype fp16 \
    --skip-long --batches "" --sorted-batch 0 --single-runs 10 --parity-count 256 \
    --parity-out "$work/parity_$shape" 2>&1 | tail -3
  .carry/bin/dflash-bench-engine --model="$work/models/$shape" --pairs="$work/mnli_like.jsonl" \
    --dtype=fp16 --repeats=1 --long_sequences=false --parity_count=256 \
    --parity_prefix="$work/parity_$shape" --json="$work/ours_$shape.json" \
    > "$work/bench_$shape.log" 2>&1
  grep -E "MNLI|128-token|Error|error" "$work/bench_$shape.log" | head -8
  python3 bench/engine/make_engine_results.py --ours "$work/ours_$shape.json" \
    --hf "$work/hf_$shape.json" --parity-prefix "$work/parity_$shape" --gpu "$gpu" \
    --command "$command" --out "$out/h200-engine-parity-$shape.json" 2>&1 | tail -3
done

if (( ! skip_service )); then
  echo "== the service on the GPU (demo model, backend cuda)"
  serve_and_load "[0]" gpu "classify_64 closed 1" "classify_64 closed 64" "mnli_mix closed 32"
  echo "== the service on the GPU with backend auto"
  BACKEND=auto serve_and_load "[0]" gpu-auto "classify_64 closed 1"
  grep -E "backend auto chose|model 'demo' ready" "$out/server-gpu-auto.log"
fi

# Everything travels back as one archive (few files to copy).
(cd "$out" && tar -czf /tmp/run_on_gpu_results.tgz .) && rm -rf "${out:?}"/* &&
  mv /tmp/run_on_gpu_results.tgz "$out/results.tgz"
echo "results: $out/results.tgz"
