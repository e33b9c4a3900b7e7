// Host-side float32 <-> the kernels' element types (kernels::DataType), as raw bytes: what is
// uploaded to and read back from the device. Half precision rounds to nearest even
// (engine/model/half_precision.h); float32 is copied. One definition for the engine's weight
// upload, the benchmarks and the kernel tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/model/half_precision.h"
#include "kernels/common/data_type.h"

namespace dflash::cuda {

// `count` float32 values -> raw bytes of `dtype`.
inline std::vector<uint8_t> EncodeAs(kernels::DataType dtype, const float* values, size_t count) {
  std::vector<uint8_t> bytes(count * kernels::DataTypeBytes(dtype));
  if (dtype == kernels::DataType::kFloat32) {
    if (count != 0) std::memcpy(bytes.data(), values, bytes.size());
    return bytes;
  }
  for (size_t i = 0; i < count; ++i) {
    const uint16_t bits =
        dtype == kernels::DataType::kFloat16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
    std::memcpy(&bytes[2 * i], &bits, 2);
  }
  return bytes;
}

inline std::vector<uint8_t> EncodeAs(kernels::DataType dtype, const std::vector<float>& values) {
  return EncodeAs(dtype, values.data(), values.size());
}

// Raw bytes of `dtype` -> float32.
inline std::vector<float> DecodeFrom(kernels::DataType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / kernels::DataTypeBytes(dtype));
  if (dtype == kernels::DataType::kFloat32) {
    if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    return values;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, &bytes[2 * i], 2);
    values[i] = dtype == kernels::DataType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
  }
  return values;
}

}  // namespace dflash::cuda
