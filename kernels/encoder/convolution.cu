#include <algorithm>
#include <type_traits>

#include "kernels/encoder/convolution.h"
#include "kernels/encoder/encoder_common.cuh"

namespace dflash::kernels {
namespace {

using encoder_detail::Aligned16;
using encoder_detail::kVec16;

// blockDim = (tx, ty): threadIdx.y picks a token, threadIdx.x walks the token's
// groups * kernel_size * Cg / VEC output vectors. Copies raw element bits (no conversion).
template <typename T, int VEC>
__global__ void ConvolutionColumnsKernel(const T* x, int64_t ld, int64_t tokens, int group_width,
                                         int groups, int kernel_size, const int32_t* cu_seqlens,
                                         int num_sequences, T* cols) {
  using Vector = std::conditional_t<VEC == 1, T, uint4>;
  const int pad = (kernel_size - 1) / 2;
  const int vectors_per_tap = group_width / VEC;
  const int row_vectors = groups * kernel_size * vectors_per_tap;
  const int64_t width = int64_t{groups} * group_width;
  const int64_t step = int64_t{gridDim.x} * blockDim.y;
  for (int64_t t = int64_t{blockIdx.x} * blockDim.y + threadIdx.y; t < tokens; t += step) {
    // The sequence holding t: the last s with cu_seqlens[s] <= t.
    int lo = 0;
    int hi = num_sequences - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (cu_seqlens[mid] <= t) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const int64_t first = cu_seqlens[lo];
    const int64_t last = cu_seqlens[lo + 1];
    Vector* out = reinterpret_cast<Vector*>(cols + t * kernel_size * width);
    for (int j = static_cast<int>(threadIdx.x); j < row_vectors; j += blockDim.x) {
      const int g = j / (kernel_size * vectors_per_tap);
      const int rest = j - g * kernel_size * vectors_per_tap;
      const int q = rest / vectors_per_tap;
      const int v = rest - q * vectors_per_tap;
      const int64_t source = t + q - pad;
      Vector value{};
      if (source >= first && source < last) {
        value = *reinterpret_cast<const Vector*>(x + source * ld + int64_t{g} * group_width +
                                                 int64_t{v} * VEC);
      }
      out[j] = value;
    }
  }
}

template <typename T, int VEC>
cudaError_t Launch(const T* x, int64_t ld, int64_t tokens, int group_width, int groups,
                   int kernel_size, const int32_t* cu_seqlens, int num_sequences, T* cols,
                   cudaStream_t stream) {
  const int64_t row_vectors = int64_t{groups} * kernel_size * (group_width / VEC);
  const int tx = static_cast<int>(
      std::min<int64_t>(256, std::max<int64_t>(32, encoder_detail::NextPowerOfTwo(row_vectors))));
  const int ty = 256 / tx;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((tokens + ty - 1) / ty, 1 << 20));
  ConvolutionColumnsKernel<T, VEC><<<blocks, dim3(tx, ty), 0, stream>>>(
      x, ld, tokens, group_width, groups, kernel_size, cu_seqlens, num_sequences, cols);
  return cudaGetLastError();
}

}  // namespace

cudaError_t ConvolutionColumns(DataType dtype, const void* x, int64_t ld, int64_t tokens, int width,
                               int groups, int kernel_size, const int32_t* cu_seqlens,
                               int num_sequences, void* cols, cudaStream_t stream) {
  if (!encoder_detail::ValidDataType(dtype) || width < 1 || groups < 1 || width % groups != 0 ||
      kernel_size < 1 || kernel_size % 2 == 0 || tokens < 0 || num_sequences < 0 || ld < width) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 0) return cudaSuccess;
  if (num_sequences < 1 || x == nullptr || cu_seqlens == nullptr || cols == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int group_width = width / groups;
  return encoder_detail::DispatchType(dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = kVec16<T>;
    const T* source = static_cast<const T*>(x);
    T* destination = static_cast<T*>(cols);
    if (group_width % kVec == 0 && ld % kVec == 0 && Aligned16(x) && Aligned16(cols)) {
      return Launch<T, kVec>(source, ld, tokens, group_width, groups, kernel_size, cu_seqlens,
                             num_sequences, destination, stream);
    }
    return Launch<T, 1>(source, ld, tokens, group_width, groups, kernel_size, cu_seqlens,
                        num_sequences, destination, stream);
  });
}

}  // namespace dflash::kernels
