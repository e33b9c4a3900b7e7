// Residual add + LayerNorm over rows, the normalization after every attention and FFN block and
// after the ConvLayer (docs/deberta.md#forward-pass).
//
// This header needs only the CUDA runtime API: kernels/ builds with the CUDA toolkit alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/data_type.h"

namespace dflash::kernels {

// out[r, :] = LayerNorm(x[r, :] + residual[r, :]) * gamma + beta for r < rows, with float32
// statistics: mean, then the mean of squared deviations from it (biased variance), eps inside the
// square root: (v - mean) / sqrt(var + eps) * gamma + beta, as engine/cpu/elementwise.cc.
//
// x, residual and out are `dtype` ([rows, width] with row strides in elements, >= width); gamma
// and beta are float32 [width] and required. residual may be null (plain LayerNorm). out may be
// the same buffer as x or as residual with the same stride (in place); any other overlap is
// undefined. Each row is summed in float32 from the inputs as stored (no intermediate rounding of
// x + residual).
//
// Rows up to 32768 (16-bit types) / 16384 (float32) elements wide are held in registers, one warp
// or one block per row; wider rows are streamed. 16-byte accesses are used when the width and the
// strides are multiples of 8 (16-bit types) or 4 (float32) elements and every pointer, gamma and
// beta included, is 16-byte aligned.
//
// Runs on `stream`, allocates nothing. rows == 0 is a no-op (pointers may then be null). Returns
// cudaErrorInvalidValue for a bad dtype, width < 1, rows < 0, a null pointer, a stride < width or
// eps < 0 (checked on the host before launching), else the launch's error.
cudaError_t AddLayerNorm(DataType dtype, const void* x, int64_t x_stride, const void* residual,
                         int64_t residual_stride, const float* gamma, const float* beta, float eps,
                         int64_t rows, int width, void* out, int64_t out_stride,
                         cudaStream_t stream);

}  // namespace dflash::kernels
