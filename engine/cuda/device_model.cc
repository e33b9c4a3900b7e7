#include "engine/cuda/device_model.h"

#include <utility>

#include "common/status_macros.h"
#include "engine/cuda/dtype_encoding.h"

namespace dflash::cuda {
namespace {

// float32 values in the compute dtype, uploaded (float32 as it is, without a host copy).
absl::StatusOr<DeviceBuffer> UploadAs(kernels::DataType dtype, const float* values, size_t count) {
  if (count == 0) return DeviceBuffer();
  if (dtype == kernels::DataType::kFloat32) {
    return DeviceBuffer::Upload(values, count * sizeof(float));
  }
  const std::vector<uint8_t> narrow = EncodeAs(dtype, values, count);
  return DeviceBuffer::Upload(narrow.data(), narrow.size());
}

absl::StatusOr<DeviceBuffer> UploadAs(kernels::DataType dtype, const std::vector<float>& values) {
  return UploadAs(dtype, values.data(), values.size());
}

absl::StatusOr<DeviceLinear> UploadLinear(kernels::DataType dtype, const Linear& linear) {
  DeviceLinear device;
  device.out_features = linear.out_features();
  device.in_features = linear.in_features();
  DFLASH_ASSIGN_OR_RETURN(device.weight, UploadAs(dtype, linear.weight.values));
  DFLASH_ASSIGN_OR_RETURN(device.bias, UploadAs(dtype, linear.bias));
  return device;
}

absl::StatusOr<DeviceLayerNorm> UploadLayerNorm(const LayerNormParams& norm) {
  DeviceLayerNorm device;
  DFLASH_ASSIGN_OR_RETURN(device.gamma, UploadAs(kernels::DataType::kFloat32, norm.gamma));
  DFLASH_ASSIGN_OR_RETURN(device.beta, UploadAs(kernels::DataType::kFloat32, norm.beta));
  return device;
}

int64_t LinearBytes(const DeviceLinear& linear) {
  return static_cast<int64_t>(linear.weight.bytes() + linear.bias.bytes());
}

int64_t NormBytes(const DeviceLayerNorm& norm) {
  return static_cast<int64_t>(norm.gamma.bytes() + norm.beta.bytes());
}

}  // namespace

int64_t DeviceModel::bytes() const {
  int64_t total = static_cast<int64_t>(word_embeddings.bytes() + position_embeddings.bytes() +
                                       token_type_embeddings.bytes() + relative_index.bytes()) +
                  LinearBytes(embed_proj) + NormBytes(embedding_norm) + LinearBytes(convolution) +
                  NormBytes(convolution_norm) + LinearBytes(pooler) + LinearBytes(classifier);
  for (const DeviceEncoderLayer& layer : layers) {
    total += LinearBytes(layer.qkv) + LinearBytes(layer.attention_output) +
             LinearBytes(layer.intermediate) + LinearBytes(layer.output) +
             NormBytes(layer.attention_norm) + NormBytes(layer.output_norm) +
             static_cast<int64_t>(layer.pos_key.bytes() + layer.pos_query.bytes());
  }
  return total;
}

absl::StatusOr<DeviceModel> UploadModel(const ModelConfig& config, const ModelWeights& weights,
                                        const std::vector<EncoderLayerPrelude>& prelude,
                                        const std::vector<int32_t>& relative_index,
                                        kernels::DataType dtype) {
  DeviceModel model;
  model.dtype = dtype;
  DFLASH_ASSIGN_OR_RETURN(model.word_embeddings, UploadAs(dtype, weights.word_embeddings.values));
  DFLASH_ASSIGN_OR_RETURN(model.position_embeddings,
                          UploadAs(dtype, weights.position_embeddings.values));
  DFLASH_ASSIGN_OR_RETURN(model.token_type_embeddings,
                          UploadAs(dtype, weights.token_type_embeddings.values));
  if (!weights.embed_proj.empty()) {
    Linear projection;
    projection.weight = weights.embed_proj;
    DFLASH_ASSIGN_OR_RETURN(model.embed_proj, UploadLinear(dtype, projection));
  }
  DFLASH_ASSIGN_OR_RETURN(model.embedding_norm, UploadLayerNorm(weights.embedding_norm));
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const EncoderLayerWeights& host = weights.layers[l];
    DeviceEncoderLayer& layer = model.layers.emplace_back();
    DFLASH_ASSIGN_OR_RETURN(layer.qkv, UploadLinear(dtype, prelude[l].qkv));
    DFLASH_ASSIGN_OR_RETURN(layer.attention_output, UploadLinear(dtype, host.attention_output));
    DFLASH_ASSIGN_OR_RETURN(layer.attention_norm, UploadLayerNorm(host.attention_norm));
    DFLASH_ASSIGN_OR_RETURN(layer.intermediate, UploadLinear(dtype, host.intermediate));
    DFLASH_ASSIGN_OR_RETURN(layer.output, UploadLinear(dtype, host.output));
    DFLASH_ASSIGN_OR_RETURN(layer.output_norm, UploadLayerNorm(host.output_norm));
    DFLASH_ASSIGN_OR_RETURN(layer.pos_key, UploadAs(dtype, prelude[l].pos_key));
    DFLASH_ASSIGN_OR_RETURN(layer.pos_query, UploadAs(dtype, prelude[l].pos_query));
  }
  if (config.has_conv()) {
    // W[o, c, q] ([H, Cg, kernel], PyTorch's Conv1d) -> taps[g][o'][q][c] with o = g * Cg + o'.
    const int64_t h = config.hidden_size;
    const int64_t kernel = config.conv_kernel_size;
    const int64_t group_width = h / config.conv_groups;
    Linear taps;
    taps.weight.shape = {h, kernel * group_width};
    taps.weight.values.resize(static_cast<size_t>(h * kernel * group_width));
    for (int64_t o = 0; o < h; ++o) {
      for (int64_t q = 0; q < kernel; ++q) {
        for (int64_t c = 0; c < group_width; ++c) {
          taps.weight.values[static_cast<size_t>((o * kernel + q) * group_width + c)] =
              weights.conv_weight.values[static_cast<size_t>((o * group_width + c) * kernel + q)];
        }
      }
    }
    taps.bias = weights.conv_bias;
    DFLASH_ASSIGN_OR_RETURN(model.convolution, UploadLinear(dtype, taps));
    DFLASH_ASSIGN_OR_RETURN(model.convolution_norm, UploadLayerNorm(weights.conv_norm));
  }
  DFLASH_ASSIGN_OR_RETURN(
      model.relative_index,
      DeviceBuffer::Upload(relative_index.data(), relative_index.size() * sizeof(int32_t)));
  DFLASH_ASSIGN_OR_RETURN(model.pooler, UploadLinear(dtype, weights.pooler));
  DFLASH_ASSIGN_OR_RETURN(model.classifier, UploadLinear(dtype, weights.classifier));
  return model;
}

}  // namespace dflash::cuda
