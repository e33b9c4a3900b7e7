#include "engine/cuda/staged_batch.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace dflash::cuda {

RunShape ShapeOf(const PackedBatch& batch) {
  return RunShape{batch.total_tokens(), batch.num_sequences(), batch.max_seqlen};
}

RunShape GraphBucketOf(const PackedBatch& batch, const ModelConfig& config) {
  constexpr int64_t kTokenGranularity = 64;
  const int64_t tokens = batch.total_tokens();
  const int sequences = batch.num_sequences();
  const int64_t padded_tokens =
      (tokens + kTokenGranularity - 1) / kTokenGranularity * kTokenGranularity;
  const int64_t pad = padded_tokens - tokens;
  int padded_sequences =
      static_cast<int>(std::bit_ceil(static_cast<uint32_t>(sequences + (pad > 0 ? 1 : 0))));
  int longest =
      std::max(64, static_cast<int>(std::bit_ceil(static_cast<uint32_t>(batch.max_seqlen))));
  while (true) {
    const int cap =
        config.position_biased_input ? std::min(longest, config.max_position_embeddings) : longest;
    if (int64_t{cap} * (padded_sequences - sequences) >= pad) break;
    if (config.position_biased_input) {
      padded_sequences *= 2;
    } else {
      longest *= 2;
    }
  }
  return RunShape{padded_tokens, padded_sequences, longest};
}

int64_t StagedCount(const RunShape& shape, const StagingRules& rules) {
  const int per_token = 1 + (rules.token_types ? 1 : 0) + (rules.positions ? 1 : 0);
  return per_token * shape.tokens + shape.sequences + 1;
}

StagedLayout StageBatch(const PackedBatch& batch, const RunShape& shape, const StagingRules& rules,
                        int32_t* staged) {
  const int64_t tokens = batch.total_tokens();
  const int sequences = batch.num_sequences();
  const int64_t pad = shape.tokens - tokens;
  StagedLayout layout;
  int64_t next = 0;
  // One input of [shape.tokens]: the batch's values (or `fill`), then `fill` for the padding.
  auto stage_tokens = [&](const std::vector<int32_t>& values, int32_t fill) {
    const int64_t at = next;
    if (values.empty()) {
      std::fill_n(staged + at, tokens, fill);
    } else {
      std::memcpy(staged + at, values.data(), static_cast<size_t>(tokens) * sizeof(int32_t));
    }
    std::fill_n(staged + at + tokens, pad, fill);
    next += shape.tokens;
    return at;
  };
  layout.token_ids = stage_tokens(batch.token_ids, rules.pad_token_id);
  if (rules.token_types) layout.token_types = stage_tokens(batch.token_type_ids, 0);
  const int64_t positions = rules.positions ? next : -1;
  if (rules.positions) next += shape.tokens;

  // cu_seqlens: the batch's, then the padding sequences, `pad` tokens spread evenly.
  layout.cu_seqlens = next;
  int32_t* cu_seqlens = staged + next;
  std::memcpy(cu_seqlens, batch.cu_seqlens.data(),
              static_cast<size_t>(sequences + 1) * sizeof(int32_t));
  const int extra = shape.sequences - sequences;
  int64_t left = pad;
  for (int s = 0; s < extra; ++s) {
    const int64_t length = (left + (extra - s) - 1) / (extra - s);
    cu_seqlens[sequences + s + 1] = cu_seqlens[sequences + s] + static_cast<int32_t>(length);
    left -= length;
  }
  next += shape.sequences + 1;

  if (rules.positions) {
    layout.positions = positions;
    for (int s = 0; s < shape.sequences; ++s) {
      for (int32_t t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) {
        staged[positions + t] = t - cu_seqlens[s];
      }
    }
  }
  layout.count = next;
  return layout;
}

}  // namespace dflash::cuda
