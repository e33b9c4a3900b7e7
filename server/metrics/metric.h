// The three metric kinds. All are safe to update from any thread; a family owns them and hands out
// stable pointers, so hot paths keep the pointer instead of looking labels up per update.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "server/metrics/metric_snapshot.h"

namespace dflash::metrics {

// Monotonic. Prometheus detects resets only by a decrease, so negative (and NaN) increments are
// rejected rather than applied.
class Counter {
 public:
  absl::Status Increment(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount = 1.0);
  void Decrement(double amount = 1.0) { Increment(-amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Fixed buckets. A mutex (not per-bucket atomics) so a snapshot is consistent: the +Inf bucket
// always equals _count, as Prometheus expects.
class Histogram {
 public:
  // `upper_bounds` must already be validated (see ValidateBucketBounds).
  explicit Histogram(std::vector<double> upper_bounds);

  // Counts into the first bucket with value <= bound; values above every bound, +Inf and NaN land
  // only in +Inf (NaN also makes _sum NaN, as in the Go and Python clients).
  void Observe(double value);
  HistogramSnapshot Snapshot() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> bucket_counts_ ABSL_GUARDED_BY(mutex_);  // per bucket, last is +Inf
  double sum_ ABSL_GUARDED_BY(mutex_) = 0.0;
};

// Bounds must be finite and strictly increasing (an explicit +Inf would duplicate the implicit
// one). An empty list is allowed: the histogram then has only the +Inf bucket.
absl::Status ValidateBucketBounds(const std::vector<double>& upper_bounds);

}  // namespace dflash::metrics
