#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "server/metrics/metric_name.h"
#include "server/metrics/metric_registry.h"

namespace dflash::metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricNameTest, AcceptsAndRejectsPerPrometheusRules) {
  EXPECT_TRUE(ValidateMetricName("dflash:requests_total").ok());
  EXPECT_TRUE(ValidateMetricName("_x9").ok());
  EXPECT_FALSE(ValidateMetricName("").ok());
  EXPECT_FALSE(ValidateMetricName("9x").ok());
  EXPECT_FALSE(ValidateMetricName("a-b").ok());
  EXPECT_FALSE(ValidateMetricName("a b").ok());
  EXPECT_TRUE(ValidateLabelName("model").ok());
  EXPECT_TRUE(ValidateLabelName("_x").ok());
  EXPECT_FALSE(ValidateLabelName("__name__").ok());
  EXPECT_FALSE(ValidateLabelName("a:b").ok());
  EXPECT_FALSE(ValidateLabelName("1a").ok());
  EXPECT_FALSE(ValidateLabelName("").ok());
}

TEST(RegistryTest, RejectsInvalidFamilies) {
  Registry registry;
  EXPECT_EQ(registry.AddGaugeFamily("bad-name", "h", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddGaugeFamily("g", "h", {"__reserved"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddGaugeFamily("g", "h", {"a", "a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto counter = registry.AddCounterFamily("requests", "h", {});
  EXPECT_EQ(counter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(counter.status().message(), HasSubstr("_total"));
  EXPECT_EQ(registry.AddHistogramFamily("h_seconds", "h", {"le"}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // "le" is only reserved for histograms.
  EXPECT_TRUE(registry.AddGaugeFamily("g", "h", {"le"}).ok());
}

TEST(RegistryTest, RejectsBadBucketBounds) {
  Registry registry;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::vector<double>& bounds :
       std::vector<std::vector<double>>{{1, 1}, {2, 1}, {1, inf}, {nan}, {-inf, 0}}) {
    EXPECT_EQ(registry.AddHistogramFamily("h_seconds", "h", {}, bounds).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(registry.AddHistogramFamily("h_seconds", "h", {}, {}).ok());
}

TEST(RegistryTest, RejectsClashingNames) {
  Registry registry;
  ASSERT_TRUE(registry.AddHistogramFamily("latency_seconds", "h", {}, {1}).ok());
  EXPECT_EQ(registry.AddGaugeFamily("latency_seconds", "h", {}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddGaugeFamily("latency_seconds_count", "h", {}).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddGaugeFamily("x_sum", "h", {}).ok());
  EXPECT_EQ(registry.AddHistogramFamily("x", "h", {}, {1}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(FamilyTest, LabelCountMismatchIsAnError) {
  Registry registry;
  auto family = registry.AddCounterFamily("requests_total", "h", {"model", "code"});
  ASSERT_TRUE(family.ok());
  const auto too_few = (*family)->WithLabels({"m"});
  EXPECT_EQ(too_few.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_few.status().message(), HasSubstr("requests_total"));
  EXPECT_EQ((*family)->WithLabels({"m", "ok", "x"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*family)->WithLabels({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FamilyTest, WithLabelsReturnsTheSameMetric) {
  Registry registry;
  auto family = registry.AddGaugeFamily("queue_depth", "h", {"model"});
  ASSERT_TRUE(family.ok());
  auto a = (*family)->WithLabels({"a"});
  auto a_again = (*family)->WithLabels({"a"});
  auto b = (*family)->WithLabels({"b"});
  ASSERT_TRUE(a.ok() && a_again.ok() && b.ok());
  EXPECT_EQ(*a, *a_again);
  EXPECT_NE(*a, *b);
  (*a)->Set(5);
  (*a_again)->Increment(2);
  (*a)->Decrement(0.5);
  EXPECT_EQ((*a)->Value(), 6.5);
  EXPECT_EQ((*b)->Value(), 0.0);
}

// Gauges read from elsewhere (free device memory) are set by hooks that every Collect runs
// first: each scrape sees the value of its own moment.
TEST(RegistryTest, CollectRunsItsHooksFirst) {
  Registry registry;
  auto family = registry.AddGaugeFamily("free_bytes", "h", {"device"});
  ASSERT_TRUE(family.ok());
  auto gauge = (*family)->WithLabels({"gpu0"});
  ASSERT_TRUE(gauge.ok());
  double reading = 100.0;
  registry.AddCollectHook([&] { (*gauge)->Set(reading); });
  int second_hook_calls = 0;
  registry.AddCollectHook([&] { ++second_hook_calls; });
  auto collected_value = [&] {
    const std::vector<MetricFamilySnapshot> snapshots = registry.Collect();
    EXPECT_EQ(snapshots.size(), 1u);
    EXPECT_EQ(snapshots[0].metrics.size(), 1u);
    return snapshots.empty() || snapshots[0].metrics.empty() ? -1.0 : snapshots[0].metrics[0].value;
  };
  EXPECT_EQ(collected_value(), 100.0);
  reading = 42.0;
  EXPECT_EQ(collected_value(), 42.0);
  EXPECT_EQ(second_hook_calls, 2);
}

TEST(CounterTest, RejectsNegativeAndNaNIncrements) {
  Counter counter;
  EXPECT_TRUE(counter.Increment().ok());
  EXPECT_TRUE(counter.Increment(2.5).ok());
  EXPECT_TRUE(counter.Increment(0).ok());
  EXPECT_EQ(counter.Increment(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(counter.Increment(std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(counter.Value(), 3.5);
}

TEST(HistogramTest, CountsAreCumulativeAndBoundsInclusive) {
  Histogram histogram({1, 2, 4});
  for (double v : {0.5, 1.0, 1.5, 4.0, 9.0}) histogram.Observe(v);
  const HistogramSnapshot s = histogram.Snapshot();
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.sum, 16.0);
}

TEST(HistogramTest, NaNAndInfinityLandInInfBucket) {
  Histogram histogram({1});
  histogram.Observe(std::numeric_limits<double>::infinity());
  histogram.Observe(std::nan(""));
  histogram.Observe(-std::numeric_limits<double>::infinity());
  const HistogramSnapshot s = histogram.Snapshot();
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(std::isnan(s.sum));
}

}  // namespace
}  // namespace dflash::metrics
