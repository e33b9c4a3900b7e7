#include "engine/model/relative_position.h"

#include <algorithm>
#include <cmath>

namespace dflash {

int64_t LogBucketPosition(int64_t delta, int bucket_size, int max_position) {
  const int64_t mid = bucket_size / 2;
  const int64_t sign = delta > 0 ? 1 : (delta < 0 ? -1 : 0);
  // transformers substitutes mid - 1 for |delta| < mid before taking the log, then keeps delta
  // itself wherever that magnitude is <= mid.
  const int64_t magnitude = (delta < mid && delta > -mid) ? mid - 1 : (delta < 0 ? -delta : delta);
  if (magnitude <= mid) return delta;
  // Every step in float32, as torch does: int64 / int -> float32, log, divide, multiply, ceil.
  const float numerator = std::log(static_cast<float>(magnitude) / static_cast<float>(mid));
  const float denominator = std::log(
      static_cast<float>(static_cast<double>(max_position - 1) / static_cast<double>(mid)));
  const float log_position =
      std::ceil(numerator / denominator * static_cast<float>(mid - 1)) + static_cast<float>(mid);
  return static_cast<int64_t>(log_position) * sign;
}

RelativePositionIndex::RelativePositionIndex(const ModelConfig& config)
    : span_(config.AttentionSpan()),
      position_buckets_(config.position_buckets),
      max_position_(config.EffectiveMaxRelativePositions()),
      log_buckets_(config.uses_log_buckets()) {
  const int32_t top = 2 * span_ - 1;
  // bucket(|delta|) is non-decreasing, so each side is settled once it reaches its clamp, or,
  // when mid - 1 == 0, once the log branch is constant (it is for every |delta| > mid).
  const int64_t constant_from =
      log_buckets_ && position_buckets_ / 2 == 1 ? position_buckets_ / 2 + 1 : INT64_MAX;
  // Validated real configs settle by max(span, max_position) + 1; the cap bounds the search.
  const int64_t cap = 4 * static_cast<int64_t>(std::max(span_, max_position_)) + 4;
  int64_t band = 0;
  while (band < constant_from && !(Compute(band) == top && Compute(-band) == 0)) {
    if (band == cap) {
      settled_ = false;
      break;
    }
    ++band;
  }
  band_ = band;
  table_.resize(static_cast<size_t>(2 * band_ + 1));
  for (int64_t delta = -band_; delta <= band_; ++delta) {
    table_[static_cast<size_t>(delta + band_)] = Compute(delta);
  }
}

int32_t RelativePositionIndex::Compute(int64_t delta) const {
  const int64_t bucket =
      log_buckets_ ? LogBucketPosition(delta, position_buckets_, max_position_) : delta;
  return static_cast<int32_t>(std::clamp<int64_t>(bucket + span_, 0, 2 * int64_t{span_} - 1));
}

}  // namespace dflash
