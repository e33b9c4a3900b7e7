#include "server/service/call_admission.h"

#include <gtest/gtest.h>

#include <thread>

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

}  // namespace
}  // namespace dflash::serving
