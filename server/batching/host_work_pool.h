// The scheduler's host threads beside the engine runners: they pack the next batch while an engine
// runs the current one, and answer the requests of finished batches, so that an engine's runner
// does nothing but call Run back to back. Two FIFOs: urgent tasks (packing, which an engine waits
// for) go before the others (answers, which only their callers wait for).
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"

namespace dflash::serving {

class HostWorkPool {
 public:
  explicit HostWorkPool(int threads);  // At least one thread.
  ~HostWorkPool();                     // Stop().

  HostWorkPool(const HostWorkPool&) = delete;
  HostWorkPool& operator=(const HostWorkPool&) = delete;

  enum class Urgency { kUrgent, kNormal };
  // Must not be called after Stop() began.
  void Post(Urgency urgency, absl::AnyInvocable<void()> task);
  // Runs every task posted so far (and those they post), then joins the threads. Idempotent; must
  // not be called from a task.
  void Stop();

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<absl::AnyInvocable<void()>> urgent_ ABSL_GUARDED_BY(mutex_);
  std::deque<absl::AnyInvocable<void()>> normal_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace dflash::serving
