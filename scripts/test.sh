#!/usr/bin/env bash
# Runs every test of the project, in this order:
#   1. clang-format check of all C++/CUDA sources, and the commit-message rule
#      (scripts/check-commit-messages.sh, CONTRIBUTING.md) for commits made since it took effect;
#   2. the main build (GCC, CUDA compiled where the toolkit exists) and its CTest suite: unit,
#      golden-parity and engine tests; GPU tests skip with a visible message without a GPU;
#   3. an AddressSanitizer + UndefinedBehaviorSanitizer build and its CTest suite;
#   4. a ThreadSanitizer build of the concurrent server code (batcher, worker pool, admission,
#      metrics, the gRPC service end to end) and those tests (CMake label `tsan`);
#   5. the libFuzzer targets (clang) for DFLASH_FUZZ_SECONDS each (default 30);
#   6. the deploy checks (scripts/check-deploy.sh, on the main build): hadolint, the images'
#      runtime folder, kustomize + Kubernetes schemas, server and Envoy configs, promtool, and the
#      real Prometheus scraping a loaded server for every dashboard query and recording rule.
# Usage: scripts/test.sh            (after scripts/install-deps.sh)
# Disk: a fresh run's build trees take about 12.8 GB (build 3.9, build-asan 6.8, build-tsan 1.5,
# build-fuzz 0.6; measured on 2026-12-06). With DFLASH_TEST_PRUNE_BUILDS=1 (.ci/run sets it) each
# of build-asan, build-tsan and build-fuzz is deleted once its suite has passed, so the peak is
# build and build-asan together; without it they stay for quicker reruns. The run stops at once,
# saying so, where the disk cannot hold them.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${DFLASH_FUZZ_SECONDS:-30}
prune_builds=${DFLASH_TEST_PRUNE_BUILDS:-0}
summary=()
total_passed=0
total_failed=0
total_skipped=0

run_suite() {  # run_suite <name> <build-dir> <ctest args...>
  local name=$1 dir=$2
  shift 2
  local log
  log=$(mktemp)
  if ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log"; then
    local line failed total skipped
    line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1)
    failed=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
    total=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
    # CTest counts a skipped test (a GPU test without a GPU) as passed; count it apart.
    skipped=$(grep -cE '\(Skipped\)$' "$log" || true)
    total_passed=$((total_passed + total - failed - skipped))
    total_failed=$((total_failed + failed))
    total_skipped=$((total_skipped + skipped))
    summary+=("$name: $line ($skipped skipped)")
    rm -f "$log"
  else
    summary+=("$name: FAILED")
    rm -f "$log"
    printf '%s\n' "${summary[@]}"
    exit 1
  fi
}

check_disk() {  # Free space plus the existing trees (rebuilt in place) against the need.
  local need_mb=14000 free_mb existing_mb
  if (( prune_builds )); then need_mb=11500; fi
  free_mb=$(df -P -BM . | awk 'NR == 2 { print $4 + 0 }')
  # (du fails on the trees that do not exist yet; its total covers those that do.)
  existing_mb=$({ du -smc build build-asan build-tsan build-fuzz 2> /dev/null || true; } |
    awk 'END { print $1 + 0 }')
  echo "disk: ${free_mb} MB free, ${existing_mb} MB in existing build trees; about ${need_mb} MB" \
    "needed"
  if (( free_mb + existing_mb < need_mb )); then
    echo "scripts/test.sh: not enough disk for the build trees: free about" \
      "$((need_mb - free_mb - existing_mb)) MB more in $(pwd)" \
      "(DFLASH_TEST_PRUNE_BUILDS=1 needs 2.5 GB less)" >&2
    exit 1
  fi
}
remove_build() {  # remove_build <dir>: with DFLASH_TEST_PRUNE_BUILDS=1, once its suite passed.
  if (( prune_builds )); then rm -rf "$1"; fi
}

check_disk
echo "== 1/6 format and commit messages"
scripts/check-format.sh
scripts/check-commit-messages.sh

echo "== 2/6 main build and tests"
# scripts/build.sh, the build step of the README and of the Dockerfile's build stages.
DFLASH_BUILD_DIR=build scripts/build.sh
run_suite "main" build

echo "== 3/6 ASan/UBSan build and tests"
cmake -S . -B build-asan -G Ninja -DDFLASH_SANITIZE=address,undefined -DDFLASH_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
run_suite "asan+ubsan" build-asan
unset ASAN_OPTIONS UBSAN_OPTIONS
remove_build build-asan

echo "== 4/6 TSan build and concurrent server tests"
cmake -S . -B build-tsan -G Ninja -DDFLASH_SANITIZE=thread -DDFLASH_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-tsan -j "$jobs" --target dflash_tsan_tests
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# Only the `tsan` binaries are built there; CTest lists the other gtest binaries as
# <target>_NOT_BUILT, and the fuzz replays (label fuzz) and the command-line checks of the tools
# (label cli: --help, dflash-classify) run binaries it does not build.
run_suite "tsan" build-tsan -E '_NOT_BUILT$' -LE '^(fuzz|cli)$'
unset TSAN_OPTIONS
remove_build build-tsan

echo "== 5/6 fuzzing (${fuzz_seconds}s per target)"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DDFLASH_FUZZ=ON -DDFLASH_CUDA=OFF -DDFLASH_FUZZ_SECONDS="$fuzz_seconds" >/dev/null
cmake --build build-fuzz -j "$jobs" --target safetensors_header_fuzz model_config_fuzz \
  request_message_fuzz torch_pickle_fuzz zip_archive_fuzz kserve_infer_fuzz tokenizer_json_fuzz \
  http_request_fuzz
run_suite "fuzz" build-fuzz -L fuzz
remove_build build-fuzz

echo "== 6/6 deploy checks"
deploy_log=$(mktemp)
if scripts/check-deploy.sh build 2>&1 | tee "$deploy_log"; then
  line=$(grep -E '^prometheus_test: [0-9]+ passed, [0-9]+ failed' "$deploy_log" | tail -1)
  deploy_passed=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
  total_passed=$((total_passed + deploy_passed))
  summary+=("deploy: hadolint, runtime folder, kustomize + schemas, configs, promtool ok; $line")
  rm -f "$deploy_log"
else
  rm -f "$deploy_log"
  summary+=("deploy: FAILED")
  printf '%s\n' "${summary[@]}"
  exit 1
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
echo "${total_passed} passed, ${total_failed} failed, ${total_skipped} skipped"
