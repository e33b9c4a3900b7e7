// A fixed pool of threads for the request work that must not run on gRPC's threads: validation and
// tokenization. Handlers post a task and return at once; the task hands the request to the batcher.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace dflash::serving {

class WorkerPool {
 public:
  // `threads` <= 0: one per hardware thread.
  explicit WorkerPool(int threads);
  ~WorkerPool();  // Runs every task already posted, then joins.

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Post(absl::AnyInvocable<void()> task);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

// Runs body(i) for every i in [0, count) on `pool`, in contiguous chunks of at least `min_chunk`
// indices spread over the pool's threads, then calls `then` exactly once, on the thread that
// finished the last chunk, with OK or the error of the lowest failing index (so the error a client
// sees does not depend on thread timing). `body` is called concurrently for different indices.
void ParallelFor(WorkerPool& pool, int count, int min_chunk,
                 std::function<absl::Status(int index)> body,
                 absl::AnyInvocable<void(absl::Status)> then);

}  // namespace dflash::serving
