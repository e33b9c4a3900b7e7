// Row-wise and element-wise float32 operations of the DeBERTa forward
// (docs/deberta.md#forward-pass).
#pragma once

#include <cstdint>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace dflash::cpu {

// x[r] <- LN(x[r] + residual[r]) = (v - mean) / sqrt(var + eps) * gamma + beta with the biased
// variance over the last dimension; residual may be nullptr. x, residual: [rows, cols].
void AddLayerNorm(float* x, const float* residual, int64_t rows, int64_t cols,
                  const LayerNormParams& params, float eps);

// Applies `activation` to n contiguous values in place. kGeluErf is 0.5 x (1 + erf(x / sqrt 2)).
void Activate(Activation activation, float* values, int64_t n);

// Softmax of one row in place, with float32 max subtraction and a double-precision sum.
void SoftmaxRow(float* row, int64_t n);

// values <- values / max(||values||_2, 1e-12), as torch.nn.functional.normalize.
void L2Normalize(float* values, int64_t n);

}  // namespace dflash::cpu
