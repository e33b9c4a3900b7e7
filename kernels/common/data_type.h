// The element types the kernels read and write. Arithmetic is float32 in every case: half
// precision inputs accumulate and keep statistics (softmax, LayerNorm) in float32.
#pragma once

namespace dflash::kernels {

enum class DataType { kFloat16, kBFloat16, kFloat32 };

}  // namespace dflash::kernels
