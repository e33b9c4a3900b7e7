#!/usr/bin/env bash
# The attention kernel's checks on a GPU host, sourced by run_on_gpu.sh and candidates.sh:
# the whole kernel test binary, then compute-sanitizer memcheck and racecheck on small cases that
# reach every kernel family (single sequences and length one, the padded layout, infinities in a
# neighbouring sequence, mixed lengths to 1000 with band and saturated tiles at d = 32 / 64 / 128,
# and the TF32 kernel). Prints one summary line per step (and the failed tests); logs in OUT_DIR:
# attention_test.log, sanitizer_memcheck.log, sanitizer_racecheck.log. Never exits the caller
# (its `set -e` included): a failing step is reported by its line.
#
# Usage (sourced): attention_kernel_checks TEST_BINARY OUT_DIR
attention_kernel_checks() {
  local tests=$1 out=$2 status tool
  status=0
  "$tests" > "$out/attention_test.log" 2>&1 || status=$?
  echo "kernel tests exit $status: $(grep -E '^\[  (PASSED|FAILED) ' "$out/attention_test.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure' "$out/attention_test.log" | head -20 || true
  local filter='AttentionTest.SingleSequencesAndLengthOne:AttentionTest.PaddedLayoutEqualsPackedOnValidRows'
  filter+=':AttentionTest.InfinitiesStayInTheirSequence'
  local suite='AllTypes/AttentionAccuracyTest.PackedMixedLengthsMatchFloat64'
  filter+=":$suite/bf16_d64_c2p_p2c:$suite/fp16_d64_c2p:$suite/fp16_d32_p2c:$suite/fp16_d128_c2p"
  filter+=':HeadDims/Tf32Test.PackedMixedLengthsMatchFloat64/d64_p2c'
  for tool in memcheck racecheck; do
    status=0
    timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$tests" \
      --gtest_filter="$filter" > "$out/sanitizer_$tool.log" 2>&1 || status=$?
    echo "$tool exit $status: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)"
  done
}
