#include <algorithm>
#include <cctype>
#include <cstring>

#include "kernels/encoder/activation.h"
#include "kernels/encoder/encoder_common.cuh"

namespace dflash::kernels {
namespace {

using encoder_detail::Aligned16;
using encoder_detail::kVec16;
using encoder_detail::LoadVec;
using encoder_detail::StoreVec;

template <Activation kAct>
__device__ __forceinline__ float Apply(float x) {
  if constexpr (kAct == Activation::kGeluErf) {
    // 0.5 x (1 + erf(x / sqrt 2)) written as 0.5 x erfc(-x / sqrt 2): the same function without
    // the cancellation of 1 + erf in the negative tail (float32 relative error ~1e-7 everywhere).
    return 0.5f * x * erfcf(-x * 0.70710678118654752f);
  } else if constexpr (kAct == Activation::kGeluTanh) {
    // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): same function, no cancellation for negative u.
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
    const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
  } else if constexpr (kAct == Activation::kTanh) {
    return tanhf(x);
  } else if constexpr (kAct == Activation::kRelu) {
    return x < 0.0f ? 0.0f : x;  // NaN stays NaN, as std::max(x, 0.0f) in the CPU reference.
  } else if constexpr (kAct == Activation::kSilu) {
    return x / (1.0f + expf(-x));
  } else if constexpr (kAct == Activation::kSigmoid) {
    return 1.0f / (1.0f + expf(-x));
  } else {
    return x;
  }
}

// blockDim = (tx, ty): threadIdx.x walks the VEC-wide column vectors of a row, threadIdx.y and
// blockIdx.y the rows; the bias vector stays in registers across rows.
template <typename T, int VEC, Activation kAct>
__global__ void BiasActivationKernel(T* x, int64_t rows, int vectors, int64_t ld, const T* bias) {
  const int v = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (v >= vectors) return;
  const int col = v * VEC;
  float b[VEC];
  if (bias != nullptr) {
    LoadVec<T, VEC>(bias + col, b);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) b[e] = 0.0f;
  }
  const int64_t step = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < rows; r += step) {
    T* p = x + r * ld + col;
    float values[VEC];
    LoadVec<T, VEC>(p, values);
#pragma unroll
    for (int e = 0; e < VEC; ++e) values[e] = Apply<kAct>(values[e] + b[e]);
    StoreVec<T, VEC>(p, values);
  }
}

template <typename T, int VEC, Activation kAct>
cudaError_t Launch(T* x, int64_t rows, int cols, int64_t ld, const T* bias, cudaStream_t stream) {
  const int vectors = cols / VEC;
  const int tx = std::min(128, std::max(32, encoder_detail::NextPowerOfTwo(vectors)));
  const int ty = 256 / tx;
  const unsigned grid_x = static_cast<unsigned>((vectors + tx - 1) / tx);
  // Enough blocks to fill the GPU several times over; each then loops over rows.
  const int64_t row_blocks = (rows + ty - 1) / ty;
  const int64_t wanted = std::max<int64_t>(1, 2048 / grid_x);
  const unsigned grid_y = static_cast<unsigned>(std::min<int64_t>(row_blocks, wanted));
  BiasActivationKernel<T, VEC, kAct>
      <<<dim3(grid_x, grid_y), dim3(tx, ty), 0, stream>>>(x, rows, vectors, ld, bias);
  return cudaGetLastError();
}

template <typename T, int VEC>
cudaError_t Dispatch(Activation activation, T* x, int64_t rows, int cols, int64_t ld, const T* bias,
                     cudaStream_t stream) {
  switch (activation) {
    case Activation::kIdentity:
      return Launch<T, VEC, Activation::kIdentity>(x, rows, cols, ld, bias, stream);
    case Activation::kGeluErf:
      return Launch<T, VEC, Activation::kGeluErf>(x, rows, cols, ld, bias, stream);
    case Activation::kGeluTanh:
      return Launch<T, VEC, Activation::kGeluTanh>(x, rows, cols, ld, bias, stream);
    case Activation::kTanh:
      return Launch<T, VEC, Activation::kTanh>(x, rows, cols, ld, bias, stream);
    case Activation::kRelu:
      return Launch<T, VEC, Activation::kRelu>(x, rows, cols, ld, bias, stream);
    case Activation::kSilu:
      return Launch<T, VEC, Activation::kSilu>(x, rows, cols, ld, bias, stream);
    case Activation::kSigmoid:
      return Launch<T, VEC, Activation::kSigmoid>(x, rows, cols, ld, bias, stream);
  }
  return cudaErrorInvalidValue;
}

bool ValidActivation(Activation activation) {
  switch (activation) {
    case Activation::kIdentity:
    case Activation::kGeluErf:
    case Activation::kGeluTanh:
    case Activation::kTanh:
    case Activation::kRelu:
    case Activation::kSilu:
    case Activation::kSigmoid:
      return true;
  }
  return false;
}

}  // namespace

bool ParseActivation(const char* hf_name, Activation* out) {
  if (hf_name == nullptr || out == nullptr) return false;
  char lower[32];
  const size_t length = std::strlen(hf_name);
  if (length >= sizeof(lower)) return false;
  for (size_t i = 0; i <= length; ++i) {
    lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(hf_name[i])));
  }
  struct Entry {
    const char* name;
    Activation activation;
  };
  static constexpr Entry kNames[] = {
      {"gelu", Activation::kGeluErf},
      {"gelu_new", Activation::kGeluTanh},
      {"gelu_pytorch_tanh", Activation::kGeluTanh},
      {"gelu_fast", Activation::kGeluTanh},
      {"tanh", Activation::kTanh},
      {"relu", Activation::kRelu},
      {"silu", Activation::kSilu},
      {"swish", Activation::kSilu},
      {"sigmoid", Activation::kSigmoid},
      {"linear", Activation::kIdentity},
      {"identity", Activation::kIdentity},
  };
  for (const Entry& entry : kNames) {
    if (std::strcmp(lower, entry.name) == 0) {
      *out = entry.activation;
      return true;
    }
  }
  return false;
}

cudaError_t BiasActivation(DataType dtype, void* x, int64_t rows, int cols, int64_t ld,
                           const void* bias, Activation activation, cudaStream_t stream) {
  if (!encoder_detail::ValidDataType(dtype) || !ValidActivation(activation) || cols < 1 ||
      rows < 0 || ld < cols) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  if (x == nullptr) return cudaErrorInvalidValue;
  return encoder_detail::DispatchType(dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = kVec16<T>;
    T* data = static_cast<T*>(x);
    const T* b = static_cast<const T*>(bias);
    const bool vectorized =
        cols % kVec == 0 && ld % kVec == 0 && Aligned16(x) && (bias == nullptr || Aligned16(bias));
    if (vectorized) return Dispatch<T, kVec>(activation, data, rows, cols, ld, b, stream);
    return Dispatch<T, 1>(activation, data, rows, cols, ld, b, stream);
  });
}

}  // namespace dflash::kernels
