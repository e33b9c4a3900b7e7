// float32 <-> the kernels' element types (DataType): exact to float32, round-to-nearest-even to
// half precision. One definition for the attention and the encoder kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dflash::kernels {

__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(float x) { return x; }

template <typename T>
__device__ __forceinline__ T FromFloat(float value);
template <>
__device__ __forceinline__ float FromFloat<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float value) {
  return __float2half_rn(value);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}

}  // namespace dflash::kernels
