# CTest script (tests/CMakeLists.txt): cmake/DflashRevision.cmake, run by every build, writes the
# source tree's revision into its header, leaves the header untouched (same modification time,
# so nothing rebuilds) while the revision is the same, and rewrites a header left stale by an
# earlier commit. Arguments: SOURCE_DIR, SCRIPT (DflashRevision.cmake), WORK_DIR.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
  OUTPUT_VARIABLE want OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(out "${WORK_DIR}/dflash_revision.h")
set(expected_line "#define DFLASH_REVISION \"${want}\"")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(write_header)
  execute_process(COMMAND "${CMAKE_COMMAND}" "-DSOURCE_DIR=${SOURCE_DIR}" "-DOUT=${out}"
    -P "${SCRIPT}" RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "DflashRevision.cmake failed: ${status}")
  endif()
endfunction()

function(expect_revision when)
  file(READ "${out}" content)
  string(FIND "${content}" "${expected_line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${when}: expected '${expected_line}' in:\n${content}")
  endif()
endfunction()

write_header()
expect_revision("first run")
file(TIMESTAMP "${out}" first "%s")
execute_process(COMMAND "${CMAKE_COMMAND}" -E sleep 1.2)
write_header()
file(TIMESTAMP "${out}" second "%s")
if(NOT first STREQUAL second)
  message(FATAL_ERROR "an unchanged revision rewrote the header (${first} -> ${second})")
endif()
file(WRITE "${out}" "#pragma once\n#define DFLASH_REVISION \"stale-revision\"\n")
write_header()
expect_revision("after a stale header")
message(STATUS "revision header: '${want}', untouched when unchanged, refreshed when stale")
