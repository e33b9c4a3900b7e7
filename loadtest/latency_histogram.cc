#include "loadtest/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace dflash::loadtest {
namespace {

// Values below kExactLimit get one bucket each; each higher power of two gets kSubBuckets.
constexpr int kSubBucketBits = 7;
constexpr int kSubBuckets = 1 << kSubBucketBits;  // 128
constexpr int64_t kExactLimit = int64_t{2} * kSubBuckets;
constexpr int kFirstLogExponent = kSubBucketBits + 1;  // 2^8 = kExactLimit
// Exponents 8..62 cover every positive int64.
constexpr int kBucketCount = static_cast<int>(kExactLimit) + (63 - kFirstLogExponent) * kSubBuckets;

}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(kBucketCount, 0) {}

int LatencyHistogram::BucketIndex(int64_t value) {
  if (value < kExactLimit) return static_cast<int>(std::max<int64_t>(value, 0));
  const int exponent = 63 - std::countl_zero(static_cast<uint64_t>(value));
  const int shift = exponent - kSubBucketBits;
  const int sub = static_cast<int>(value >> shift);  // in [128, 256)
  return static_cast<int>(kExactLimit) + (exponent - kFirstLogExponent) * kSubBuckets +
         (sub - kSubBuckets);
}

int64_t LatencyHistogram::BucketLowest(int index) {
  if (index < kExactLimit) return index;
  const int offset = index - static_cast<int>(kExactLimit);
  const int exponent = kFirstLogExponent + offset / kSubBuckets;
  const int64_t sub = kSubBuckets + offset % kSubBuckets;
  return sub << (exponent - kSubBucketBits);
}

int64_t LatencyHistogram::BucketHighest(int index) {
  if (index < kExactLimit) return index;
  const int exponent = kFirstLogExponent + (index - static_cast<int>(kExactLimit)) / kSubBuckets;
  return BucketLowest(index) + ((int64_t{1} << (exponent - kSubBucketBits)) - 1);
}

void LatencyHistogram::Record(int64_t value) {
  value = std::max<int64_t>(value, 0);
  ++counts_[BucketIndex(value)];
  min_ = count_ == 0 ? value : std::min(min_, value);
  max_ = std::max(max_, value);
  ++count_;
  sum_ += static_cast<double>(value);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

double LatencyHistogram::mean() const {
  return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_);
}

int64_t LatencyHistogram::ValueAtPercentile(double percentile) const {
  if (count_ == 0) return 0;
  percentile = std::clamp(percentile, 0.0, 100.0);
  // The small epsilon keeps binary rounding (99.9 * 1000 / 100 = 999.0000000000001) from
  // moving the rank one sample up.
  const double exact_rank = percentile * static_cast<double>(count_) / 100.0;
  const auto rank =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(exact_rank - 1e-9)), 1, count_);
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(BucketHighest(static_cast<int>(i)), min_, max_);
  }
  return max_;
}

}  // namespace dflash::loadtest
