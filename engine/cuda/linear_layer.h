// Dense layers on cuBLASLt: Y = X W^T + bias (+ residual), the GEMM shape of every DeBERTa linear
// layer, with bias and residual fused into the GEMM's epilogue. Algorithms are chosen once per
// shape bucket (token counts rounded up to a power of two) and cached: cuBLASLt's heuristic's
// first choice, or the fastest of its first candidates timed on the device at the bucket's first
// call (the heuristic's choice is a poor fit for small token counts, where a GEMM fills few SMs).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/common/data_type.h"

namespace dflash::cuda {

// Row-major operands, leading dimensions in elements:
//   Y[m, n] = X[m, k] . W[n, k]^T + bias[n] + residual[m, n]
// X: [m, k] (ldx), W: [n, k] (ldw, PyTorch's Linear layout), bias: [n] or null, residual:
// [m, n] (ld_residual) or null, Y: [m, n] (ldy); Y may be the residual itself.
struct LinearCall {
  kernels::DataType dtype = kernels::DataType::kFloat16;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  const void* bias = nullptr;
  const void* residual = nullptr;
  int64_t ld_residual = 0;
  void* y = nullptr;
  int64_t ldy = 0;
};

class MatmulDescriptors;  // cuBLASLt descriptors of one exact shape (linear_layer.cc).

class LinearLayers {
 public:
  struct Options {
    // float32 GEMMs on tensor cores in TF32 (faster, ~1e-3 relative error); otherwise they are
    // exact float32 FMA GEMMs.
    bool allow_tf32 = false;
    // Candidates of cuBLASLt's heuristic timed at a bucket's first call (<= 1: its first choice,
    // untimed). Timing needs a stream that is not being captured; a bucket first seen during
    // capture takes the first choice for good.
    int timed_candidates = 0;
  };

  // `workspace` (device, `workspace_bytes`) is cuBLASLt's scratch for every call.
  static absl::StatusOr<std::unique_ptr<LinearLayers>> Create(void* workspace,
                                                              size_t workspace_bytes,
                                                              const Options& options);
  ~LinearLayers();
  LinearLayers(const LinearLayers&) = delete;
  LinearLayers& operator=(const LinearLayers&) = delete;

  absl::Status Run(const LinearCall& call, cudaStream_t stream);

  // Distinct shape buckets seen so far (each chose its algorithm once).
  size_t cached_algorithms() const { return algorithms_.size(); }

 private:
  struct ShapeKey {
    int dtype;
    int64_t m_bucket, n, k, ldx, ldw, ldy, ld_residual;
    bool bias, residual;
    int alignment;
    template <typename H>
    friend H AbslHashValue(H h, const ShapeKey& s) {
      return H::combine(std::move(h), s.dtype, s.m_bucket, s.n, s.k, s.ldx, s.ldw, s.ldy,
                        s.ld_residual, s.bias, s.residual, s.alignment);
    }
    bool operator==(const ShapeKey&) const = default;
  };

  LinearLayers(cublasLtHandle_t handle, cudaEvent_t start, cudaEvent_t stop, void* workspace,
               size_t workspace_bytes, const Options& options);

  // The heuristic's first `count` (at most) algorithms for `call` at `m` tokens; at least one.
  absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> Candidates(const LinearCall& call,
                                                                          int64_t m, int alignment,
                                                                          int count) const;
  // The heuristic's algorithm for `call`'s bucket, or the fastest of its first candidates run on
  // `call`'s operands (which end up holding some candidate's result: the caller runs it again).
  absl::StatusOr<cublasLtMatmulAlgo_t> ChooseAlgorithm(const LinearCall& call, const ShapeKey& key,
                                                       const MatmulDescriptors& exact,
                                                       cudaStream_t stream);
  absl::Status Launch(const LinearCall& call, const MatmulDescriptors& descriptors,
                      const cublasLtMatmulAlgo_t& algorithm, cudaStream_t stream);

  cublasLtHandle_t handle_;
  cudaEvent_t start_;  // Timing the candidates.
  cudaEvent_t stop_;
  void* workspace_;
  size_t workspace_bytes_;
  Options options_;
  absl::flat_hash_map<ShapeKey, cublasLtMatmulAlgo_t> algorithms_;  // By token-count bucket.
  // Descriptors by exact shape (m_bucket holds the exact m): building them costs more host time
  // than launching a small GEMM, and serving repeats shapes.
  absl::flat_hash_map<ShapeKey, std::unique_ptr<MatmulDescriptors>> descriptors_;
};

}  // namespace dflash::cuda
