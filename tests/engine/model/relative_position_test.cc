// engine/model/relative_position.{h,cc}: log buckets and the relative-position index
// (docs/deberta.md#relative-positions).
#include "engine/model/relative_position.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflash {
namespace {

ModelConfig RelativeConfig(int position_buckets, int max_relative_positions,
                           int max_position_embeddings = 512) {
  ModelConfig config;
  config.relative_attention = true;
  config.position_buckets = position_buckets;
  config.max_relative_positions = max_relative_positions;
  config.max_position_embeddings = max_position_embeddings;
  return config;
}

// make_log_bucket_position evaluated exactly (in double), from docs/deberta.md#log-buckets.
int64_t ExactBucket(int64_t r, int buckets, int max_position) {
  const int64_t mid = buckets / 2;
  const int64_t magnitude = r < 0 ? -r : r;
  if (magnitude <= mid) return r;
  const double value =
      std::ceil(std::log(static_cast<double>(magnitude) / static_cast<double>(mid)) /
                std::log(static_cast<double>(max_position - 1) / static_cast<double>(mid)) *
                static_cast<double>(mid - 1)) +
      static_cast<double>(mid);
  return (r < 0 ? -1 : 1) * static_cast<int64_t>(value);
}

TEST(LogBucketPositionTest, DebertaV3ReferencePoints) {
  for (int64_t r = 0; r <= 131; ++r) EXPECT_EQ(LogBucketPosition(r, 256, 512), r) << r;
  const std::vector<std::pair<int64_t, int64_t>> points = {
      {135, 133}, {140, 137}, {150, 143}, {200, 169}, {255, 192}, {256, 192},
      {300, 207}, {400, 233}, {450, 244}, {512, 256}, {600, 270}};
  for (const auto& [r, bucket] : points) {
    EXPECT_EQ(LogBucketPosition(r, 256, 512), bucket) << r;
    EXPECT_EQ(LogBucketPosition(-r, 256, 512), -bucket) << -r;
  }
  for (int64_t r = 500; r <= 505; ++r) EXPECT_EQ(LogBucketPosition(r, 256, 512), 254) << r;
  for (int64_t r = 506; r <= 511; ++r) EXPECT_EQ(LogBucketPosition(r, 256, 512), 255) << r;
}

TEST(LogBucketPositionTest, IsOdd) {
  for (const auto& [buckets, max_position] :
       std::vector<std::pair<int, int>>{{256, 512}, {16, 64}, {8, 32}, {4, 8}, {5, 512}, {2, 4}}) {
    for (int64_t r = 0; r <= 20000; ++r) {
      ASSERT_EQ(LogBucketPosition(-r, buckets, max_position),
                -LogBucketPosition(r, buckets, max_position))
          << r << " " << buckets << "/" << max_position;
    }
  }
}

TEST(LogBucketPositionTest, MatchesTheExactComputation) {
  // docs/deberta.md#log-buckets: for these settings float32 and double agree for |r| <= 2100.
  for (const auto& [buckets, max_position] :
       std::vector<std::pair<int, int>>{{256, 512}, {16, 64}, {8, 32}}) {
    for (int64_t r = -2100; r <= 2100; ++r) {
      ASSERT_EQ(LogBucketPosition(r, buckets, max_position), ExactBucket(r, buckets, max_position))
          << r << " " << buckets << "/" << max_position;
    }
  }
}

TEST(LogBucketPositionTest, SmallDistancesAreIdentity) {
  for (int64_t r = -8; r <= 8; ++r) EXPECT_EQ(LogBucketPosition(r, 16, 64), r);
  EXPECT_EQ(LogBucketPosition(9, 16, 64), ExactBucket(9, 16, 64));
  EXPECT_GT(LogBucketPosition(9, 16, 64), 8);
}

TEST(RelativePositionIndexTest, DebertaV3) {
  const ModelConfig config = RelativeConfig(256, -1);
  const RelativePositionIndex index(config);
  EXPECT_EQ(index.span(), 256);
  EXPECT_EQ(index.band(), 512);
  EXPECT_TRUE(index.settled());
  EXPECT_EQ(index.table().size(), 2u * 512 + 1);
  EXPECT_EQ(index(0), 256);
  EXPECT_EQ(index(1), 257);
  EXPECT_EQ(index(-1), 255);
  EXPECT_EQ(index(505), 256 + 254);
  for (int64_t delta = 506; delta <= 5000; ++delta) ASSERT_EQ(index(delta), 511) << delta;
  EXPECT_EQ(index(int64_t{1} << 40), 511);
  for (int64_t delta = -511; delta <= -506; ++delta) EXPECT_EQ(index(delta), 1) << delta;
  for (int64_t delta = -5000; delta <= -512; ++delta) ASSERT_EQ(index(delta), 0) << delta;
  EXPECT_EQ(index(-(int64_t{1} << 40)), 0);
  // With L <= 512 (|delta| <= 511) the clamp never fires: idx in [1, 511].
  for (int64_t delta = -511; delta <= 511; ++delta) {
    EXPECT_GE(index(delta), 1);
    EXPECT_LE(index(delta), 511);
  }
  int32_t previous = index(-10000);
  for (int64_t delta = -10000; delta <= 10000; ++delta) {
    const int32_t value = index(delta);
    ASSERT_GE(value, previous) << delta;
    previous = value;
    const int64_t expected = std::clamp<int64_t>(LogBucketPosition(delta, 256, 512) + 256, 0, 511);
    ASSERT_EQ(value, expected) << delta;
    ASSERT_EQ(value, std::clamp<int64_t>(ExactBucket(delta, 256, 512) + 256, 0, 511)) << delta;
  }
  for (int64_t delta = -512; delta <= 512; ++delta) {
    EXPECT_EQ(index.table()[static_cast<size_t>(delta + 512)], index(delta));
  }
}

TEST(RelativePositionIndexTest, WithoutBuckets) {
  const ModelConfig config = RelativeConfig(-1, 24);
  const RelativePositionIndex index(config);
  EXPECT_EQ(index.span(), 24);
  EXPECT_EQ(index.band(), 24);
  EXPECT_TRUE(index.settled());
  for (int64_t delta = -3000; delta <= 3000; ++delta) {
    ASSERT_EQ(index(delta), std::clamp<int64_t>(delta + 24, 0, 47)) << delta;
  }
}

TEST(RelativePositionIndexTest, WithoutBucketsUsesMaxPositionEmbeddingsFallback) {
  const ModelConfig config = RelativeConfig(-1, -1, 40);
  const RelativePositionIndex index(config);
  EXPECT_EQ(index.span(), 40);
  for (int64_t delta = -100; delta <= 100; ++delta) {
    ASSERT_EQ(index(delta), std::clamp<int64_t>(delta + 40, 0, 79)) << delta;
  }
}

TEST(RelativePositionIndexTest, ExoticBucketsBeyondTheBand) {
  // mid = 2, span 5: the negative side reaches idx 0 only at |delta| > 2 * 255.5^2, far beyond
  // the search cap, so those deltas are computed on the fly.
  const ModelConfig config = RelativeConfig(5, 512);
  const RelativePositionIndex index(config);
  EXPECT_EQ(index.span(), 5);
  EXPECT_FALSE(index.settled());
  auto direct = [](int64_t delta) {
    return std::clamp<int64_t>(LogBucketPosition(delta, 5, 512) + 5, 0, 9);
  };
  for (const int64_t delta :
       {int64_t{0},         int64_t{3},       int64_t{-3},      int64_t{511},     int64_t{-511},
        int64_t{512},       int64_t{-512},    index.band(),     -index.band(),    index.band() + 1,
        -index.band() - 1,  int64_t{100000},  int64_t{-100000}, int64_t{130560},  int64_t{-130560},
        int64_t{130561},    int64_t{-130561}, int64_t{200000},  int64_t{-200000}, int64_t{1} << 30,
        -(int64_t{1} << 30)}) {
    EXPECT_EQ(index(delta), direct(delta)) << delta;
  }
  EXPECT_EQ(index(200000), 9);
  EXPECT_EQ(index(-200000), 0);
  EXPECT_EQ(index(-100000), 1);
  for (int64_t delta = -300000; delta <= 300000; delta += 7) {
    ASSERT_EQ(index(delta), direct(delta)) << delta;
  }
}

TEST(RelativePositionIndexTest, SmallBucketsSettle) {
  // position_buckets 2 / 3: mid = 1, so every |delta| > 1 lands in bucket +-1.
  for (const int buckets : {2, 3}) {
    const ModelConfig config = RelativeConfig(buckets, 8);
    const RelativePositionIndex index(config);
    EXPECT_TRUE(index.settled()) << buckets;
    for (int64_t delta = -1000; delta <= 1000; ++delta) {
      ASSERT_EQ(index(delta), std::clamp<int64_t>(LogBucketPosition(delta, buckets, 8) + buckets, 0,
                                                  2 * buckets - 1))
          << buckets << " " << delta;
    }
  }
}

TEST(RelativePositionIndexTest, TinyTestModelSettings) {
  // position_buckets 4 / max_relative_positions 8 (the tiny checkpoint of the other tests).
  const ModelConfig config = RelativeConfig(4, 8);
  const RelativePositionIndex index(config);
  EXPECT_EQ(index.span(), 4);
  EXPECT_TRUE(index.settled());
  for (int64_t delta = -200; delta <= 200; ++delta) {
    ASSERT_EQ(index(delta), std::clamp<int64_t>(ExactBucket(delta, 4, 8) + 4, 0, 7)) << delta;
  }
  EXPECT_EQ(index(0), 4);
  EXPECT_EQ(index(2), 6);
  EXPECT_EQ(index(-2), 2);
  EXPECT_EQ(index(3), 7);   // ceil(ln 1.5 / ln 3.5) + 2 = 3 -> clamped to 7.
  EXPECT_EQ(index(-3), 1);  // -3 + 4.
  EXPECT_EQ(index(-8), 0);  // ceil(ln 4 / ln 3.5) + 2 = 4 -> -4 + 4.
}

}  // namespace
}  // namespace dflash
