#include "engine/encoder_prelude.h"

#include "engine/cpu/elementwise.h"
#include "engine/cpu/gemm.h"

namespace dflash {
namespace {

// PosX = R * W^T + b for every relative-embedding row: [2k, nh*d].
std::vector<float> ProjectRelativeEmbeddings(const std::vector<float>& relative, int64_t rows,
                                             const Linear& projection) {
  std::vector<float> projected(static_cast<size_t>(rows * projection.out_features()));
  cpu::LinearRows(relative.data(), projection.in_features(), rows, projection.weight.data(),
                  projection.bias.empty() ? nullptr : projection.bias.data(),
                  projection.in_features(), projection.out_features(), projected.data(),
                  projection.out_features());
  return projected;
}

}  // namespace

std::vector<EncoderLayerPrelude> BuildEncoderPrelude(const ModelConfig& config,
                                                     ModelWeights& weights) {
  // R = LN(rel_embeddings) when norm_rel_ebd says so: [2k, H].
  std::vector<float> relative = weights.relative_embeddings.values;
  const int64_t relative_rows = config.relative_attention ? config.RelativeEmbeddingRows() : 0;
  if (config.relative_attention && config.norm_rel_embeddings) {
    cpu::AddLayerNorm(relative.data(), nullptr, relative_rows, config.hidden_size,
                      weights.relative_norm, config.layer_norm_eps);
  }
  std::vector<EncoderLayerPrelude> prelude;
  for (EncoderLayerWeights& layer : weights.layers) {
    EncoderLayerPrelude& plan = prelude.emplace_back();
    if (config.relative_attention && config.c2p) {
      plan.pos_key = ProjectRelativeEmbeddings(relative, relative_rows,
                                               config.share_att_key ? layer.key : layer.pos_key);
    }
    if (config.relative_attention && config.p2c) {
      plan.pos_query = ProjectRelativeEmbeddings(
          relative, relative_rows, config.share_att_key ? layer.query : layer.pos_query);
    }
    // One [3*nh*d, H] weight so Q, K and V come from a single GEMM; the separate copies go.
    const int64_t all_head = config.all_head_size();
    plan.qkv.weight.shape = {3 * all_head, config.hidden_size};
    for (Linear* part : {&layer.query, &layer.key, &layer.value}) {
      plan.qkv.weight.values.insert(plan.qkv.weight.values.end(), part->weight.values.begin(),
                                    part->weight.values.end());
      plan.qkv.bias.insert(plan.qkv.bias.end(), part->bias.begin(), part->bias.end());
      *part = Linear{};
    }
    layer.pos_key = Linear{};
    layer.pos_query = Linear{};
  }
  weights.relative_embeddings = DenseTensor{};
  return prelude;
}

}  // namespace dflash
