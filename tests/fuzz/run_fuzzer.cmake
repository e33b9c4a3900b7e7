# Runs one libFuzzer target for a bounded time on a fresh copy of its seed corpus (the committed
# corpus is never written to). Invoked by CTest:
#   cmake -DFUZZER=<exe> -DCORPUS=<seed dir> -DWORKDIR=<scratch dir> -DSECONDS=<n>
#         [-DDICT=<file>] -P run_fuzzer.cmake
foreach(var FUZZER CORPUS WORKDIR SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: ${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}/corpus" "${WORKDIR}/artifacts")
file(GLOB seeds "${CORPUS}/*")
if(NOT seeds)
  message(FATAL_ERROR "run_fuzzer.cmake: no seed files in ${CORPUS}")
endif()
file(COPY ${seeds} DESTINATION "${WORKDIR}/corpus")
set(extra)
if(DICT)
  list(APPEND extra "-dict=${DICT}")
endif()
execute_process(
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -rss_limit_mb=2048 -timeout=10
          -print_final_stats=1 -artifact_prefix=${WORKDIR}/artifacts/ ${extra}
          "${WORKDIR}/corpus"
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${result}); crashing inputs are in ${WORKDIR}/artifacts")
endif()
