#!/usr/bin/env bash
# The attention kernel's GPU run (docs/gpu.md): the kernel tests, compute-sanitizer on small cases,
# the benchmark, the SDPA ceiling and the Triton peers, results joined into $OUT (default
# /tmp/out).
# Expects the carried runtime folder from `scripts/collect-runtime.sh .carry build/bin/{
# disentangled_attention_test,dflash-bench-attention,attention_tuning_test}` (the tuner's tests run
# when carried). The peers (FlashDeBERTa 0.0.8, DisentangledFlash 1.1.1) are measured in the same
# run when their wheels are carried too: `bash bench/attention/fetch_peer_wheels.sh` on the build
# machine once, then copy .whl/ beside .carry/; without .whl/ the best-peer ratios use the reference times of
# kernels/attention/HISTORY.md only.
#
# Usage (on the GPU host): bash bench/attention/run_on_gpu.sh [--skip-tests]
#   --skip-tests: only the benchmark, the SDPA ceiling and the peers (the tests and
#   compute-sanitizer ran in an earlier run of the same build).
set -uo pipefail
skip_tests=0
for arg in "$@"; do
  case "$arg" in
    --skip-tests) skip_tests=1 ;;
    *) echo "unknown argument $arg (usage: bash $0 [--skip-tests])" >&2; exit 2 ;;
  esac
done
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# shellcheck source=bench/attention/kernel_checks.sh
source "$(dirname "$0")/kernel_checks.sh"

if (( ! skip_tests )); then
echo "== kernel tests and compute-sanitizer (memcheck, racecheck) on small cases"
attention_kernel_checks .carry/bin/disentangled_attention_test "$out"
if [[ -x .carry/bin/attention_tuning_test ]]; then
  .carry/bin/attention_tuning_test > "$out/attention_tuning_test.log" 2>&1
  echo "attention_tuning_test exit $?: $(grep -E '^\[  (PASSED|FAILED) ' "$out/attention_tuning_test.log" | tr '\n' ' ')"
fi
fi

echo "== benchmark"
command="dflash-bench-attention --dtypes=bf16,fp16 --head_dims=64 + --head_dims=32,128 (bf16) + --dtypes=tf32 + --positions=false (bf16, plain attention through the same kernels); sdpa_bench.py (same shapes)"
# The Triton peers travel as two pure-Python wheels (torch, triton, transformers and einops are on
# the GPU host already).
peers=0
if compgen -G ".whl/flashdeberta-*.whl" > /dev/null && \
    compgen -G ".whl/disentangled_flash-*.whl" > /dev/null; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; then
    peers=1
  else
    echo "peers: installing .whl/ failed: best-peer ratios use HISTORY.md's reference times"
  fi
else
  echo "peers not carried (.whl/ missing): best-peer ratios use HISTORY.md's reference times"
fi
.carry/bin/dflash-bench-attention --dtypes=bf16,fp16 --head_dims=64 --json="$out/ours.jsonl"
.carry/bin/dflash-bench-attention --dtypes=bf16 --head_dims=32,128 \
  --lengths=128,512,2048,8192 --json="$out/ours_dims.jsonl"
cat "$out/ours_dims.jsonl" >> "$out/ours.jsonl"
.carry/bin/dflash-bench-attention --dtypes=tf32 --head_dims=64 --lengths=128,512,2048,8192 \
  --json="$out/ours_tf32.jsonl"
cat "$out/ours_tf32.jsonl" >> "$out/ours.jsonl"
.carry/bin/dflash-bench-attention --dtypes=bf16 --head_dims=64 --positions=false --accuracy=false \
  --mnli_mix=false --json="$out/ours_nopos.jsonl"
cat "$out/ours_nopos.jsonl" >> "$out/ours.jsonl"
python3 bench/attention/sdpa_bench.py --json "$out/sdpa.jsonl" --dtypes bf16,fp16 --head_dims 64
python3 bench/attention/sdpa_bench.py --json "$out/sdpa_dims.jsonl" --dtypes bf16 --head_dims 32,128 \
  --lengths 128,512,2048,8192
cat "$out/sdpa_dims.jsonl" >> "$out/sdpa.jsonl"
peers_args=()
if (( peers )); then
  echo "== Triton peers (FlashDeBERTa, DisentangledFlash), same shapes"
  # --mixes_from: the MNLI-like mix of our rows, on the same sequence lengths.
  python3 bench/attention/peers_bench.py --json "$out/peers.jsonl" --dtypes bf16,fp16 \
    --head_dims 64 --mixes_from "$out/ours.jsonl"
  python3 bench/attention/peers_bench.py --json "$out/peers_dims.jsonl" --dtypes bf16 \
    --head_dims 32,128 --lengths 128,512,2048,8192 --mixes_from "$out/ours.jsonl"
  [[ -f "$out/peers_dims.jsonl" ]] && cat "$out/peers_dims.jsonl" >> "$out/peers.jsonl"
  if [[ -s "$out/peers.jsonl" ]]; then
    peers_args=(--peers "$out/peers.jsonl")
    command+="; peers_bench.py --mixes_from ours.jsonl (FlashDeBERTa 0.0.8, DisentangledFlash 1.1.1 from .whl/; same shapes and the same MNLI-like mix, each peer's faster layout)"
  fi
fi
python3 bench/attention/make_results.py --ours "$out/ours.jsonl" --sdpa "$out/sdpa.jsonl" \
  ${peers_args[@]+"${peers_args[@]}"} \
  --gpu "$gpu" --command "bash bench/attention/run_on_gpu.sh ($command)" \
  --out "$out/h200-attention.json"

# Everything travels back as one archive (few files to copy).
(cd "$out" && tar -czf /tmp/run_on_gpu_results.tgz .) && rm -rf "${out:?}"/* &&
  mv /tmp/run_on_gpu_results.tgz "$out/results.tgz"
echo "results: $out/results.tgz"
