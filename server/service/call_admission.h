// Server-wide admission: counts requests accepted and not yet answered, refuses new ones over the
// limit (RESOURCE_EXHAUSTED) or while draining (UNAVAILABLE), and lets the drain wait until every
// accepted request has been answered.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/service/service_metrics.h"

namespace dflash::serving {

class CallAdmission {
 public:
  // `max_inflight` <= 0: no limit. `metrics` may be null.
  CallAdmission(int max_inflight, ServiceMetrics* metrics)
      : max_inflight_(max_inflight), metrics_(metrics) {}

  // OK and counted, or the refusal. Every OK must be paired with one Release().
  absl::Status Admit();
  void Release();

  // From now on Admit() refuses with UNAVAILABLE.
  void StartDraining();
  bool draining() const;
  // Waits until no admitted request is left or `deadline` passes (or, when `interruptible`,
  // Interrupt() is called); true when none is left. Once it returned true, the last Release is
  // done with this object and the metrics, so the owner may destroy them.
  bool WaitIdle(absl::Time deadline, bool interruptible = false);
  // Ends every interruptible WaitIdle at once, the current one and later ones: a second signal
  // during a drain ends its grace period. Thread-safe.
  void Interrupt();
  int64_t inflight() const;

 private:
  const int max_inflight_;
  ServiceMetrics* const metrics_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  int64_t inflight_ ABSL_GUARDED_BY(mutex_) = 0;
  bool draining_ ABSL_GUARDED_BY(mutex_) = false;
  bool interrupted_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace dflash::serving
