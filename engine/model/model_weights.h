// DeBERTa-v2/v3 parameters in float32, named and shaped as in transformers' state dict
// (docs/deberta.md#tensor-names). Linear weights keep PyTorch's [out, in] layout.
#pragma once

#include <cstdint>
#include <vector>

namespace dflash {

struct DenseTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;  // Row-major.

  bool empty() const { return values.empty(); }
  const float* data() const { return values.data(); }
};

struct Linear {
  DenseTensor weight;       // [out, in]
  std::vector<float> bias;  // [out], empty when the layer has none.

  int64_t out_features() const { return weight.shape.empty() ? 0 : weight.shape[0]; }
  int64_t in_features() const { return weight.shape.size() < 2 ? 0 : weight.shape[1]; }
};

struct LayerNormParams {
  std::vector<float> gamma;  // [H]
  std::vector<float> beta;   // [H]
};

struct EncoderLayerWeights {
  Linear query;             // [nh*d, H]
  Linear key;               // [nh*d, H]
  Linear value;             // [nh*d, H]
  Linear pos_key;           // [nh*d, H], only without share_att_key and with c2p.
  Linear pos_query;         // [nh*d, H], only without share_att_key and with p2c.
  Linear attention_output;  // [H, nh*d]
  LayerNormParams attention_norm;
  Linear intermediate;  // [I, H]
  Linear output;        // [H, I]
  LayerNormParams output_norm;
};

struct ModelWeights {
  DenseTensor word_embeddings;        // [vocab, E]
  DenseTensor position_embeddings;    // [max_position_embeddings, E] if position_biased_input
  DenseTensor token_type_embeddings;  // [type_vocab_size, E] if type_vocab_size > 0
  DenseTensor embed_proj;             // [H, E] if E != H (no bias)
  LayerNormParams embedding_norm;

  std::vector<EncoderLayerWeights> layers;
  DenseTensor relative_embeddings;  // [2k, H] if relative_attention
  LayerNormParams relative_norm;    // if norm_rel_ebd contains layer_norm

  DenseTensor conv_weight;       // [H, H / groups, kernel] if conv_kernel_size > 0
  std::vector<float> conv_bias;  // [H]
  LayerNormParams conv_norm;

  Linear pooler;      // [H, H], sequence classification
  Linear classifier;  // [num_labels, H], sequence or token classification
};

}  // namespace dflash
