// The row kernel behind AddLayerNorm and EmbeddingForward: a team of threads per row loads the
// row through a Loader (x + residual, or the embedding-table sum), keeps it in registers when the
// width allows (else streams it from global memory three times), computes float32 two-pass
// statistics (mean, then mean of squared deviations) and writes LN(v) * gamma + beta, or v itself
// when kNormalize is false. Internal to kernels/encoder/.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/encoder/encoder_common.cuh"

namespace dflash::kernels::encoder_detail {

// Vectors of VEC elements each thread keeps in registers on the cached path.
inline constexpr int kRowItems = 4;

// Writes one VEC-wide piece of the output row: LN when normalizing, else the raw sum.
// out[col ..] = (v - mean) * inv_std * g + b (kNormalize) or v, with g, b = gamma, beta[col ..].
template <typename T, int VEC, bool kNormalize>
__device__ __forceinline__ void WriteNormalized(T* out, int col, const float (&v)[VEC], float mean,
                                                float inv_std, const float (&g)[VEC],
                                                const float (&b)[VEC]) {
  float result[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    result[e] = kNormalize ? (v[e] - mean) * inv_std * g[e] + b[e] : v[e];
  }
  StoreVec(out + col, result);
}

template <int VEC, bool kNormalize>
__device__ __forceinline__ void LoadAffine(const float* gamma, const float* beta, int col,
                                           float (&g)[VEC], float (&b)[VEC]) {
  if constexpr (kNormalize) {
    LoadFloats(gamma + col, g);
    LoadFloats(beta + col, b);
  }
}

// blockDim = (team, rows per block); team is a multiple of 32. Rows are visited with a block-
// uniform grid-stride loop so every thread reaches the same barriers.
template <typename T, int VEC, bool kCached, bool kNormalize, typename Loader>
__global__ void RowNormKernel(Loader loader, const float* gamma, const float* beta, float eps,
                              int64_t rows, int width, T* out, int64_t out_stride) {
  __shared__ float scratch[32 * 32];
  const int team = static_cast<int>(blockDim.x);
  const int tx = static_cast<int>(threadIdx.x);
  const int64_t rows_per_block = blockDim.y;
  const float inv_width = 1.0f / static_cast<float>(width);
  for (int64_t base = blockIdx.x * rows_per_block; base < rows;
       base += int64_t{gridDim.x} * rows_per_block) {
    const int64_t row = base + threadIdx.y;
    const bool active = row < rows;
    typename Loader::Row source{};
    if (active) source = loader.Begin(row);
    T* out_row = out + (active ? row : 0) * out_stride;
    if constexpr (kCached) {
      float v[kRowItems][VEC];
      // gamma and beta are loaded with the row, not after the reductions: one memory latency
      // less per row, which is most of the kernel's time on small batches.
      float g[kRowItems][VEC];
      float b[kRowItems][VEC];
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kRowItems; ++i) {
        const int col = (i * team + tx) * VEC;
        if (active && col < width) {
          loader.Load(source, col, v[i]);
          LoadAffine<VEC, kNormalize>(gamma, beta, col, g[i], b[i]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) sum += v[i][e];
        }
      }
      float mean = 0.0f;
      float inv_std = 1.0f;
      if constexpr (kNormalize) {
        mean = TeamSum(sum, scratch) * inv_width;
        float squares = 0.0f;
#pragma unroll
        for (int i = 0; i < kRowItems; ++i) {
          const int col = (i * team + tx) * VEC;
          if (active && col < width) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              const float d = v[i][e] - mean;
              squares += d * d;
            }
          }
        }
        inv_std = 1.0f / sqrtf(TeamSum(squares, scratch) * inv_width + eps);
      }
#pragma unroll
      for (int i = 0; i < kRowItems; ++i) {
        const int col = (i * team + tx) * VEC;
        if (active && col < width) {
          WriteNormalized<T, VEC, kNormalize>(out_row, col, v[i], mean, inv_std, g[i], b[i]);
        }
      }
    } else {
      float mean = 0.0f;
      float inv_std = 1.0f;
      if constexpr (kNormalize) {
        float sum = 0.0f;
        if (active) {
          for (int col = tx * VEC; col < width; col += team * VEC) {
            float v[VEC];
            loader.Load(source, col, v);
#pragma unroll
            for (int e = 0; e < VEC; ++e) sum += v[e];
          }
        }
        mean = TeamSum(sum, scratch) * inv_width;
        float squares = 0.0f;
        if (active) {
          for (int col = tx * VEC; col < width; col += team * VEC) {
            float v[VEC];
            loader.Load(source, col, v);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              const float d = v[e] - mean;
              squares += d * d;
            }
          }
        }
        inv_std = 1.0f / sqrtf(TeamSum(squares, scratch) * inv_width + eps);
      }
      // Each element is read and then written by the same thread: in place is safe.
      if (active) {
        for (int col = tx * VEC; col < width; col += team * VEC) {
          float v[VEC];
          float g[VEC];
          float b[VEC];
          loader.Load(source, col, v);
          LoadAffine<VEC, kNormalize>(gamma, beta, col, g, b);
          WriteNormalized<T, VEC, kNormalize>(out_row, col, v, mean, inv_std, g, b);
        }
      }
    }
  }
}

template <typename T, int VEC, bool kNormalize, typename Loader>
cudaError_t LaunchRowNormVec(const Loader& loader, const float* gamma, const float* beta, float eps,
                             int64_t rows, int width, T* out, int64_t out_stride,
                             cudaStream_t stream) {
  const int64_t vectors = width / VEC;
  int team = std::max(32, NextPowerOfTwo((vectors + kRowItems - 1) / kRowItems));
  const bool cached = team <= 1024;
  if (!cached) team = 1024;
  const int rows_per_block = team < 128 ? 128 / team : 1;
  const dim3 block(team, rows_per_block);
  const int64_t blocks = std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, 1 << 20);
  const dim3 grid(static_cast<unsigned>(blocks));
  if (cached) {
    RowNormKernel<T, VEC, true, kNormalize>
        <<<grid, block, 0, stream>>>(loader, gamma, beta, eps, rows, width, out, out_stride);
  } else {
    RowNormKernel<T, VEC, false, kNormalize>
        <<<grid, block, 0, stream>>>(loader, gamma, beta, eps, rows, width, out, out_stride);
  }
  return cudaGetLastError();
}

}  // namespace dflash::kernels::encoder_detail
