// A family: one metric name, help text and label names fixed at creation, and one metric per
// distinct set of label values. Same data model as prometheus-cpp's Family<T>.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/metrics/metric.h"
#include "server/metrics/metric_snapshot.h"

namespace dflash::metrics {

class Registry;

// What the registry needs from a family regardless of its metric kind.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  virtual MetricFamilySnapshot Collect() const = 0;
};

template <typename T>
class Family : public FamilyBase {
  static_assert(std::is_same_v<T, Counter> || std::is_same_v<T, Gauge> ||
                std::is_same_v<T, Histogram>);

 public:
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // The metric for these label values (one per label name, in order), created on first use. The
  // pointer stays valid for the family's lifetime. A wrong number of values is InvalidArgument.
  // Label values should come from a small fixed set: each distinct set is kept forever.
  absl::StatusOr<T*> WithLabels(const std::vector<std::string>& label_values) {
    if (label_values.size() != label_names_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric '", name_, "' has ", label_names_.size(), " label(s) [",
          absl::StrJoin(label_names_, ", "), "], got ", label_values.size(), " value(s)"));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = metrics_.try_emplace(label_values);
    if (inserted) {
      if constexpr (std::is_same_v<T, Histogram>) {
        it->second = std::make_unique<Histogram>(bucket_bounds_);
      } else {
        it->second = std::make_unique<T>();
      }
    }
    return it->second.get();
  }

  MetricFamilySnapshot Collect() const override {
    MetricFamilySnapshot family;
    family.name = name_;
    family.help = help_;
    if constexpr (std::is_same_v<T, Counter>) {
      family.type = MetricType::kCounter;
    } else if constexpr (std::is_same_v<T, Gauge>) {
      family.type = MetricType::kGauge;
    } else {
      family.type = MetricType::kHistogram;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    // std::map iterates in label-value order, which keeps the exposition deterministic.
    for (const auto& [values, metric] : metrics_) {
      MetricSnapshot snapshot;
      for (size_t i = 0; i < values.size(); ++i) {
        snapshot.labels.emplace_back(label_names_[i], values[i]);
      }
      if constexpr (std::is_same_v<T, Histogram>) {
        snapshot.histogram = metric->Snapshot();
      } else {
        snapshot.value = metric->Value();
      }
      family.metrics.push_back(std::move(snapshot));
    }
    return family;
  }

 private:
  friend class Registry;

  // Arguments are validated by the Registry, the only creator.
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bucket_bounds)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        bucket_bounds_(std::move(bucket_bounds)) {}

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bucket_bounds_;  // histograms only
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> metrics_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace dflash::metrics
