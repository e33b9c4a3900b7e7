// CUDA runtime and cuBLAS(Lt) results as absl::Status, the engine's error currency. Out-of-memory
// becomes RESOURCE_EXHAUSTED (the batch may fit later or elsewhere); everything else INTERNAL.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dflash::cuda {

// OK for cudaSuccess; otherwise "<what>: <cuda error name>: <description>".
absl::Status CudaStatus(cudaError_t error, absl::string_view what);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view what);

// Errors after which the CUDA context is unusable until the process restarts (an illegal
// address, a kernel fault, a lost device): an engine that sees one stops serving.
bool IsStickyCudaError(cudaError_t error);

}  // namespace dflash::cuda

#define DFLASH_RETURN_IF_CUDA_ERROR(expr, what)                                     \
  do {                                                                              \
    if (cudaError_t dflash_cuda_error_ = (expr); dflash_cuda_error_ != cudaSuccess) \
      return ::dflash::cuda::CudaStatus(dflash_cuda_error_, what);                  \
  } while (false)
