// Relative positions of DeBERTa-v2/v3 (docs/deberta.md#relative-positions).
//
// For query i and key j of one sequence, delta = i - j. With log buckets (position_buckets > 0),
//   bucket(delta) = delta                                                  if |delta| <= mid
//                 = sign(delta) * (ceil(ln(|delta|/mid) / ln((M-1)/mid) * (mid-1)) + mid)  else,
// mid = position_buckets / 2, M = max_relative_positions (after its fallback), evaluated in
// float32 exactly as transformers does. Without buckets, bucket(delta) = delta. The slot of the
// relative-embedding table read by both c2p and p2c is
//   idx(delta) = clamp(bucket(delta) + k, 0, 2k - 1),   k = attention span.
// bucket is odd, so p2c's index clamp(-bucket(j - i) + k) equals idx(i - j)
// (docs/deberta.md#relative-positions).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace dflash {

// transformers' make_log_bucket_position for one value.
int64_t LogBucketPosition(int64_t delta, int bucket_size, int max_position);

// idx(delta) for every delta. Outside [-band, band] the index no longer changes (it has reached
// the clamp or its final bucket), so only the band is stored; kernels use the same band to tell
// "saturated" tiles, whose bias is a row term plus a column term, from tiles that need lookups.
class RelativePositionIndex {
 public:
  explicit RelativePositionIndex(const ModelConfig& config);

  int32_t operator()(int64_t delta) const {
    if (delta >= -band_ && delta <= band_) return table_[static_cast<size_t>(delta + band_)];
    if (settled_) return table_[delta > 0 ? table_.size() - 1 : 0];
    return Compute(delta);
  }
  // Largest |delta| stored.
  int64_t band() const { return band_; }
  // True when every |delta| > band maps to the value at +-band (every validated real config:
  // v3 settles at band 512). False only for exotic bucket settings whose low side settles
  // beyond the search cap; such deltas are then computed on the fly.
  bool settled() const { return settled_; }
  int span() const { return span_; }
  // idx(delta) for delta in [-band, band], at index delta + band.
  const std::vector<int32_t>& table() const { return table_; }

 private:
  int32_t Compute(int64_t delta) const;

  int span_ = 0;
  int position_buckets_ = 0;
  int max_position_ = 0;
  bool log_buckets_ = false;
  int64_t band_ = 0;
  bool settled_ = true;
  std::vector<int32_t> table_;
};

}  // namespace dflash
