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

}  // namespace
}  // namespace dflash::serving
