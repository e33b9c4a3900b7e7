#include <algorithm>

#include "kernels/encoder/encoder_common.cuh"
#include "kernels/encoder/pooling.h"

namespace dflash::kernels {
namespace {

using encoder_detail::Aligned16;
using encoder_detail::kVec16;
using encoder_detail::LoadVec;
using encoder_detail::StoreVec;
using encoder_detail::TeamSum;

constexpr float kNormEpsilon = 1e-12f;
constexpr int kNormThreads = 256;
constexpr int kMeanThreads = 512;

// Divides row s of out by max(||row||, 1e-12). One block of kNormThreads per row; each thread
// rescales exactly the elements it summed.
__device__ __forceinline__ void NormalizeRow(float* row, int width, float squares, float* scratch) {
  const float norm = fmaxf(sqrtf(TeamSum(squares, scratch)), kNormEpsilon);
  for (int c = static_cast<int>(threadIdx.x); c < width; c += blockDim.x) row[c] = row[c] / norm;
}

template <typename T>
__global__ void PoolFirstKernel(const T* hidden, int64_t ld, const int32_t* cu_seqlens, int width,
                                bool l2_normalize, float* out) {
  __shared__ float scratch[32];
  const int s = static_cast<int>(blockIdx.x);
  const T* source = hidden + int64_t{cu_seqlens[s]} * ld;
  float* row = out + int64_t{s} * width;
  float squares = 0.0f;
  for (int c = static_cast<int>(threadIdx.x); c < width; c += blockDim.x) {
    const float v = ToFloat(source[c]);
    row[c] = v;
    squares += v * v;
  }
  if (l2_normalize) NormalizeRow(row, width, squares, scratch);
}

__global__ void L2NormalizeRowsKernel(float* out, int width) {
  __shared__ float scratch[32];
  float* row = out + int64_t{blockIdx.x} * width;
  float squares = 0.0f;
  for (int c = static_cast<int>(threadIdx.x); c < width; c += blockDim.x) {
    squares += row[c] * row[c];
  }
  NormalizeRow(row, width, squares, scratch);
}

// grid = (column chunks, sequences), kMeanThreads threads: `lanes` threads cover a chunk of
// lanes * VEC columns of one row, the kMeanThreads / lanes thread rows stride over the sequence's
// rows; partial sums are combined by a fixed shared-memory tree.
template <typename T, int VEC>
__global__ void __launch_bounds__(kMeanThreads)
    PoolMeanKernel(const T* hidden, int64_t ld, const int32_t* cu_seqlens, int width, int lanes,
                   float* out) {
  __shared__ float partial[kMeanThreads * VEC];
  const int tid = static_cast<int>(threadIdx.x);
  const int cx = tid % lanes;
  const int ry = tid / lanes;
  const int row_lanes = kMeanThreads / lanes;
  const int s = static_cast<int>(blockIdx.y);
  const int col = (static_cast<int>(blockIdx.x) * lanes + cx) * VEC;
  const bool valid = col < width;
  const int64_t begin = cu_seqlens[s];
  const int64_t end = cu_seqlens[s + 1];
  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = 0.0f;
  if (valid) {
    const T* base = hidden + col;
    int64_t r = begin + ry;
    constexpr int kUnroll = 4;
    for (; r + (kUnroll - 1) * row_lanes < end; r += kUnroll * row_lanes) {
      float v[kUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) LoadVec<T, VEC>(base + (r + u * row_lanes) * ld, v[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[e] += v[u][e];
      }
    }
    for (; r < end; r += row_lanes) {
      float v[VEC];
      LoadVec<T, VEC>(base + r * ld, v);
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] += v[e];
    }
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e) partial[tid * VEC + e] = acc[e];
  __syncthreads();
  for (int stride = row_lanes / 2; stride > 0; stride >>= 1) {
    if (ry < stride) {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        partial[tid * VEC + e] += partial[(tid + stride * lanes) * VEC + e];
    }
    __syncthreads();
  }
  if (ry == 0 && valid) {
    const float inv_length = 1.0f / static_cast<float>(end > begin ? end - begin : 1);
    float* row = out + int64_t{s} * width + col;
#pragma unroll
    for (int e = 0; e < VEC; ++e) row[e] = partial[tid * VEC + e] * inv_length;
  }
}

template <typename T, int VEC>
cudaError_t LaunchMean(const T* hidden, int64_t ld, const int32_t* cu_seqlens, int num_sequences,
                       int width, float* out, cudaStream_t stream) {
  const int vectors = width / VEC;
  // Widest chunk (a warp per row piece) that still gives about two blocks per SM of an H200.
  // Down to one 16-byte lane per row piece: the blocks reading the two halves of a 32-byte
  // sector run side by side, so the second half comes from L2.
  constexpr int64_t kTargetBlocks = 264;
  int lanes = 32;
  while (lanes > 1 && int64_t{num_sequences} * ((vectors + lanes - 1) / lanes) < kTargetBlocks) {
    lanes /= 2;
  }
  const dim3 grid(static_cast<unsigned>((vectors + lanes - 1) / lanes),
                  static_cast<unsigned>(num_sequences));
  PoolMeanKernel<T, VEC>
      <<<grid, kMeanThreads, 0, stream>>>(hidden, ld, cu_seqlens, width, lanes, out);
  return cudaGetLastError();
}

template <typename T, int VEC>
__global__ void GatherFirstKernel(const T* hidden, int64_t ld, const int32_t* cu_seqlens, int width,
                                  T* out) {
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (col >= width) return;
  const int s = static_cast<int>(blockIdx.y);
  float v[VEC];
  LoadVec<T, VEC>(hidden + int64_t{cu_seqlens[s]} * ld + col, v);
  StoreVec<T, VEC>(out + int64_t{s} * width + col, v);
}

template <typename T, int VEC>
__global__ void ConvertKernel(const T* in, int64_t count, float* out) {
  const int64_t vectors = count / VEC;
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < vectors; i += step) {
    float v[VEC];
    LoadVec<T, VEC>(in + i * VEC, v);
#pragma unroll
    for (int e = 0; e < VEC; e += 4) {
      if constexpr (VEC % 4 == 0) {
        *reinterpret_cast<float4*>(out + i * VEC + e) =
            make_float4(v[e], v[e + 1], v[e + 2], v[e + 3]);
      } else {
        out[i * VEC + e] = v[e];
      }
    }
  }
  // The tail (count % VEC elements), by the first threads of the grid.
  const int64_t tail = vectors * VEC + int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (tail < count && int64_t{blockIdx.x} * blockDim.x + threadIdx.x < VEC) {
    out[tail] = ToFloat(in[tail]);
  }
}

bool ValidPooling(Pooling pooling) {
  return pooling == Pooling::kFirstToken || pooling == Pooling::kMean;
}

bool ValidRows(DataType dtype, const void* hidden, int64_t ld, const int32_t* cu_seqlens,
               int num_sequences, int width, const void* out) {
  return encoder_detail::ValidDataType(dtype) && width >= 1 && num_sequences >= 0 &&
         (num_sequences == 0 ||
          (hidden != nullptr && cu_seqlens != nullptr && out != nullptr && ld >= width));
}

}  // namespace

cudaError_t PoolSequences(DataType dtype, const void* hidden, int64_t ld, const int32_t* cu_seqlens,
                          int num_sequences, int width, Pooling pooling, bool l2_normalize,
                          float* out, cudaStream_t stream) {
  if (!ValidPooling(pooling) ||
      !ValidRows(dtype, hidden, ld, cu_seqlens, num_sequences, width, out)) {
    return cudaErrorInvalidValue;
  }
  if (num_sequences == 0) return cudaSuccess;
  return encoder_detail::DispatchType(dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    const T* source = static_cast<const T*>(hidden);
    if (pooling == Pooling::kFirstToken) {
      PoolFirstKernel<T><<<num_sequences, kNormThreads, 0, stream>>>(source, ld, cu_seqlens, width,
                                                                     l2_normalize, out);
      return cudaGetLastError();
    }
    constexpr int kVec = kVec16<T>;
    const bool vectorized = width % kVec == 0 && ld % kVec == 0 && Aligned16(hidden);
    const cudaError_t error =
        vectorized ? LaunchMean<T, kVec>(source, ld, cu_seqlens, num_sequences, width, out, stream)
                   : LaunchMean<T, 1>(source, ld, cu_seqlens, num_sequences, width, out, stream);
    if (error != cudaSuccess || !l2_normalize) return error;
    L2NormalizeRowsKernel<<<num_sequences, kNormThreads, 0, stream>>>(out, width);
    return cudaGetLastError();
  });
}

cudaError_t GatherFirstTokens(DataType dtype, const void* hidden, int64_t ld,
                              const int32_t* cu_seqlens, int num_sequences, int width, void* out,
                              cudaStream_t stream) {
  if (!ValidRows(dtype, hidden, ld, cu_seqlens, num_sequences, width, out)) {
    return cudaErrorInvalidValue;
  }
  if (num_sequences == 0) return cudaSuccess;
  return encoder_detail::DispatchType(dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = kVec16<T>;
    constexpr int kThreads = 128;
    const T* source = static_cast<const T*>(hidden);
    T* destination = static_cast<T*>(out);
    if (width % kVec == 0 && ld % kVec == 0 && Aligned16(hidden) && Aligned16(out)) {
      const dim3 grid((width / kVec + kThreads - 1) / kThreads, num_sequences);
      GatherFirstKernel<T, kVec>
          <<<grid, kThreads, 0, stream>>>(source, ld, cu_seqlens, width, destination);
    } else {
      const dim3 grid((width + kThreads - 1) / kThreads, num_sequences);
      GatherFirstKernel<T, 1>
          <<<grid, kThreads, 0, stream>>>(source, ld, cu_seqlens, width, destination);
    }
    return cudaGetLastError();
  });
}

cudaError_t ConvertToFloat(DataType dtype, const void* in, int64_t count, float* out,
                           cudaStream_t stream) {
  if (!encoder_detail::ValidDataType(dtype) || count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (in == nullptr || out == nullptr) return cudaErrorInvalidValue;
  return encoder_detail::DispatchType(dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = kVec16<T>;
    constexpr int kThreads = 256;
    const T* source = static_cast<const T*>(in);
    if (Aligned16(in) && Aligned16(out)) {
      const int64_t vectors = std::max<int64_t>(count / kVec, 1);
      const unsigned blocks =
          static_cast<unsigned>(std::min<int64_t>((vectors + kThreads - 1) / kThreads, 4096));
      ConvertKernel<T, kVec><<<blocks, kThreads, 0, stream>>>(source, count, out);
    } else {
      const unsigned blocks =
          static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 4096));
      ConvertKernel<T, 1><<<blocks, kThreads, 0, stream>>>(source, count, out);
    }
    return cudaGetLastError();
  });
}

}  // namespace dflash::kernels
