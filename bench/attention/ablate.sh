#!/usr/bin/env bash
# Where a band tile's time goes, by ablation: builds dflash-bench-attention with parts of the
# warpgroup computed-window kernel switched off (bench/attention/ablation_hooks.patch; timing only,
# the results are wrong) and, on the GPU host, times each build beside the unmodified one in the
# same call. Variants: base (the hooks, none set), noc2p / nop2c (no C2P / P2C window MMAs or
# stores; the barriers stay), nowin (neither), nobias (no per-element bias on band tiles), smem2
# (unchanged code given 100,000 bytes of shared memory: two CTAs per SM instead of three),
# nowinbar (no CTA barrier between a window's MMAs and its in-place store), nomid (no barrier
# before the next tile's TMA), reg4 (registers capped at 128, for four CTAs per SM), alias (one V
# buffer, one bias region for both windows: 47,906 bytes of shared memory), occ4 (alias and reg4:
# four CTAs, sixteen warps per SM), seq (a window's two halves one after the other: 126 registers
# uncapped), occ4seq (occ4 with seq: four CTAs without spills or serialised wgmma), occ4late
# (occ4seq with the copy schedule of a four-CTA layout that fits: V(n) and tile n's PosK rows
# issued late, one more CTA barrier per tile). The barrier and alias variants race: each run has a
# 60 s limit. ABLATE_VARIANTS="base reg4 ..." limits a build or a run to those variants.
#
# Usage: bash bench/attention/ablate.sh build DIR   builds the variants' binaries into DIR from a
#          scratch worktree of ABLATE_BASE (the checkout is not touched; minutes per variant on 2 cores)
#          (ABLATE_BASE, default 4eaaa4b: the v8.1 kernel, which the patch is made against)
#        bash bench/attention/ablate.sh run [ROUNDS] on the GPU host, after
#          `scripts/collect-runtime.sh .carry DIR/bench-*`: ROUNDS (2) rounds of every
#          variant, BF16 16k tokens, L = 128 ... 8192; one line of ms per variant and round, the
#          benchmark's rows in $OUT/ablation/<variant>-<round>.txt. Any builds' bench-<name>
#          binaries can be alternated this way (a same-call A/B): ABLATE_LENGTHS="128,...,8192"
#          sets the lengths, ABLATE_MIX=true adds the MNLI-like mix (its row last on each line).
set -euo pipefail
usage() { sed -n 2,23p "$0" | sed 's/^# \{0,1\}//'; }
read -r -a variants <<< "${ABLATE_VARIANTS:-base noc2p nop2c nowin nobias smem2 nowinbar nomid reg4 alias occ4 seq occ4seq occ4late}"
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
    reg4) echo "#define ABL_REG4" ;;
    alias) echo "#define ABL_ALIAS" ;;
    occ4) printf '#define ABL_ALIAS\n#define ABL_REG4\n' ;;
    seq) echo "#define ABL_SEQ_HALVES" ;;
    occ4seq) printf '#define ABL_ALIAS\n#define ABL_REG4\n#define ABL_SEQ_HALVES\n' ;;
    occ4late)
      printf '#define ABL_ALIAS\n#define ABL_REG4\n#define ABL_SEQ_HALVES\n#define ABL_LATE\n' ;;
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
    git -C "$repo" worktree add --detach "$scratch/src" "${ABLATE_BASE:-4eaaa4b}" >/dev/null
    cd "$scratch/src"
    git apply "$patch"
    # reg4 / occ4 spill (48 bytes): timing builds allow it.
    sed -i 's/ -Xptxas=-warn-spills//' kernels/CMakeLists.txt
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
    lengths=${ABLATE_LENGTHS:-128,512,1024,2048,8192}
    echo "ms at L = ${lengths//,/ }$([[ ${ABLATE_MIX:-false} == true ]] && echo ' mix')"
    for round in $(seq "$rounds"); do
      for variant in "${variants[@]}"; do
        timeout 60 .carry/bin/bench-"$variant" --dtypes=bf16 --accuracy=false \
          --mnli_mix="${ABLATE_MIX:-false}" --lengths="$lengths" |
          grep -E '^(uniform|mnli_mix)' > "$out/$variant-$round.txt" || true
        echo "$variant round $round: $(awk '{printf "%s ", $7}' "$out/$variant-$round.txt")"
      done
    done
    ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
