#include "server/service/call_admission.h"

#include "absl/strings/str_cat.h"

namespace dflash::serving {

// The gauge is set under the lock: in count order, so that it rests at the count, and before the
// last Release lets WaitIdle return, after which the owner may destroy this and the metrics.
absl::Status CallAdmission::Admit() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (draining_) {
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  if (max_inflight_ > 0 && inflight_ >= max_inflight_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the server has ", inflight_,
                     " requests in flight, its limit (server.max_inflight_requests); retry "
                     "with backoff"));
  }
  ++inflight_;
  if (metrics_ != nullptr) metrics_->SetInflight(inflight_);
  return absl::OkStatus();
}

void CallAdmission::Release() {
  std::lock_guard<std::mutex> lock(mutex_);
  --inflight_;
  if (metrics_ != nullptr) metrics_->SetInflight(inflight_);
  if (inflight_ == 0) idle_.notify_all();
}

void CallAdmission::StartDraining() {
  std::lock_guard<std::mutex> lock(mutex_);
  draining_ = true;
}

bool CallAdmission::draining() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return draining_;
}

bool CallAdmission::WaitIdle(absl::Time deadline, bool interruptible) {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait_until(lock, absl::ToChronoTime(deadline),
                   [&] { return inflight_ == 0 || (interruptible && interrupted_); });
  return inflight_ == 0;
}

void CallAdmission::Interrupt() {
  std::lock_guard<std::mutex> lock(mutex_);
  interrupted_ = true;
  idle_.notify_all();
}

int64_t CallAdmission::inflight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inflight_;
}

}  // namespace dflash::serving
