#include "server/metrics/metric.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dflash::metrics {
namespace {

// Lock-free add for atomic<double>; a CAS loop so it does not rely on library support for
// floating-point fetch_add.
void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

}  // namespace

absl::Status Counter::Increment(double amount) {
  if (!(amount >= 0.0)) {  // also rejects NaN
    return absl::InvalidArgumentError(absl::StrCat("counter increment must be >= 0, got ", amount));
  }
  AtomicAdd(value_, amount);
  return absl::OkStatus();
}

void Gauge::Increment(double amount) { AtomicAdd(value_, amount); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  // lower_bound on NaN can stop anywhere; NaN belongs only to +Inf.
  const size_t index = std::isnan(value) ? upper_bounds_.size() : bucket;
  std::lock_guard<std::mutex> lock(mutex_);
  ++bucket_counts_[index];
  sum_ += value;
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t cumulative = 0;
  for (uint64_t count : bucket_counts_) {
    cumulative += count;
    snapshot.cumulative_counts.push_back(cumulative);
  }
  snapshot.count = cumulative;
  snapshot.sum = sum_;
  return snapshot;
}

absl::Status ValidateBucketBounds(const std::vector<double>& upper_bounds) {
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat("histogram bucket bound ", i, " is ",
                                                     upper_bounds[i], "; bounds must be finite"));
    }
    if (i > 0 && !(upper_bounds[i] > upper_bounds[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram bucket bounds must be strictly increasing: bound ", i, " (",
                       upper_bounds[i], ") <= bound ", i - 1, " (", upper_bounds[i - 1], ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflash::metrics
