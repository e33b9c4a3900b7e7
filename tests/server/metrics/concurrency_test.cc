// Concurrent updates must not lose increments; run this under TSan (-DDFLASH_SANITIZE=thread).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "server/metrics/metric_registry.h"
#include "server/metrics/text_exposition.h"

namespace dflash::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 20000;

TEST(MetricsConcurrencyTest, NoLostUpdates) {
  Registry registry;
  auto counters = registry.AddCounterFamily("ops_total", "h", {"kind"});
  auto gauges = registry.AddGaugeFamily("level", "h", {});
  auto histograms = registry.AddHistogramFamily("size_bytes", "h", {}, {10, 100});
  ASSERT_TRUE(counters.ok() && gauges.ok() && histograms.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        // Label lookups race with creation of the same metric in other threads.
        (void)(*(*counters)->WithLabels({"shared"}))->Increment();
        (*(*gauges)->WithLabels({}))->Increment(t % 2 == 0 ? 2 : -1);
        (*(*histograms)->WithLabels({}))->Observe(i % 3 == 0 ? 5 : 50);
        if (i % 1000 == 0) (void)SerializeTextExposition(registry);  // scrapes during updates
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ((*(*counters)->WithLabels({"shared"}))->Value(), double{kThreads} * kIterations);
  EXPECT_EQ((*(*gauges)->WithLabels({}))->Value(), double{kThreads / 2} * kIterations);
  const HistogramSnapshot snapshot = (*(*histograms)->WithLabels({}))->Snapshot();
  const uint64_t total = uint64_t{kThreads} * kIterations;
  const uint64_t small = uint64_t{kThreads} * ((kIterations + 2) / 3);
  EXPECT_EQ(snapshot.cumulative_counts, (std::vector<uint64_t>{small, total, total}));
  EXPECT_EQ(snapshot.count, total);
  EXPECT_EQ(snapshot.sum, 5.0 * small + 50.0 * (total - small));
}

}  // namespace
}  // namespace dflash::metrics
