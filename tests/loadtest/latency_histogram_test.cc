#include "loadtest/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "loadtest/random.h"

namespace dflash::loadtest {
namespace {

// The sample of rank ceil(p / 100 * n) (at least 1) of sorted values: the definition the
// histogram's percentiles approximate.
int64_t ExactPercentile(const std::vector<int64_t>& sorted, double percentile) {
  const auto n = static_cast<int64_t>(sorted.size());
  const double exact_rank = percentile * static_cast<double>(n) / 100.0;
  const int64_t rank =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(exact_rank - 1e-9)), 1, n);
  return sorted[static_cast<size_t>(rank - 1)];
}

TEST(LatencyHistogramTest, BucketsTileTheWholeRangeWithBoundedWidth) {
  EXPECT_EQ(LatencyHistogram::BucketLowest(0), 0);
  int index = 0;
  for (;; ++index) {
    const int64_t lowest = LatencyHistogram::BucketLowest(index);
    const int64_t highest = LatencyHistogram::BucketHighest(index);
    ASSERT_LE(lowest, highest);
    ASSERT_EQ(LatencyHistogram::BucketIndex(lowest), index);
    ASSERT_EQ(LatencyHistogram::BucketIndex(highest), index);
    // Two significant digits: a bucket is narrower than 1/128 of its values.
    ASSERT_LE(static_cast<double>(highest - lowest + 1), std::max(1.0, lowest / 128.0));
    if (highest == std::numeric_limits<int64_t>::max()) break;
    ASSERT_EQ(LatencyHistogram::BucketLowest(index + 1), highest + 1) << "gap after " << index;
  }
  EXPECT_EQ(index, LatencyHistogram::BucketIndex(std::numeric_limits<int64_t>::max()));
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram histogram;
  for (int64_t v = 0; v < 256; ++v) histogram.Record(v);
  EXPECT_EQ(histogram.count(), 256);
  EXPECT_EQ(histogram.min(), 0);
  EXPECT_EQ(histogram.max(), 255);
  EXPECT_EQ(histogram.ValueAtPercentile(50.0), 127);
  EXPECT_EQ(histogram.ValueAtPercentile(100.0), 255);
  EXPECT_DOUBLE_EQ(histogram.mean(), 127.5);
}

TEST(LatencyHistogramTest, PercentilesMatchSortedValuesWithinBucketPrecision) {
  // Latency-like values: lognormal around 2 ms in nanoseconds, with a heavy tail.
  Rng rng(MixSeed(7, 0));
  std::vector<int64_t> values;
  LatencyHistogram histogram;
  for (int i = 0; i < 100000; ++i) {
    const double value = 2e6 * std::exp(0.8 * StandardNormal(rng));
    values.push_back(static_cast<int64_t>(value));
    histogram.Record(values.back());
  }
  std::sort(values.begin(), values.end());
  for (double p : {0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const int64_t exact = ExactPercentile(values, p);
    const int64_t reported = histogram.ValueAtPercentile(p);
    EXPECT_GE(reported, exact) << "p" << p;
    EXPECT_LE(reported - exact, exact / 128) << "p" << p;
  }
  EXPECT_EQ(histogram.min(), values.front());
  EXPECT_EQ(histogram.max(), values.back());
  EXPECT_EQ(histogram.ValueAtPercentile(100.0), values.back());
  double sum = 0.0;
  for (int64_t v : values) sum += static_cast<double>(v);
  EXPECT_NEAR(histogram.mean(), sum / static_cast<double>(values.size()), 1e-6 * histogram.mean());
}

TEST(LatencyHistogramTest, PercentilesOfFewValues) {
  LatencyHistogram histogram;
  for (int64_t v : {1000, 2000, 3000, 4000}) histogram.Record(v * 1000);
  // ceil(0.5 * 4) = rank 2 -> 2 ms; ceil(0.9 * 4) = rank 4 -> 4 ms.
  EXPECT_GE(histogram.ValueAtPercentile(50.0), 2000000);
  EXPECT_LE(histogram.ValueAtPercentile(50.0), 2000000 + 2000000 / 128);
  EXPECT_EQ(histogram.ValueAtPercentile(90.0), 4000000);  // Clamped to the exact max.
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  LatencyHistogram a;
  LatencyHistogram b;
  LatencyHistogram all;
  Rng rng(MixSeed(3, 0));
  for (int i = 0; i < 5000; ++i) {
    const int64_t v = UniformInt(rng, 0, 50000000);
    (i % 3 == 0 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_NEAR(a.mean(), all.mean(), 1e-9 * all.mean());
  for (double p : {1.0, 50.0, 99.0, 99.9}) {
    EXPECT_EQ(a.ValueAtPercentile(p), all.ValueAtPercentile(p));
  }
  LatencyHistogram empty;
  empty.Merge(all);
  EXPECT_EQ(empty.min(), all.min());
}

TEST(LatencyHistogramTest, EmptyAndNegative) {
  LatencyHistogram histogram;
  EXPECT_EQ(histogram.count(), 0);
  EXPECT_EQ(histogram.ValueAtPercentile(50.0), 0);
  EXPECT_EQ(histogram.mean(), 0.0);
  histogram.Record(-5);
  EXPECT_EQ(histogram.min(), 0);
  EXPECT_EQ(histogram.max(), 0);
  histogram.Record(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(histogram.ValueAtPercentile(100.0), std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace dflash::loadtest
