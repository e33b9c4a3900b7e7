// Row-major single-precision GEMM through the system BLAS (OpenBLAS):
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C,   op(X) = X or X^T.
// Every CPU-engine matrix product goes through here, so swapping the BLAS touches one file.
#pragma once

#include <cstdint>

namespace dflash::cpu {

struct MatrixView {
  const float* data;
  int64_t ld;       // Row stride in elements.
  bool transposed;  // Use X^T.
};

void Gemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, MatrixView b, float beta,
          float* c, int64_t ldc);

// y[rows, out] = x[rows, in] * W^T + bias, with W stored [out, in] (PyTorch's Linear layout) and
// bias optional (nullptr). x and y are dense with row strides ldx and ldy.
void LinearRows(const float* x, int64_t ldx, int64_t rows, const float* weight, const float* bias,
                int64_t in_features, int64_t out_features, float* y, int64_t ldy);

// Threads the BLAS may use (0 = its default). Returns the count in effect.
int SetBlasThreads(int threads);

}  // namespace dflash::cpu
