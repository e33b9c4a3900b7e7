// Timing one attention kernel variant on a problem: shared by the autotuner and dflash-tune.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/statusor.h"
#include "kernels/attention/disentangled_attention.h"

namespace dflash::tuning {

struct AttentionTiming {
  int warmup = 3;    // Untimed runs first (module load, cudaFuncSetAttribute, clocks).
  int repeats = 10;  // Timed runs; the median is reported.
  // When set, cudaMemsetAsync overwrites this buffer before every timed run (outside the timed
  // region) so that no run finds the previous one's inputs in L2 (H200: 60 MB of L2).
  void* flush = nullptr;
  size_t flush_bytes = 0;
};

// Median milliseconds of DisentangledAttentionForward(problem with `config`) on `stream`, each run
// bracketed by CUDA events. `workspace` must hold the variant's AttentionWorkspaceBytes.
absl::StatusOr<double> TimeAttention(const kernels::AttentionProblem& problem,
                                     const kernels::AttentionKernelConfig& config, void* workspace,
                                     cublasHandle_t blas, cudaStream_t stream,
                                     const AttentionTiming& timing);

}  // namespace dflash::tuning
