#include "engine/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>

namespace dflash::cpu {

void Gemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixView a, MatrixView b, float beta,
          float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, a.transposed ? CblasTrans : CblasNoTrans,
              b.transposed ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a.data,
              static_cast<blasint>(a.ld), b.data, static_cast<blasint>(b.ld), beta, c,
              static_cast<blasint>(ldc));
}

void LinearRows(const float* x, int64_t ldx, int64_t rows, const float* weight, const float* bias,
                int64_t in_features, int64_t out_features, float* y, int64_t ldy) {
  float beta = 0.0f;
  if (bias != nullptr) {
    for (int64_t r = 0; r < rows; ++r) std::copy(bias, bias + out_features, y + r * ldy);
    beta = 1.0f;
  }
  Gemm(rows, out_features, in_features, 1.0f, {x, ldx, false}, {weight, in_features, true}, beta, y,
       ldy);
}

int SetBlasThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
  return openblas_get_num_threads();
}

}  // namespace dflash::cpu
