#include "kernels/encoder/encoder_common.cuh"
#include "kernels/encoder/layer_norm.h"
#include "kernels/encoder/row_norm.cuh"

namespace dflash::kernels {
namespace {

using encoder_detail::Aligned16;
using encoder_detail::kVec16;
using encoder_detail::LoadVec;

// Row r of x + residual (residual optional).
template <typename T>
struct AddLoader {
  const T* x;
  int64_t x_stride;
  const T* residual;
  int64_t residual_stride;

  struct Row {
    const T* x;
    const T* residual;
  };
  __device__ Row Begin(int64_t row) const {
    return Row{x + row * x_stride,
               residual != nullptr ? residual + row * residual_stride : nullptr};
  }
  template <int VEC>
  __device__ void Load(const Row& row, int col, float (&v)[VEC]) const {
    LoadVec<T, VEC>(row.x + col, v);
    if (row.residual != nullptr) {
      float r[VEC];
      LoadVec<T, VEC>(row.residual + col, r);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] += r[e];
    }
  }
};

}  // namespace

cudaError_t AddLayerNorm(DataType dtype, const void* x, int64_t x_stride, const void* residual,
                         int64_t residual_stride, const float* gamma, const float* beta, float eps,
                         int64_t rows, int width, void* out, int64_t out_stride,
                         cudaStream_t stream) {
  if (!encoder_detail::ValidDataType(dtype) || width < 1 || rows < 0 || !(eps >= 0.0f)) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || gamma == nullptr || beta == nullptr || out == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (x_stride < width || out_stride < width || (residual != nullptr && residual_stride < width)) {
    return cudaErrorInvalidValue;
  }
  return encoder_detail::DispatchType(dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = kVec16<T>;
    const AddLoader<T> loader{static_cast<const T*>(x), x_stride, static_cast<const T*>(residual),
                              residual_stride};
    const bool vectorized =
        width % kVec == 0 && x_stride % kVec == 0 && out_stride % kVec == 0 && Aligned16(x) &&
        Aligned16(out) && Aligned16(gamma) && Aligned16(beta) &&
        (residual == nullptr || (residual_stride % kVec == 0 && Aligned16(residual)));
    T* destination = static_cast<T*>(out);
    if (vectorized) {
      return encoder_detail::LaunchRowNormVec<T, kVec, true>(loader, gamma, beta, eps, rows, width,
                                                             destination, out_stride, stream);
    }
    return encoder_detail::LaunchRowNormVec<T, 1, true>(loader, gamma, beta, eps, rows, width,
                                                        destination, out_stride, stream);
  });
}

}  // namespace dflash::kernels
