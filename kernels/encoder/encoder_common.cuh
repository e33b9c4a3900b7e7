// Device helpers shared by the encoder kernels (kernels/encoder/*.cu): 16-byte vector loads and
// stores of any element type (element_conversion.cuh converts), warp and block reductions, and
// the host-side dtype dispatch. Internal to kernels/: the public headers need only the runtime API.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/data_type.h"
#include "kernels/common/element_conversion.cuh"

namespace dflash::kernels::encoder_detail {

// Elements of T in one 16-byte access.
template <typename T>
inline constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

// N consecutive elements of T starting at p, as float32. N * sizeof(T) is 16 bytes (p 16-byte
// aligned) or N == 1.
template <typename T, int N>
__device__ __forceinline__ void LoadVec(const T* p, float (&out)[N]) {
  if constexpr (N == 1) {
    out[0] = ToFloat(*p);
  } else {
    static_assert(N * sizeof(T) == 16, "vector accesses are 16 bytes");
    union {
      uint4 raw;
      T elements[N];
    } pack;
    pack.raw = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = ToFloat(pack.elements[i]);
  }
}

template <typename T, int N>
__device__ __forceinline__ void StoreVec(T* p, const float (&in)[N]) {
  if constexpr (N == 1) {
    *p = FromFloat<T>(in[0]);
  } else {
    static_assert(N * sizeof(T) == 16, "vector accesses are 16 bytes");
    union {
      uint4 raw;
      T elements[N];
    } pack;
#pragma unroll
    for (int i = 0; i < N; ++i) pack.elements[i] = FromFloat<T>(in[i]);
    *reinterpret_cast<uint4*>(p) = pack.raw;
  }
}

// N consecutive float32 values (float4 accesses when N is a multiple of 4: p 16-byte aligned).
template <int N>
__device__ __forceinline__ void LoadFloats(const float* p, float (&out)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + i);
      out[i] = v.x;
      out[i + 1] = v.y;
      out[i + 2] = v.z;
      out[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = p[i];
  }
}

__device__ __forceinline__ float WarpSum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Sum over a team of blockDim.x threads (a multiple of 32) that share threadIdx.y; every thread
// of the team gets the total. `scratch` holds blockDim.y * 32 floats. Every thread of the block
// must call it (it synchronizes the block when the team is wider than a warp).
__device__ __forceinline__ float TeamSum(float value, float* scratch) {
  value = WarpSum(value);
  if (blockDim.x == 32) return value;
  const int warps = static_cast<int>(blockDim.x) / 32;
  float* row = scratch + threadIdx.y * 32;
  __syncthreads();  // scratch may still be read by a previous call.
  if (threadIdx.x % 32 == 0) row[threadIdx.x / 32] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += row[w];
  return total;
}

inline bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

inline bool ValidDataType(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 || dtype == DataType::kFloat32;
}

inline int ElementBytes(DataType dtype) { return dtype == DataType::kFloat32 ? 4 : 2; }

// Calls f(T{}) with T the element type of `dtype` (which must be valid).
template <typename F>
cudaError_t DispatchType(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat16:
      return f(__half{});
    case DataType::kBFloat16:
      return f(__nv_bfloat16{});
    case DataType::kFloat32:
      return f(float{});
  }
  return cudaErrorInvalidValue;
}

inline int NextPowerOfTwo(int64_t value) {
  int p = 1;
  while (p < value) p <<= 1;
  return p;
}

}  // namespace dflash::kernels::encoder_detail
