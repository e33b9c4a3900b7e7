// The input-independent part of the DeBERTa encoder (docs/deberta.md#encoder-prelude), computed
// once per model in float32 on the host and shared by every engine: per layer the fused QKV
// projection and the projected relative embeddings PosK / PosQ.
#pragma once

#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace dflash {

struct EncoderLayerPrelude {
  Linear qkv;                    // [3*nh*d, H]: query, key and value rows stacked.
  std::vector<float> pos_key;    // [2k, nh*d] = LN(R) Wk^T + bk (or Wpk), when c2p.
  std::vector<float> pos_query;  // [2k, nh*d] = LN(R) Wq^T + bq (or Wpq), when p2c.
};

// Builds every layer's prelude and releases what it replaces from `weights` (the separate
// query/key/value and pos_key/pos_query projections, the relative embeddings).
std::vector<EncoderLayerPrelude> BuildEncoderPrelude(const ModelConfig& config,
                                                     ModelWeights& weights);

}  // namespace dflash
