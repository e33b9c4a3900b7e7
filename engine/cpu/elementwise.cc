#include "engine/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dflash::cpu {

void AddLayerNorm(float* x, const float* residual, int64_t rows, int64_t cols,
                  const LayerNormParams& params, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    if (residual != nullptr) {
      const float* add = residual + r * cols;
      for (int64_t c = 0; c < cols; ++c) row[c] += add[c];
    }
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += row[c];
    const double mean = sum / static_cast<double>(cols);
    double squares = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double centered = row[c] - mean;
      squares += centered * centered;
    }
    const double inv_std = 1.0 / std::sqrt(squares / static_cast<double>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = static_cast<float>((row[c] - mean) * inv_std) * params.gamma[c] + params.beta[c];
    }
  }
}

void Activate(Activation activation, float* values, int64_t n) {
  switch (activation) {
    case Activation::kGeluErf:
      for (int64_t i = 0; i < n; ++i) {
        const float x = values[i];
        values[i] = 0.5f * x * (1.0f + std::erf(x * static_cast<float>(std::numbers::sqrt2 / 2)));
      }
      return;
    case Activation::kGeluTanh: {
      const float k = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
      for (int64_t i = 0; i < n; ++i) {
        const float x = values[i];
        values[i] = 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
      }
      return;
    }
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) values[i] = std::max(values[i], 0.0f);
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) values[i] = std::tanh(values[i]);
      return;
    case Activation::kSilu:
      for (int64_t i = 0; i < n; ++i) values[i] = values[i] / (1.0f + std::exp(-values[i]));
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) values[i] = 1.0f / (1.0f + std::exp(-values[i]));
      return;
  }
}

void SoftmaxRow(float* row, int64_t n) {
  const float max = *std::max_element(row, row + n);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - max);
    sum += row[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

void L2Normalize(float* values, int64_t n) {
  double squares = 0.0;
  for (int64_t i = 0; i < n; ++i) squares += static_cast<double>(values[i]) * values[i];
  const double norm = std::max(std::sqrt(squares), 1e-12);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(values[i] / norm);
}

}  // namespace dflash::cpu
