// The registry owns metric families and is what an exposition (text format, HTTP endpoint) reads.
// Its surface follows prometheus-cpp (Registry, Family<T>, Counter/Gauge/Histogram) so that library
// can replace this module without changing callers' model.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "server/metrics/metric.h"
#include "server/metrics/metric_family.h"
#include "server/metrics/metric_snapshot.h"

namespace dflash::metrics {

// Every Add* validates its arguments and returns InvalidArgument for a bad metric or label name
// (see metric_name.h), a duplicated label name, or bad bucket bounds; AlreadyExists when the
// family's exposed names clash with an existing family (a histogram `x` also owns x_bucket, x_sum,
// x_count). Families stay valid for the registry's lifetime. Thread-safe.
class Registry {
 public:
  // Counter family names must end in "_total": the name is exposed as given (as prometheus-cpp
  // does), and Prometheus naming wants the suffix on the exposed name.
  absl::StatusOr<Family<Counter>*> AddCounterFamily(std::string name, std::string help,
                                                    std::vector<std::string> label_names);
  absl::StatusOr<Family<Gauge>*> AddGaugeFamily(std::string name, std::string help,
                                                std::vector<std::string> label_names);
  // Label name "le" is reserved (it carries the bucket bound). See ValidateBucketBounds.
  absl::StatusOr<Family<Histogram>*> AddHistogramFamily(std::string name, std::string help,
                                                        std::vector<std::string> label_names,
                                                        std::vector<double> bucket_bounds);

  // Runs before every Collect (in the collecting thread, in the order added), to set gauges
  // that are read from elsewhere rather than updated as things happen (free device memory).
  void AddCollectHook(std::function<void()> hook) ABSL_LOCKS_EXCLUDED(hooks_mutex_);

  // Runs the collect hooks, then snapshots the families in registration order, each with its
  // metrics sorted by label values.
  std::vector<MetricFamilySnapshot> Collect() const;

 private:
  // Validates, reserves the exposed names and appends the family.
  absl::Status Register(MetricType type, const std::string& name,
                        const std::vector<std::string>& label_names,
                        std::unique_ptr<FamilyBase> family) ABSL_LOCKS_EXCLUDED(mutex_);

  // Held while hooks run, so that concurrent scrapes run them one at a time.
  mutable std::mutex hooks_mutex_;
  std::vector<std::function<void()>> hooks_ ABSL_GUARDED_BY(hooks_mutex_);
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mutex_);
  std::set<std::string> exposed_names_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace dflash::metrics
