// A log-bucketed histogram of latencies, in the manner of HdrHistogram with 2 significant digits:
// constant memory and O(1) recording whatever the run length, and percentiles accurate to under 1%
// of the value, which is all a latency report can meaningfully state.
#pragma once

#include <cstdint>
#include <vector>

namespace dflash::loadtest {

// Counts non-negative integer values (the load generator records nanoseconds). Values below 256
// have a bucket each; above, every power-of-two range [2^e, 2^(e+1)) is split into 128 equal
// sub-buckets, so a bucket is narrower than 1/128 of any value in it. Not thread-safe: give each
// thread its own or guard it, and Merge at the end.
class LatencyHistogram {
 public:
  LatencyHistogram();

  // Negative values (a clock quirk) are recorded as 0.
  void Record(int64_t value);
  // Adds every count of `other` to this histogram.
  void Merge(const LatencyHistogram& other);

  int64_t count() const { return count_; }
  // Exact extremes and mean of the recorded values; 0 when empty.
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return max_; }
  double mean() const;

  // The value at `percentile` (0..100): the sample of rank ceil(percentile / 100 * count) (at
  // least 1) in sorted order, reported as the highest value its bucket can hold, clamped to the
  // exact [min, max]. So it is never below the exact sample and exceeds it by less than 1/128 of
  // it; percentile 100 is the exact max. 0 when empty.
  int64_t ValueAtPercentile(double percentile) const;

  // Bucket arithmetic, public for tests.
  static int BucketIndex(int64_t value);
  static int64_t BucketLowest(int index);
  static int64_t BucketHighest(int index);

 private:
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  // Sum of all values; a double keeps a long run at nanosecond scale from overflowing.
  double sum_ = 0.0;
};

}  // namespace dflash::loadtest
