# CUDA is enabled where a toolkit exists (usually at /usr/local/cuda, as on the build
# machine and CI). kernels/ and the CUDA engine are built only when it is.
set(DFLASH_HAVE_CUDA OFF)
if(NOT DFLASH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # H100 / H200 machine code with the sm_90a features (wgmma: the attention kernel's
      # warpgroup variant), and sm_90 PTX that later GPUs can JIT-compile.
      set(CMAKE_CUDA_ARCHITECTURES "90a-real;90-virtual")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flag for nvcc.
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    set(DFLASH_HAVE_CUDA ON)
    message(STATUS "dflash: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  elseif(DFLASH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DFLASH_CUDA=ON but no CUDA compiler was found")
  else()
    message(STATUS "dflash: no CUDA toolkit found; building the CPU engine only")
  endif()
endif()
