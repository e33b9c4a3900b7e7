#!/usr/bin/env bash
# Kernel changes waiting for the GPU: a stack of patches, NN-*.patch in $CANDIDATES (default
# bench/attention/candidates/, empty since v9.3 measured the last stack:
# bench/results/h200-attention-ab/v9.3-candidates/, made against CANDIDATES_BASE=5324652), each on
# the ones before it and on CANDIDATES_BASE (default HEAD). `build` makes one
# dflash-bench-attention per prefix of the stack (bench-base for CANDIDATES_BASE, then
# bench-<patch name> with that patch and every earlier one applied) and the kernel tests of the
# whole stack; `pack` puts them into the carried runtime folder; `run`, on the GPU host, runs
# the whole stack's tests and compute-sanitizer, then every build alternated in the same call
# (bench/attention/ablate.sh run) and the accuracy rows of base and the whole stack.
#
# Usage: bash bench/attention/candidates.sh build DIR   builds into DIR from a scratch
#          worktree of CANDIDATES_BASE (the checkout is not touched; about 3 minutes per build)
#        bash bench/attention/candidates.sh pack DIR    makes .carrypack/carry.tar.xz (git-ignored;
#          copy it to the GPU host beside the checkout)
#        bash bench/attention/candidates.sh run [ROUNDS]  on the GPU host: ROUNDS (3) rounds,
#          BF16 16k tokens, L = 128 ... 8192 and the MNLI-like mix; logs and rows in $OUT (the
#          same CANDIDATES as the build, for the builds' names)
set -euo pipefail
usage() { sed -n 2,18p "$0" | sed 's/^# \{0,1\}//'; }
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t patches < <(ls "${CANDIDATES:-$here/candidates}"/*.patch 2>/dev/null | sort)
names=()
for patch in "${patches[@]}"; do names+=("$(basename "$patch" .patch)"); done
case "${1:-}" in
  build)
    [[ $# -eq 2 && ${#patches[@]} -gt 0 ]] || { usage >&2; exit 2; }
    mkdir -p "$2"
    out=$(cd "$2" && pwd)
    repo=$(git -C "$here" rev-parse --show-toplevel)
    scratch=$(mktemp -d)
    trap 'git -C "$repo" worktree remove --force "$scratch/src" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
    git -C "$repo" worktree add --detach "$scratch/src" "${CANDIDATES_BASE:-HEAD}" >/dev/null
    cd "$scratch/src"
    export PATH="/usr/local/cuda/bin:$PATH"
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$scratch/cmake.log"
    echo "== building base ($(git rev-parse --short HEAD))"
    ninja -C build dflash-bench-attention > "$scratch/build-base.log" ||
      { tail -20 "$scratch/build-base.log"; exit 1; }
    cp build/bin/dflash-bench-attention "$out/bench-base"
    for i in "${!patches[@]}"; do
      echo "== building ${names[$i]}"
      git apply "${patches[$i]}"
      ninja -C build dflash-bench-attention > "$scratch/build-${names[$i]}.log" ||
        { tail -20 "$scratch/build-${names[$i]}.log"; exit 1; }
      cp build/bin/dflash-bench-attention "$out/bench-${names[$i]}"
    done
    ninja -C build disentangled_attention_test > "$scratch/build-tests.log" ||
      { tail -20 "$scratch/build-tests.log"; exit 1; }
    cp build/bin/disentangled_attention_test "$out/disentangled_attention_test-stack"
    echo "built base ${names[*]} and the stack's tests into $out"
    ;;
  pack)
    [[ $# -eq 2 ]] || { usage >&2; exit 2; }
    builds=$(cd "$2" && pwd)
    repo=$(git -C "$here" rev-parse --show-toplevel)
    cd "$repo"
    rm -rf .carry .carrypack
    scripts/collect-runtime.sh .carry "$builds"/bench-* "$builds"/disentangled_attention_test-stack
    strip --strip-debug .carry/bin/* .carry/lib/*
    mkdir -p .carrypack
    tar -cf - .carry | xz -T2 -6 > .carrypack/carry.tar.xz
    du -h .carrypack/carry.tar.xz
    ;;
  run)
    rounds=${2:-3}
    [[ -d .carry ]] || tar -xJf .carrypack/carry.tar.xz
    export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    out=${OUT:-/tmp/out}
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader || true
    # The whole stack's kernel tests and compute-sanitizer (kernel_checks.sh).
    # shellcheck source=bench/attention/kernel_checks.sh
    source "$here/kernel_checks.sh"
    attention_kernel_checks .carry/bin/disentangled_attention_test-stack "$out"
    ABLATE_VARIANTS="base ${names[*]}" ABLATE_LENGTHS=128,256,512,1024,2048,4096,8192 \
      ABLATE_MIX=true bash "$here/ablate.sh" run "$rounds" | tee "$out/ab.txt"
    last=${names[${#names[@]}-1]}
    for build in base "$last"; do
      .carry/bin/bench-"$build" --dtypes=bf16,fp16 --lengths=512,2048,8192 --mnli_mix=false \
        > "$out/accuracy-$build.txt" 2>&1 || echo "accuracy $build: the benchmark failed"
      echo "accuracy $build: $(awk '/^uniform/ {printf "%s/%s %s  ", $2, $6, $9}' "$out/accuracy-$build.txt")"
    done
    # The rounds' rows as one archive (few files to copy back).
    tar -czf "$out/ablation.tgz" -C "$out" ablation && rm -rf "$out/ablation"
    ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
