#include "server/service/call_admission.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics/metric_registry.h"
#include "server/metrics/text_exposition.h"

namespace dflash::serving {
namespace {

TEST(CallAdmissionTest, LimitsInflightRequests) {
  CallAdmission admission(2, nullptr);
  EXPECT_TRUE(admission.Admit().ok());
  EXPECT_TRUE(admission.Admit().ok());
  EXPECT_EQ(admission.Admit().code(), absl::StatusCode::kResourceExhausted);
  admission.Release();
  EXPECT_TRUE(admission.Admit().ok());
  EXPECT_EQ(admission.inflight(), 2);
}

TEST(CallAdmissionTest, DrainingRefusesAndWaitsForTheLastAnswer) {
  CallAdmission admission(0, nullptr);
  ASSERT_TRUE(admission.Admit().ok());
  ASSERT_TRUE(admission.Admit().ok());
  admission.StartDraining();
  EXPECT_TRUE(admission.draining());
  EXPECT_EQ(admission.Admit().code(), absl::StatusCode::kUnavailable);
  // Not idle yet: a wait that has already expired reports it.
  EXPECT_FALSE(admission.WaitIdle(absl::Now()));
  std::thread releaser([&admission] {
    admission.Release();
    admission.Release();
  });
  EXPECT_TRUE(admission.WaitIdle(absl::Now() + absl::Minutes(1)));
  releaser.join();
  EXPECT_EQ(admission.inflight(), 0);
}

// A second signal ends the drain's wait (an infinite one here) while requests are still in flight;
// a wait that is not interruptible still sees the last answer.
TEST(CallAdmissionTest, InterruptEndsInterruptibleWaitsOnly) {
  CallAdmission admission(0, nullptr);
  ASSERT_TRUE(admission.Admit().ok());
  admission.StartDraining();
  std::thread interrupter([&admission] { admission.Interrupt(); });
  EXPECT_FALSE(admission.WaitIdle(absl::InfiniteFuture(), /*interruptible=*/true));
  interrupter.join();
  EXPECT_FALSE(admission.WaitIdle(absl::InfiniteFuture(), /*interruptible=*/true));
  std::thread releaser([&admission] { admission.Release(); });
  EXPECT_TRUE(admission.WaitIdle(absl::InfiniteFuture()));
  releaser.join();
}

// The drain's owner destroys the admission (and the metrics) as soon as WaitIdle sees the last
// answer, so Release must touch neither after letting the count reach zero. TSan and ASan (the
// suites labelled tsan and every ASan test) see an access after that point.
TEST(CallAdmissionTest, OwnerMayDestroyItAsSoonAsWaitIdleReturns) {
  for (int round = 0; round < 200; ++round) {
    metrics::Registry registry;
    std::unique_ptr<ServiceMetrics> metrics = *ServiceMetrics::Create(registry, "test", "r");
    auto admission = std::make_unique<CallAdmission>(0, metrics.get());
    ASSERT_TRUE(admission->Admit().ok());
    std::thread releaser([&admission] { admission->Release(); });
    ASSERT_TRUE(admission->WaitIdle(absl::InfiniteFuture()));
    admission.reset();
    metrics.reset();
    releaser.join();
  }
}

// dflash_inflight_requests, read from the exposition text.
double InflightGauge(const metrics::Registry& registry) {
  const std::string text = metrics::SerializeTextExposition(registry);
  const std::string series = "dflash_inflight_requests ";
  const size_t at = text.find("\n" + series);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + series.size()));
}

// Admits and releases racing on several threads leave the gauge at the count (zero), not at a
// value one of them computed earlier and wrote late.
TEST(CallAdmissionTest, InflightGaugeEndsAtTheCount) {
  metrics::Registry registry;
  std::unique_ptr<ServiceMetrics> metrics = *ServiceMetrics::Create(registry, "test", "r");
  CallAdmission admission(0, metrics.get());
  for (int round = 0; round < 50; ++round) {
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t) {
      callers.emplace_back([&admission] {
        for (int i = 0; i < 200; ++i) {
          ASSERT_TRUE(admission.Admit().ok());
          admission.Release();
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    ASSERT_EQ(admission.inflight(), 0);
    ASSERT_EQ(InflightGauge(registry), 0) << "round " << round;
  }
}

}  // namespace
}  // namespace dflash::serving
