#include "server/service/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dflash::serving {
namespace {

TEST(WorkerPoolTest, RunsEveryPostedTaskBeforeDestruction) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(3);
    for (int i = 0; i < 1000; ++i) pool.Post([&ran] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 1000);
}

TEST(WorkerPoolTest, ParallelForVisitsEveryIndexOnceAndFinishesOnce) {
  WorkerPool pool(4);
  for (int count : {0, 1, 7, 8, 9, 100, 1001}) {
    std::vector<std::atomic<int>> visits(static_cast<size_t>(count));
    std::promise<absl::Status> finished;
    std::atomic<int> thens{0};
    ParallelFor(
        pool, count, 8,
        [&visits](int i) {
          visits[static_cast<size_t>(i)].fetch_add(1);
          return absl::OkStatus();
        },
        [&](absl::Status status) {
          thens.fetch_add(1);
          finished.set_value(status);
        });
    EXPECT_TRUE(finished.get_future().get().ok());
    EXPECT_EQ(thens.load(), 1);
    for (int i = 0; i < count; ++i) EXPECT_EQ(visits[static_cast<size_t>(i)].load(), 1) << i;
  }
}

TEST(WorkerPoolTest, ParallelForReportsTheLowestFailingIndex) {
  WorkerPool pool(4);
  for (int repeat = 0; repeat < 20; ++repeat) {
    std::promise<absl::Status> finished;
    ParallelFor(
        pool, 200, 1,
        [](int i) {
          return i % 37 == 36 ? absl::InvalidArgumentError(absl::StrCat("inputs[", i, "]"))
                              : absl::OkStatus();
        },
        [&](absl::Status status) { finished.set_value(status); });
    const absl::Status status = finished.get_future().get();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "inputs[36]");
  }
}

}  // namespace
}  // namespace dflash::serving
