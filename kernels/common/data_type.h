// The element types the kernels read and write. Arithmetic is float32 in every case: half
// precision inputs accumulate and keep statistics (softmax, LayerNorm) in float32.
#pragma once

#include <cstddef>

namespace dflash::kernels {

enum class DataType { kFloat16, kBFloat16, kFloat32 };

// Bytes per element: 2 for the half types, 4 for float32.
inline size_t DataTypeBytes(DataType dtype) { return dtype == DataType::kFloat32 ? 4 : 2; }

// "fp16", "bf16" or "fp32": tuning-profile family keys, tool flags and test names.
inline const char* DataTypeShortName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return "fp16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kFloat32:
      break;
  }
  return "fp32";
}

}  // namespace dflash::kernels
