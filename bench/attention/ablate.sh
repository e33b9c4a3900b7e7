#!/usr/bin/env bash
# Where a band tile's time goes, by ablation: builds dflash-bench-attention with parts of the
# warpgroup computed-window kernel switched off (bench/attention/ablation_hooks.patch; timing only,
# the results are wrong) and, on the GPU machine, times each build beside the unmodified one in the
# same call. Variants: base (the hooks, none set), noc2p / nop2c (no C2P / P2C window MMAs or
# stores; the barriers stay), nowin (neither), nobias (no per-element bias on band tiles), smem2
# (unchanged code given 100,000 bytes of shared memory: two CTAs per SM instead of three),
# nowinbar (no CTA barrier between a window's MMAs and its in-place store), nomid (no barrier
# before the next tile's TMA). The barrier variants race: each run has a 60 s limit.
#
# Usage: bash bench/attention/ablate.sh build DIR   here: builds the eight binaries into DIR from a
#          scratch worktree of HEAD (the checkout is not touched; minutes per variant on 2 cores)
#        bash bench/attention/ablate.sh run [ROUNDS] on the GPU machine, after
#          `scripts/collect-runtime.sh .carry DIR/bench-*` here: ROUNDS (2) rounds of every
#          variant, BF16 16k tokens, L = 128 ... 8192; one line of ms per variant and round, the
#          benchmark's rows in $OUT/ablation/<variant>-<round>.txt
set -euo pipefail
usage() { sed -n 2,16p "$0" | sed 's/^# \{0,1\}//'; }
variants=(base noc2p nop2c nowin nobias smem2 nowinbar nomid)
defines() {
  case "$1" in
    base) echo "" ;;
    noc2p) echo "#define ABL_NO_C2P" ;;
    nop2c) echo "#define ABL_NO_P2C" ;;
    nowin) printf '#define ABL_NO_C2P\n#define ABL_NO_P2C\n' ;;
    nobias) echo "#define ABL_NO_BIAS true" ;;
    smem2) echo "#define ABL_SMEM 100000" ;;
    nowinbar) echo "#define ABL_NO_WINDOW_BARRIERS true" ;;
    nomid) echo "#define ABL_NO_MID_BARRIER true" ;;
  esac
}
case "${1:-}" in
  build)
    [[ $# -eq 2 ]] || { usage >&2; exit 2; }
    mkdir -p "$2"
    out=$(cd "$2" && pwd)
    repo=$(git rev-parse --show-toplevel)
    patch=$(cd "$(dirname "$0")" && pwd)/ablation_hooks.patch
    scratch=$(mktemp -d)
    trap 'git -C "$repo" worktree remove --force "$scratch/src" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
    git -C "$repo" worktree add --detach "$scratch/src" HEAD >/dev/null
    cd "$scratch/src"
    git apply "$patch"
    cp kernels/attention/attention_fwd_kernel.cuh "$scratch/kernel"
    cp kernels/attention/disentangled_attention.cu "$scratch/host"
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$scratch/cmake.log"
    for variant in "${variants[@]}"; do
      echo "== building $variant"
      { defines "$variant"; cat "$scratch/kernel"; } > kernels/attention/attention_fwd_kernel.cuh
      { defines "$variant"; cat "$scratch/host"; } > kernels/attention/disentangled_attention.cu
      ninja -C build dflash-bench-attention > "$scratch/build-$variant.log" ||
        { tail -20 "$scratch/build-$variant.log"; exit 1; }
      cp build/bin/dflash-bench-attention "$out/bench-$variant"
    done
    echo "built ${variants[*]} into $out"
    ;;
  run)
    rounds=${2:-2}
    export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    out=${OUT:-/tmp/out}/ablation
    mkdir -p "$out"
    echo "ms at L = 128 512 1024 2048 8192"
    for round in $(seq "$rounds"); do
      for variant in "${variants[@]}"; do
        timeout 60 .carry/bin/bench-"$variant" --dtypes=bf16 --accuracy=false --mnli_mix=false \
          --lengths=128,512,1024,2048,8192 | grep '^uniform' > "$out/$variant-$round.txt" || true
        echo "$variant round $round: $(awk '{printf "%s ", $7}' "$out/$variant-$round.txt")"
      done
    done
    ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
