// Helpers for GPU tests: device buffers, dtype conversion, and the skip-without-GPU rule (CI has
// no GPU, so every GPU test skips there with a message saying so).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/cuda/dtype_encoding.h"
#include "gtest/gtest.h"
#include "kernels/attention/disentangled_attention.h"

namespace dflash::test {

// Test names and messages: an overload beside the tests' own Name(...) helpers.
inline const char* Name(kernels::DataType dtype) { return kernels::DataTypeShortName(dtype); }

// Empty when a CUDA device is usable, else why not.
inline std::string NoGpuReason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return std::string("no usable CUDA device (") + cudaGetErrorString(error) + ")";
  }
  if (count == 0) return "no CUDA device";
  return "";
}

#define DFLASH_REQUIRE_GPU()                                                         \
  do {                                                                               \
    if (const std::string reason = ::dflash::test::NoGpuReason(); !reason.empty()) { \
      GTEST_SKIP() << "GPU test skipped: " << reason;                                \
    }                                                                                \
  } while (false)

#define DFLASH_CUDA_OK(expr)                                        \
  do {                                                              \
    const cudaError_t dflash_cuda_error_ = (expr);                  \
    ASSERT_EQ(dflash_cuda_error_, cudaSuccess)                      \
        << #expr << ": " << cudaGetErrorString(dflash_cuda_error_); \
  } while (false)

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0 && cudaMalloc(&data_, bytes) != cudaSuccess) data_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

inline size_t ElementSize(kernels::DataType dtype) { return kernels::DataTypeBytes(dtype); }

// float32 values -> raw bytes of `dtype` (round to nearest even).
inline std::vector<uint8_t> Encode(const std::vector<float>& values, kernels::DataType dtype) {
  return cuda::EncodeAs(dtype, values);
}

// Raw bytes of `dtype` -> float32.
inline std::vector<float> Decode(const std::vector<uint8_t>& bytes, kernels::DataType dtype) {
  return cuda::DecodeFrom(dtype, bytes);
}

// Values as the kernel sees them after rounding to `dtype`.
inline std::vector<float> RoundTo(const std::vector<float>& values, kernels::DataType dtype) {
  return Decode(Encode(values, dtype), dtype);
}

}  // namespace dflash::test
