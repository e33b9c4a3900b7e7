#!/usr/bin/env bash
# ncu profiles of the attention kernel on a GPU host (docs/gpu.md), for the stall and
# instruction breakdowns in kernels/attention/HISTORY.md: per shape, ncu's details page and its
# per-SASS-instruction source page (CSV: executed instructions and stall samples by reason).
# Expects the carried runtime folder from `scripts/collect-runtime.sh .carry
# build/bin/dflash-bench-attention`.
#
# Usage (on the GPU host): bash bench/attention/profile_on_gpu.sh [--pipes] [L:positions ...]
#   default shapes: 512:true 2048:true 2048:false (BF16, 16k tokens; positions=false is plain
#   attention through the same kernels). Results in $OUT/prof. --pipes: per shape, only the
#   utilisation of each SM pipe, the issue slots, shared-memory wavefronts and L2 throughput
#   (ncu metrics, seconds per shape), as $OUT/prof/<shape>.pipes.txt.
set -uo pipefail
if [[ "${1:-}" == "--help" ]]; then sed -n 2,12p "$0"; exit 0; fi
pipes=false
if [[ "${1:-}" == "--pipes" ]]; then pipes=true; shift; fi
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
out=${OUT:-/tmp/out}/prof
mkdir -p "$out"
shapes=("$@")
(( ${#shapes[@]} )) || shapes=(512:true 2048:true 2048:false)
for shape in "${shapes[@]}"; do
  length=${shape%%:*}
  positions=${shape##*:}
  name="L${length}_pos${positions}"
  echo "== $name"
  if $pipes; then
    ncu --clock-control none -k regex:DisentangledAttentionKernel --launch-skip 3 -c 1 \
      --metrics "regex:^sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$,regex:^sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$,sm__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second" \
      .carry/bin/dflash-bench-attention --dtypes=bf16 --lengths="$length" \
      --positions="$positions" --accuracy=false --mnli_mix=false --repeats=3 \
      > "$out/$name.pipes.txt" 2>&1
    echo "ncu exit $?"
    continue
  fi
  ncu --clock-control none --set full --import-source no -k regex:DisentangledAttentionKernel \
    --launch-skip 3 -c 1 -o "$out/$name" .carry/bin/dflash-bench-attention --dtypes=bf16 \
    --lengths="$length" --positions="$positions" --accuracy=false --mnli_mix=false --repeats=3 \
    > "$out/$name.run.txt" 2>&1
  echo "ncu exit $?"
  ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
  ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
  rm -f "$out/$name.ncu-rep"
done
