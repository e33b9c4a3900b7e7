// The model's parameters resident on one GPU, in the engine's compute dtype (LayerNorm gains and
// biases of LayerNorms stay float32: they enter float32 arithmetic). Built once at load from the
// host checkpoint and the encoder prelude; the host copies can be released afterwards.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/device_memory.h"
#include "engine/encoder_prelude.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "kernels/common/data_type.h"

namespace dflash::cuda {

struct DeviceLinear {
  DeviceBuffer weight;  // [out, in]
  DeviceBuffer bias;    // [out], or empty
  int64_t out_features = 0;
  int64_t in_features = 0;
};

struct DeviceLayerNorm {
  DeviceBuffer gamma;  // float [width]
  DeviceBuffer beta;   // float [width]
};

struct DeviceEncoderLayer {
  DeviceLinear qkv;               // [3*nh*d, H]
  DeviceLinear attention_output;  // [H, nh*d]
  DeviceLayerNorm attention_norm;
  DeviceLinear intermediate;  // [I, H]
  DeviceLinear output;        // [H, I]
  DeviceLayerNorm output_norm;
  DeviceBuffer pos_key;    // [2k, nh*d] when c2p
  DeviceBuffer pos_query;  // [2k, nh*d] when p2c
};

struct DeviceModel {
  kernels::DataType dtype = kernels::DataType::kFloat16;
  DeviceBuffer word_embeddings;        // [vocab, E]
  DeviceBuffer position_embeddings;    // [max_positions, E] or empty
  DeviceBuffer token_type_embeddings;  // [types, E] or empty
  DeviceLinear embed_proj;             // [H, E] when E != H
  DeviceLayerNorm embedding_norm;
  std::vector<DeviceEncoderLayer> layers;
  // ConvLayer taps regrouped as [groups][H / groups (out)][kernel][H / groups (in)], the layout
  // of kernels::ConvolutionColumns' columns, so each group is one GEMM.
  DeviceLinear convolution;
  DeviceLayerNorm convolution_norm;
  DeviceBuffer relative_index;  // int32 idx(delta) over [-band, band]
  DeviceLinear pooler;
  DeviceLinear classifier;

  int64_t bytes() const;
};

// Converts and uploads every parameter to the current device.
absl::StatusOr<DeviceModel> UploadModel(const ModelConfig& config, const ModelWeights& weights,
                                        const std::vector<EncoderLayerPrelude>& prelude,
                                        const std::vector<int32_t>& relative_index,
                                        kernels::DataType dtype);

}  // namespace dflash::cuda
