# Warnings are errors for every target of the project (C++ only: nvcc gets its own flags).
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wpedantic;-Werror;-Wshadow;-Wnon-virtual-dtor;-Wcast-align;-Wunused;-Woverloaded-virtual;-Wimplicit-fallthrough>")

if(DFLASH_SANITIZE)
  message(STATUS "dflash: sanitizers ${DFLASH_SANITIZE}")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${DFLASH_SANITIZE};-fno-omit-frame-pointer;-fno-sanitize-recover=all>")
  add_link_options("-fsanitize=${DFLASH_SANITIZE}")
endif()

if(DFLASH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DFLASH_FUZZ=ON needs clang (configure with -DCMAKE_CXX_COMPILER=clang++)")
  endif()
  # Every object is instrumented for coverage; only fuzz targets link the libFuzzer main.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined>")
  add_link_options("-fsanitize=address,undefined")
endif()
